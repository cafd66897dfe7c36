#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end cases of dtrain's bootstrap and dtrain-bench, under mpirun (loopback, no Slurm) or
# on the local Slurm cluster (srun --mpi=pmix).
#
#   bootstrap_cases.sh {mpirun|srun} CASE
#
# Environment: DTRAIN_BENCH, DTRAIN_HELPER, DTRAIN_WRAPPER (paths, set by CTest), NP (ranks),
# NODES (srun only). DTRAIN_USE_PLUGIN=1 launches with `srun --distributed-train` instead of
# the test harness dtrain_env_wrapper.py that stands in for the SPANK plugin.
set -uo pipefail

launcher=${1:?launcher}
case_name=${2:?case}
np=${NP:-4}
nodes=${NODES:-1}
bench=${DTRAIN_BENCH:?}
helper=${DTRAIN_HELPER:?}
wrapper=${DTRAIN_WRAPPER:?}
work=$(mktemp -d "$PWD/bootstrap-case.XXXXXX")
# More ranks than cores here: let Open MPI yield instead of spinning in blocking calls.
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
# shellcheck source=tests/cluster/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cluster/check_lib.sh"
trap 'kill ${holder_pid:-} 2>/dev/null; restore_plugstack "$work"; rm -rf "$work"' EXIT
out=$work/output
# check_lib.sh's fail() names the case and shows the output of the last run.
fail_context="$case_name"
fail_files=("$out")

# A base port whose np ports are free on loopback, different for every run.
base_port=$(free_port_block "$np")

env_prefix=("$wrapper" --base-port "$base_port")
plugin_flag=()
if [[ ${DTRAIN_USE_PLUGIN:-0} == 1 ]]; then
  env_prefix=()
  plugin_flag=(--distributed-train)
fi

# run_ranks [--env] CMD... : every rank runs CMD (optionally with the DTRAIN_* variables).
# run_ranks [--env] --last "LAST CMD" CMD... : the last rank runs LAST CMD instead.
run_ranks() {
  local with_env=0 last=""
  [[ $1 == --env ]] && { with_env=1; shift; }
  [[ $1 == --last ]] && { last=$2; shift 2; }
  local prefix=()
  ((with_env)) && prefix=("${env_prefix[@]}")
  ((with_env)) && ((${#prefix[@]})) && prefix+=(--)
  if [[ $launcher == mpirun ]]; then
    local mpi=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader,tcp
               --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
    if [[ -n $last ]]; then
      # shellcheck disable=SC2086
      timeout 120 "${mpi[@]}" -np $((np - 1)) "${prefix[@]}" "$@" : -np 1 "${prefix[@]}" $last
    else
      timeout 120 "${mpi[@]}" -np "$np" "${prefix[@]}" "$@"
    fi
  else
    local srun=(srun --mpi=pmix "${plugin_flag[@]}" -N"$nodes" -n"$np")
    if [[ -n $last ]]; then
      printf '0-%d %s\n%d %s\n' $((np - 2)) "${prefix[*]} $*" $((np - 1)) "${prefix[*]} $last" \
        >"$work/multi.conf"
      timeout 120 "${srun[@]}" --multi-prog "$work/multi.conf"
    else
      timeout 120 "${srun[@]}" "${prefix[@]}" "$@"
    fi
  fi
}

contains() { grep -Eq -- "$1" "$out" || fail "expected output matching: $1"; }

case $case_name in
  collectives)
    # Every collective, type and op, out-of-place and in-place, with the correctness check.
    sweep=(-b 8 -e 4K -f 8)
    [[ $launcher == srun ]] && sweep=(-b 8 -e 4K -f 512)  # slower per call across namespaces
    run_ranks --env "$bench" --op all -d all -o all "${sweep[@]}" -n 2 -w 1 -c 1 >"$out" 2>&1 \
      || fail "dtrain-bench exited with $?"
    [[ $(grep -c "Out of bounds values : 0 OK" "$out") == 7 ]] || fail "expected 7 collectives with 0 wrong"
    contains "^# Peak bus bandwidth"
    ;;
  no-plugin)
    run_ranks "$bench" --op all_reduce -b 1K -e 1K -n 2 >"$out" 2>&1 || fail "exit $?"
    contains "note: no DTRAIN_\* variables"
    [[ $(grep -c "note: no DTRAIN_" "$out") == 1 ]] || fail "the note must appear once"
    ;;
  fingerprint)
    # The last rank runs a copy of the helper with one byte appended: the same program, so
    # every rank makes the same calls, but a different executable hash.
    last=$((np - 1))
    cp "$helper" "$work/helper-copy"
    printf 'x' >>"$work/helper-copy"
    run_ranks --last "$work/helper-copy --mode probe" "$helper" --mode probe >"$out" 2>&1 \
      && fail "a different binary on rank $last was not detected"
    contains "executable hash"
    contains "^ +[0-9a-f]{16} +$last\$"
    contains "pass --allow-mismatch"
    run_ranks --last "$work/helper-copy --mode probe --allow-mismatch" "$helper" --mode probe \
      --allow-mismatch >"$out" 2>&1 || fail "--allow-mismatch must only warn (exit $?)"
    contains "warning: the ranks differ"
    contains "rank $last ok, sum"
    ;;
  blocked-endpoint)
    # Hold the endpoint port of one rank with another process before the job starts.
    # The port in the message: exactly the held one, or (with the plugin's derived ports, which
    # depend on the job id) any of the row of 65 held for local rank 0 (pin_plugin_ports).
    held_count=1
    if [[ $launcher == mpirun ]]; then
      victim=2 hold_addr=127.0.0.1 hold_port=$((base_port + 2)) hold_node="" named_port=$hold_port
    else
      # -N4 -n8 block: rank 6 alone on node3
      victim=6 hold_addr=$(node_address node3) hold_port=$base_port hold_node=node3 named_port=$base_port
    fi
    if [[ ${DTRAIN_USE_PLUGIN:-0} == 1 ]]; then
      pin_plugin_ports "$base_port" "$work"
      held_count=65 named_port="[0-9]+"
    fi
    hold_port "$hold_addr" "$hold_port" "$work" "$hold_node" "$held_count" ||
      fail "could not hold $hold_addr:$hold_port"
    run_ranks --env "$bench" --bootstrap-only >"$out" 2>&1 && fail "the held port was not found"
    contains "rank $victim on [^ ]+ cannot listen on $hold_addr:$named_port: address already in use"
    if [[ $named_port != "$hold_port" ]]; then
      port=$(grep -oE "cannot listen on $hold_addr:[0-9]+" "$out" | head -1 | sed 's/.*://')
      ((port >= hold_port && port < hold_port + held_count)) ||
        fail "the bootstrap named port $port, outside the held $hold_port-$((hold_port + held_count - 1))"
    fi
    contains "rank [0-9]+ on [^ ]+ (reached rank $victim's endpoint|cannot reach rank $victim at)"
    ;;
  env-mismatch)
    env_prefix+=(--corrupt "1:DTRAIN_LOCAL_RANK=5")
    run_ranks --env "$bench" --bootstrap-only >"$out" 2>&1 && fail "the mismatch was not found"
    contains "rank 1 on [^ ]+: DTRAIN_LOCAL_RANK=5 but MPI says local rank 1"
    ;;
  placement)
    # MPI's node for each rank comes from the launcher's PMIx server (PMIX_LOCAL_PEERS); a
    # rank whose DTRAIN_NODE_RANK is not its node's must be named with its node's ranks.
    last=$((np - 1))
    env_prefix+=(--corrupt "$last:DTRAIN_NODE_RANK=1")
    run_ranks --env "$bench" --bootstrap-only >"$out" 2>&1 && fail "the other node rank went unnoticed"
    contains "ranks 0-$last share a node according to MPI but have different DTRAIN_NODE_RANK values \(0-1\)"
    # DTRAIN_NNODES is checked against MPI's count of nodes.
    env_prefix=("$wrapper" --base-port "$base_port")
    for ((r = 0; r < np; r++)); do env_prefix+=(--corrupt "$r:DTRAIN_NNODES=2"); done
    run_ranks --env "$bench" --bootstrap-only >"$out" 2>&1 && fail "DTRAIN_NNODES=2 went unnoticed"
    contains "DTRAIN_NNODES=2 but MPI places the ranks on 1 nodes"
    # One rank asking MPI_Comm_split_type makes every rank ask it; the checks hold the same.
    env_prefix=("$wrapper" --base-port "$base_port" --corrupt "1:DTRAIN_LOCAL_RANK=5")
    run_ranks --env --last "env DTRAIN_BOOTSTRAP_PLACEMENT=split-type $bench --bootstrap-only" \
      "$bench" --bootstrap-only >"$out" 2>&1 && fail "the split_type fallback missed the mismatch"
    contains "rank 1 on [^ ]+: DTRAIN_LOCAL_RANK=5 but MPI says local rank 1"
    env_prefix=("$wrapper" --base-port "$base_port")
    run_ranks --env --last "env DTRAIN_BOOTSTRAP_PLACEMENT=split-type $bench --bootstrap-only" \
      "$bench" --bootstrap-only >"$out" 2>&1 || fail "the split_type fallback failed"
    contains "^# bootstrap time"
    ;;
  event-tick)
    # Open MPI polls for new TCP connections every mpi_event_tick_rate µs: the bootstrap sets
    # 1000 (1 ms) for MPI_Init unless the environment or an Open MPI parameter file sets it, and
    # removes its variable again so that the program's child processes do not inherit it.
    run_ranks --env "$helper" --mode event-tick >"$out" 2>&1 || fail "the bootstrap failed"
    [[ $(grep -c "mpi_event_tick_rate 1000, environment unset\$" "$out") == "$np" ]] ||
      fail "not every rank ran MPI_Init with mpi_event_tick_rate 1000 and then unset the variable"
    OMPI_MCA_mpi_event_tick_rate=4000 run_ranks --env "$helper" --mode event-tick >"$out" 2>&1 ||
      fail "the bootstrap failed with the user's tick rate"
    [[ $(grep -c "mpi_event_tick_rate 4000, environment 4000\$" "$out") == "$np" ]] ||
      fail "the user's OMPI_MCA_mpi_event_tick_rate=4000 did not stand on every rank"
    # The user's own parameter file, $HOME/.openmpi/mca-params.conf (the site's file is still
    # read).
    mkdir -p "$work/home/.openmpi"
    printf '# the user'"'"'s file\nmpi_event_tick_rate = 3000\n' >"$work/home/.openmpi/mca-params.conf"
    HOME=$work/home run_ranks --env "$helper" --mode event-tick >"$out" 2>&1 ||
      fail "the bootstrap failed with a parameter file"
    [[ $(grep -c "mpi_event_tick_rate 3000, environment unset\$" "$out") == "$np" ]] ||
      fail "the parameter file's mpi_event_tick_rate = 3000 did not stand on every rank"
    ;;
  endpoint-list)
    list=$(python3 -c "print(','.join(f'127.0.0.1:{$base_port+i}' for i in range($np)))")
    changed=${list%,*},127.0.0.9:1
    env_prefix+=(--corrupt "1:DTRAIN_ENDPOINTS=$changed")
    run_ranks --env "$bench" --bootstrap-only >"$out" 2>&1 && fail "the differing list was not found"
    contains "differs from rank 0's at entry $((np - 1)): rank 0 has '127.0.0.1:$((base_port + np - 1))', rank 1 has '127.0.0.9:1'"
    ;;
  stall | killed-rank)
    # The last rank passes MPI_Init but never reaches the bootstrap (killed-rank: it is then
    # killed with SIGKILL). Every other rank must give up with a message at the deadline.
    last=$((np - 1))
    run_ranks --last "$helper --mode stall-after-init --pid-file $work/stall.pid" \
      "$bench" --bootstrap-only --timeout 10 >"$out" 2>&1 &
    job=$!
    if [[ $case_name == killed-rank ]]; then
      for _ in $(seq 300); do [[ -s $work/stall.pid ]] && break; sleep 0.1; done
      [[ -s $work/stall.pid ]] || fail "the stalling rank never started"
      kill -9 "$(cat "$work/stall.pid")"
    fi
    wait "$job" && fail "the job succeeded without rank $last"
    contains "dtrain: rank [0-9]+ on [^ ]+: timed out after 10 s waiting for all ranks"
    contains "ranks? $last never arrived"
    ;;
  *)
    echo "dtrain: bootstrap_cases.sh: unknown case $case_name" >&2
    exit 2
    ;;
esac
echo "PASS ($case_name, $launcher, $np ranks)"
