#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Starts the local cluster with one site profile in a state directory of its own, shows that the
# profile's feature is in effect, and takes the cluster down on exit:
#   profile_checks.sh --state-dir DIR [--plugin SO --topology XML] PROFILE
# PROFILE is one of slurm/local/cluster.sh's --profile names. --plugin and --topology (for gres
# and site) load the dtrain plugin with topology=XML, whose GPUs must be the gres devices of a
# node; on fabric the plugin's line carries suffix=-fab, which puts the endpoints on the fabric.
# Exit status 77 with "dtrain: skipped: REASON" when Slurm cannot run the profile here.
set -euo pipefail

# shellcheck source=tests/cluster/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cluster/check_lib.sh"
profile_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
readonly profile_dir

state_dir=""
plugin=""
topology=""
profile=""
while (($#)); do
  case "$1" in
    --state-dir | --plugin | --topology)
      (($# >= 2)) || fail "option $1 needs a value"
      case "$1" in
        --state-dir) state_dir="$2" ;;
        --plugin) plugin="$2" ;;
        --topology) topology="$2" ;;
      esac
      shift
      ;;
    -h | --help)
      sed -n '3,9p' "$0" | cut -c3-
      exit 0
      ;;
    -*) fail "unknown option '$1'; see --help" ;;
    *)
      [[ -z "$profile" ]] || fail "two profiles given ('$profile' and '$1')"
      profile="$1"
      ;;
  esac
  shift
done
[[ -n "$profile" && -n "$state_dir" ]] || fail "usage: $(basename "$0") --state-dir DIR [--plugin SO --topology XML] PROFILE"
fail_context="profile $profile"

skip() {
  echo "dtrain: skipped: $*"
  exit 77
}

profile_checks_py() {
  /usr/bin/python3 "$profile_dir/profile_checks.py" "$@"
}

# kill_descendants PID: SIGTERM to every process below PID, deepest first (an srun left behind
# would retry a stopped slurmctld for minutes, holding ctest's output pipe).
kill_descendants() {
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    kill_descendants "$child"
    kill -TERM "$child" 2>/dev/null || true
  done
}

# shellcheck disable=SC2317 # called by the EXIT trap
take_cluster_down() {
  kill_descendants $$
  "$dtrain_cluster_sh" down --state-dir "$state_dir" >/dev/null || echo "dtrain: warning: down of $state_dir failed" >&2
}

bring_cluster_up() {
  mkdir -p "$state_dir"
  work_dir=$(mktemp -d -p "$state_dir" checks.XXXXXX)
  if [[ -n "$plugin" ]]; then
    [[ -f "$plugin" && ( -z "$topology" || -f "$topology" ) ]] || fail "--plugin '$plugin' or --topology '$topology' is not a file"
    # The fabric profile names its nodes' fabric addresses nodeK-fab, as sites name IPoIB ones.
    echo "required $plugin${topology:+ topology=$topology}$([[ "$profile" != fabric ]] || echo " suffix=-fab")" \
      >"$state_dir/plugstack.conf"
  else
    : >"$state_dir/plugstack.conf"
  fi
  trap take_cluster_down EXIT
  if ! "$dtrain_cluster_sh" up --state-dir "$state_dir" --profile "$profile" --plugstack "$state_dir/plugstack.conf" \
    2>"$work_dir/up.err"; then
    cat "$work_dir/up.err" >&2
    # Profiles that need more of the machine than a plain cluster does skip when Slurm refuses
    # them (cluster.sh then prints Slurm's errors); the others have no such excuse.
    local slurm_error
    slurm_error=$(grep -A1 'did not start; Slurm says:' "$work_dir/up.err" | sed -n '2s/^dtrain: *//p')
    if [[ -n "$slurm_error" && "$profile" =~ ^(cgroup|tmpfs|gres|site)$ ]]; then
      skip "Slurm cannot run profile $profile here: $slurm_error (cluster.sh up names what it needs)"
    fi
    fail "cluster.sh up --profile $profile failed (its output above names Slurm's error)"
  fi
  cat "$work_dir/up.err" >&2
  # shellcheck disable=SC1091
  source "$state_dir/env.sh"
}

# run_job OUTPUT SRUN_ARGS...: srun with its output in OUTPUT (stderr beside it in OUTPUT.err).
# A task that fails to launch fails the check even though Slurm 22.05's srun then exits 0 (seen
# with "task 0 launch failed: Plugin initialization failed").
run_job() {
  local output="$1" job
  shift
  job=$(basename "$output")
  if ! srun "$@" >"$output" 2>"$output.err"; then
    fail_files=("$output" "$output.err")
    fail "job $job (srun $*) failed"
  fi
  if grep -q 'launch failed' "$output.err"; then
    grep -h -E 'error: (dtrain|spank)' "$state_dir"/log/slurmd.*.log | tail -n 6 >"$output.slurmd" || true
    fail_files=("$output" "$output.err" "$output.slurmd")
    fail "job $job (srun $*): a task did not launch, though srun exited 0"
  fi
}

# concurrently NAME_A NAME_B REPORT SRUN_ARGS...: two jobs of the same srun SRUN_ARGS bash -c
# REPORT that run at the same time: every task leaves a marker and waits for one of the other
# job before it runs REPORT. Outputs go to work_dir/NAME_A and work_dir/NAME_B.
concurrently() {
  local name_a="$1" name_b="$2" report="$3"
  shift 3
  mkdir -p "$work_dir/markers"
  # shellcheck disable=SC2016 # expanded by each task
  local meet='touch "$0/$1.$SLURM_PROCID"
    for ((i = 0; i < 300; i++)); do
      compgen -G "$0/$2.*" >/dev/null && break
      sleep 0.1
    done
    compgen -G "$0/$2.*" >/dev/null || { echo "dtrain: job $1 never saw job $2 running" >&2; exit 3; }
    '"$report"
  run_job "$work_dir/$name_a" "$@" bash -c "$meet" "$work_dir/markers" "$name_a" "$name_b" &
  local first_pid=$!
  run_job "$work_dir/$name_b" "$@" bash -c "$meet" "$work_dir/markers" "$name_b" "$name_a"
  local first_status=0
  wait "$first_pid" || first_status=$?
  ((first_status == 0)) || exit "$first_status"
}

# The widest step the profile runs: with cores confined, a node runs no more tasks than this
# machine has CPUs (Slurm: "Unable to layout tasks on given cpus"); else Slurm's 4,2,1,1 layout.
step_shape() {
  if [[ "$profile" == cgroup || "$profile" == site ]]; then
    echo "-N2 -n4 --ntasks-per-node=2"
  else
    echo "-N4 -n8"
  fi
}

# The ports a step reserves are (most tasks on one node + 1), from the step's own range.
reserved_ports_for_shape() {
  if [[ "$(step_shape)" == "-N4 -n8" ]]; then echo 5; else echo 3; fi
}

check_default() {
  local shape
  read -ra shape <<<"$(step_shape)"
  # shellcheck disable=SC2016 # expanded by each task
  run_job "$work_dir/step" "${shape[@]}" bash -c 'echo "$SLURMD_NODENAME $SLURM_STEP_TASKS_PER_NODE ${SLURM_DISTRIBUTION:-unset} ${SLURM_STEP_RESV_PORTS:-unset}"'
  expect_equal "tasks per node, distribution and reserved ports of srun -N4 -n8" \
    "$(cut -d' ' -f2- "$work_dir/step" | sort -u)" "4,2,1(x2) unset unset"
  # The node's /tmp is one for all jobs; the tmpfs profile's check expects the opposite.
  run_job "$work_dir/write" -w node1 -N1 -n1 bash -c "echo seen >/tmp/dtrain-profile-$$"
  run_job "$work_dir/read" -w node1 -N1 -n1 bash -c "cat /tmp/dtrain-profile-$$ 2>/dev/null || echo absent; rm -f /tmp/dtrain-profile-$$"
  expect_equal "a file the previous job wrote to node1's /tmp" "$(cat "$work_dir/read")" seen
}

check_reserved_ports() {
  local range shape
  range=$(scontrol show config | awk '$1 == "MpiParams" { sub(/^ports=/, "", $3); print $3 }')
  [[ "$range" =~ ^[0-9]+-[0-9]+$ ]] || fail "MpiParams of the running slurmctld is '$range', expected ports=A-B"
  echo "dtrain: ok: slurmctld runs with MpiParams=ports=$range"
  read -ra shape <<<"$(step_shape)"
  # shellcheck disable=SC2016 # expanded by each task
  concurrently wide narrow 'echo "$SLURMD_NODENAME $SLURM_PROCID ${SLURM_STEP_RESV_PORTS:-none}"' "${shape[@]}"
  profile_checks_py resv-ports "$work_dir/wide" --range "$range" --count "$(reserved_ports_for_shape)" \
    --other "$work_dir/narrow"
  # Slurm 22.05: --resv-ports without a count asks for zero ports (srun -v: "resv-ports : 0").
  # shellcheck disable=SC2016 # expanded by the task
  run_job "$work_dir/no-count" --resv-ports -N1 -n1 bash -c 'echo "${SLURM_STEP_RESV_PORTS-unset}"'
  expect_equal "SLURM_STEP_RESV_PORTS of srun --resv-ports (no count)" "$(cat "$work_dir/no-count")" unset
}

check_pack() {
  local shape select_parameters
  select_parameters=$(scontrol show config | awk '$1 == "SelectTypeParameters" { print $3 }')
  [[ ",$select_parameters," == *,CR_PACK_NODES,* ]] ||
    fail "slurmctld runs with SelectTypeParameters=$select_parameters, without CR_Pack_Nodes"
  echo "dtrain: ok: slurmctld runs with SelectTypeParameters=$select_parameters"
  read -ra shape <<<"$(step_shape)"
  # shellcheck disable=SC2016 # expanded by each task
  run_job "$work_dir/pack" "${shape[@]}" bash -c 'echo "${SLURM_DISTRIBUTION:-unset}"'
  expect_equal "SLURM_DISTRIBUTION of a step without -m" "$(sort -u "$work_dir/pack")" pack
  # shellcheck disable=SC2016 # expanded by each task
  run_job "$work_dir/cyclic" -m cyclic "${shape[@]}" bash -c 'echo "${SLURM_DISTRIBUTION:-unset}"'
  expect_equal "SLURM_DISTRIBUTION of a step with -m cyclic" "$(sort -u "$work_dir/cyclic")" cyclic
}

check_cgroup() {
  local machine_cpus
  machine_cpus=$(cat /sys/devices/system/cpu/online)
  (($(nproc --all) >= 2)) || skip "two jobs can have disjoint cores only on a machine with 2 CPUs or more; this one has $(nproc --all)"
  # shellcheck disable=SC2016 # expanded by each task
  concurrently first second 'echo "$(awk "/^Cpus_allowed_list/ { print \$2 }" /proc/self/status) $(cat /proc/self/cpuset)"' \
    -w node1 -N1 -n1
  local job cpuset
  for job in first second; do
    cpuset=$(cut -d' ' -f2 "$work_dir/$job")
    expect_line "cgroup of job $job" '^/slurm_node1/uid_[0-9]+/job_[0-9]+/step_0$' "$cpuset"
    cut -d' ' -f1 "$work_dir/$job" >"$work_dir/$job.cpus"
  done
  profile_checks_py disjoint-cpus "$work_dir/first.cpus" "$work_dir/second.cpus" --machine-cpus "$machine_cpus"
  if [[ -n "$plugin" ]]; then
    # The plugin plans inside each job's cpuset: what it exports is what the task runs on.
    # shellcheck disable=SC2016 # expanded by each task
    concurrently first-bound second-bound 'echo "$(awk "/^Cpus_allowed_list/ { print \$2 }" /proc/self/status) $OMP_NUM_THREADS $DTRAIN_CPU_LIST"' \
      -w node1 -N1 -n1 --distributed-train
    profile_checks_py applied-cpus "$work_dir/first-bound" "$work_dir/second-bound"
  fi
}

check_tmpfs() {
  local marker="/tmp/dtrain-profile-$$"
  run_job "$work_dir/write" -w node1 -N1 -n1 bash -c "echo seen >$marker && cat $marker"
  expect_equal "the job's own file in its /tmp" "$(cat "$work_dir/write")" seen
  run_job "$work_dir/read" -w node1 -N1 -n1 bash -c "cat $marker 2>/dev/null || echo absent"
  expect_equal "the previous job's file in the next job's /tmp on node1" "$(cat "$work_dir/read")" absent
  expect_equal "the job's file in node1's own /tmp" \
    "$("$dtrain_cluster_sh" --state-dir "$state_dir" exec node1 -- sh -c "cat $marker 2>/dev/null || echo absent")" absent
  # The tasks of such a job have a /tmp of their own; cluster.sh still counts them as node1's.
  local sleeper tries listed=""
  srun -w node1 -N1 -n1 sleep 60 >/dev/null 2>&1 &
  sleeper=$!
  for ((tries = 0; tries < 100; tries++)); do
    listed=$("$dtrain_cluster_sh" ps --state-dir "$state_dir" | awk '$1 == "node1" && $3 == "sleep" && $NF == "60"')
    [[ -n "$listed" ]] && break
    kill -0 "$sleeper" 2>/dev/null || break
    sleep 0.2
  done
  [[ -n "$listed" ]] || fail "cluster.sh ps does not list the task of a running job on node1"
  echo "dtrain: ok: cluster.sh ps lists the job's task: $listed"
  local task_pid
  task_pid=$(awk '{ print $2; exit }' <<<"$listed")
  [[ "$(stat -L -c %d:%i "/proc/$task_pid/root/tmp")" != "$(stat -L -c %d:%i "$state_dir/tmp/node1")" ]] ||
    fail "the task of a running job (pid $task_pid) has node1's /tmp, not one of its job's own"
  echo "dtrain: ok: the task of a running job has a /tmp other than node1's"
  kill "$sleeper" 2>/dev/null || true
}

check_gres() {
  expect_equal "gres of the nodes (sinfo)" "$(sinfo -h -N -o '%N %G' | sort -u | tr '\n' ' ')" \
    "node1 gpu:4 node2 gpu:4 node3 gpu:4 node4 gpu:4 "
  local devices
  # shellcheck disable=SC2016 # expanded on the node
  devices=$("$dtrain_cluster_sh" --state-dir "$state_dir" exec node2 -- sh -c 'for f in "$0"/nvidia*; do stat -c "%n %F %t:%T" "$f"; done' "$state_dir/gres-dev")
  expect_equal "GPU device files on node2" "$(tr '\n' ' ' <<<"${devices//"$state_dir/gres-dev/"/}")" \
    "nvidia0 character special file c3:0 nvidia1 character special file c3:1 nvidia2 character special file c3:2 nvidia3 character special file c3:3 "
  [[ -z "$(ls -A "$state_dir/gres-dev")" ]] || fail "the host's $state_dir/gres-dev is not empty: the devices belong in the nodes' namespaces"
  # shellcheck disable=SC2016 # expanded by each task
  concurrently first second 'echo "$SLURMD_NODENAME ${SLURM_STEP_GPUS:-unset} ${CUDA_VISIBLE_DEVICES:-unset}"' \
    -w node1 -N1 -n1 --gpus=2
  local first second
  first=$(cat "$work_dir/first")
  second=$(cat "$work_dir/second")
  expect_line "SLURM_STEP_GPUS and CUDA_VISIBLE_DEVICES of the first job" '^node1 [0-3],[0-3] [0-3],[0-3]$' "$first"
  expect_equal "GPUs of two concurrent jobs on node1, together" \
    "$(echo "${first#node1 }" "${second#node1 }" | cut -d' ' -f1,3 | tr ' ,' '\n' | sort | tr '\n' ' ')" "0 1 2 3 "
  if [[ -n "$plugin" ]]; then
    # shellcheck disable=SC2016 # expanded by each task
    run_job "$work_dir/bus-ids" -w node1 -N1 --ntasks-per-node=2 --gpus-per-node=4 --distributed-train \
      bash -c 'echo "$SLURM_PROCID ${DTRAIN_GPU_BUS_IDS:-none}"'
    profile_checks_py gpu-bus-ids "$work_dir/bus-ids" --topology "$topology" --gpus 4
    # The GPU view: two jobs of two one-GPU tasks each on node1 at once; every task sees its
    # job's two GPUs, device LOCAL_RANK its own, and never the other job's.
    # shellcheck disable=SC2016 # expanded by each task
    concurrently view-first view-second \
      'echo "$SLURM_LOCALID ${SLURM_STEP_GPUS:-unset} ${CUDA_VISIBLE_DEVICES:-unset} ${DTRAIN_CUDA_DEVICE:-unset} ${DTRAIN_GPU_BUS_IDS:-unset}"' \
      -w node1 -N1 -n2 --gpus=2 --distributed-train
    profile_checks_py gpu-view "$work_dir/view-first" "$work_dir/view-second" --topology "$topology"
  fi
}

check_debian_hosts() {
  # shellcheck disable=SC2016 # expanded by each task
  run_job "$work_dir/lookups" -N4 -n4 bash -c 'read -r own _ < <(getent ahostsv4 node1); echo "$SLURMD_NODENAME $own"'
  local node expected
  for node in node1 node2 node3 node4; do
    expected=$(node_address node1)
    [[ $node != node1 ]] || expected=127.0.1.1
    expect_equal "address of node1 as $node resolves it" "$(awk -v node="$node" '$1 == node { print $2 }' "$work_dir/lookups")" "$expected"
  done
  if [[ -n "$plugin" ]]; then
    # node1 would list itself as 127.0.1.1 while the others list its real address: the plugin
    # refuses the step, naming the node, the address and the hosts line.
    if srun -N4 -n4 --distributed-train true >"$work_dir/loopback.out" 2>"$work_dir/loopback.err"; then
      fail "a step with node1 at 127.0.1.1 ran under address=ip"
    fi
    grep -q "node node1 resolves to the loopback address 127.0.1.1 on node1 (from its hosts file: '127.0.1.1 node1')" "$work_dir/loopback.err" ||
      { fail_files=("$work_dir/loopback.err"); fail "the loopback error does not name node1, 127.0.1.1 and the hosts line"; }
    run_job "$work_dir/without-node1" -w node2,node3,node4 -N3 -n3 --distributed-train true
    echo "dtrain: ok: the plugin refuses a step with node1 at 127.0.1.1, naming the hosts line; a step without node1 runs"
  fi
}

# fabric_address NODE: NODE's address on the fabric (from env.sh).
fabric_address() {
  local entry
  for entry in ${DTRAIN_CLUSTER_FABRIC_ADDRESSES:?env.sh of a fabric cluster sets it}; do
    [[ ${entry%%=*} == "$1" ]] && echo "${entry#*=}" && return 0
  done
  fail "no fabric address for node '$1' in DTRAIN_CLUSTER_FABRIC_ADDRESSES ($DTRAIN_CLUSTER_FABRIC_ADDRESSES)"
}

# connect_from NODE ADDRESS PORT EXPECT LIMIT WHAT: one TCP connect from NODE (profile_checks.py
# connect: EXPECT is connects, fails or times-out within LIMIT seconds).
connect_from() {
  "$dtrain_cluster_sh" --state-dir "$state_dir" exec "$1" -- /usr/bin/python3 "$profile_dir/profile_checks.py" \
    connect "$2" "$3" --expect "$4" --limit "$5" --what "$6"
}

cluster_sh() {
  "$dtrain_cluster_sh" "$@" --state-dir "$state_dir"
}

check_fabric() {
  [[ -n "$plugin" ]] || fail "the fabric profile's check needs --plugin (the endpoints come from the plugin)"
  expect_line "the plugin's line in plugstack.conf" ' suffix=-fab( |$)' "$(grep spank_dtrain "$state_dir/plugstack.conf")"
  # Slurm stays on the management network.
  expect_equal "NodeAddr of node2 in slurmctld" "$(scontrol show node node2 | grep -o 'NodeAddr=[^ ]*')" \
    "NodeAddr=$(node_address node2)"
  # shellcheck disable=SC2016 # expanded by each task
  run_job "$work_dir/endpoints" -N4 -n4 --distributed-train \
    bash -c 'echo "$SLURMD_NODENAME ${MASTER_ADDR:-unset} ${DTRAIN_MASTER_ADDR:-unset} ${DTRAIN_ENDPOINTS:-unset}"'
  profile_checks_py fabric-endpoints "$work_dir/endpoints" --fabric "$DTRAIN_CLUSTER_FABRIC_ADDRESSES" \
    --management "$DTRAIN_CLUSTER_NODE_ADDRESSES"

  # node2's fabric link down: slurmd answers on the management network, the fabric does not.
  local slurmd_port node2_fabric
  slurmd_port=$(scontrol show config | awk '$1 == "SlurmdPort" { print $3 }')
  node2_fabric=$(fabric_address node2)
  connect_from node1 "$node2_fabric" "$slurmd_port" connects 5 "node2's fabric address, link up"
  cluster_sh fabric-down node2
  expect_line "state of node2 in sinfo after fabric-down" '^(idle|mixed|allocated)$' "$(sinfo -h -n node2 -N -o '%T')"
  # shellcheck disable=SC2016 # expanded by the task
  run_job "$work_dir/down-node2" -w node2 -N1 -n1 \
    bash -c 'echo "$(hostname) $(cat "/sys/class/net/$0/carrier") $(cat "/sys/class/net/$0/operstate")"' "$DTRAIN_CLUSTER_FABRIC_IFNAME"
  expect_line "hostname, carrier and operstate of $DTRAIN_CLUSTER_FABRIC_IFNAME in a task on node2 after fabric-down" \
    '^node2 0 (down|lowerlayerdown)$' "$(cat "$work_dir/down-node2")"
  connect_from node1 "$node2_fabric" "$slurmd_port" fails 3 "node2's fabric address, link down"
  connect_from node1 "$(node_address node2)" "$slurmd_port" connects 5 "node2's management address, fabric link down"
  cluster_sh fabric-up node2
  # shellcheck disable=SC2016 # expanded by the task
  run_job "$work_dir/up-node2" -w node2 -N1 -n1 \
    bash -c 'echo "$(cat "/sys/class/net/$0/carrier") $(cat "/sys/class/net/$0/operstate")"' "$DTRAIN_CLUSTER_FABRIC_IFNAME"
  expect_equal "carrier and operstate of $DTRAIN_CLUSTER_FABRIC_IFNAME on node2 after fabric-up" "$(cat "$work_dir/up-node2")" "1 up"
  connect_from node1 "$node2_fabric" "$slurmd_port" connects 5 "node2's fabric address, link up again"

  # A blackholed port on node3's fabric address: no answer there; its other ports and the same
  # port on the management address still answer.
  local port node3_fabric
  port=$(free_port_block 1)
  node3_fabric=$(fabric_address node3)
  hold_port 0.0.0.0 "$port" "$work_dir" node3 || fail "cannot listen on port $port on node3"
  connect_from node1 "$node3_fabric" "$port" connects 5 "a listening port of node3's fabric address"
  cluster_sh blackhole node3 "$port"
  connect_from node1 "$node3_fabric" "$port" times-out 2 "the blackholed port of node3's fabric address"
  connect_from node1 "$node3_fabric" "$slurmd_port" connects 5 "another port of node3's fabric address, one port blackholed"
  connect_from node1 "$(node_address node3)" "$port" connects 5 "the blackholed port on node3's management address"
  cluster_sh unblackhole node3 "$port"
  connect_from node1 "$node3_fabric" "$port" connects 5 "node3's fabric port after unblackhole"
  # The whole fabric interface blackholed: its link stays up, nothing passes either way; the
  # management address still answers.
  cluster_sh blackhole node3 all
  expect_line "the state of node3's fabric with every packet dropped" \
    "^node3 +$DTRAIN_CLUSTER_FABRIC_IFNAME .*blackholed: all \(every packet\)" "$(cluster_sh status | grep '^node3 ')"
  connect_from node1 "$node3_fabric" "$slurmd_port" times-out 2 "node3's fabric address, every packet dropped"
  connect_from node1 "$(node_address node3)" "$slurmd_port" connects 5 "node3's management address, fabric blackholed"
  # shellcheck disable=SC2016 # expanded by the task
  run_job "$work_dir/blackholed-node3" -w node3 -N1 -n1 \
    bash -c 'echo "$(cat "/sys/class/net/$0/carrier") $(cat "/sys/class/net/$0/operstate")"' "$DTRAIN_CLUSTER_FABRIC_IFNAME"
  expect_equal "carrier and operstate of node3's blackholed $DTRAIN_CLUSTER_FABRIC_IFNAME" "$(cat "$work_dir/blackholed-node3")" "1 up"
  cluster_sh unblackhole node3 all
  connect_from node1 "$node3_fabric" "$port" connects 5 "node3's fabric address after unblackhole all"
  kill "$holder_pid" 2>/dev/null || true

  # down removes the fabric with the rest: no bridge, veth or address in its subnet is left.
  local fabric_subnet=$DTRAIN_CLUSTER_FABRIC_SUBNET
  kill_descendants $$
  "$dtrain_cluster_sh" down --state-dir "$state_dir" >/dev/null
  expect_equal "interfaces with an address in the fabric subnet $fabric_subnet after down" \
    "$(ip -4 -o addr show to "$fabric_subnet" | awk '{ print $2 }' | tr '\n' ' ')" ""
  expect_equal "fabric interfaces of $state_dir after down" \
    "$(grep -lxF "$state_dir" /sys/class/net/dtrainf*/ifalias 2>/dev/null | tr '\n' ' ')" ""
}

case "$profile" in
  default | reserved-ports | pack | cgroup | tmpfs | gres | debian-hosts | site | fabric) ;;
  *) fail "unknown profile '$profile'" ;;
esac
bring_cluster_up
case "$profile" in
  site)
    for feature in reserved_ports pack cgroup tmpfs gres; do
      "check_$feature"
    done
    ;;
  *) "check_${profile//-/_}" ;;
esac
echo "dtrain: ok: profile $profile is in effect"
