#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks of the local Slurm cluster itself (slurm/local/cluster.sh): cluster_checks.sh CHECK
# Runs with the cluster's env.sh sourced (see run_with_cluster_env.sh). Each check prints what it
# saw and fails with a message naming the difference. This script drives srun, sbatch and the
# daemons; cluster_checks.py reads what they printed and holds the expectations on it.
set -euo pipefail

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '3,6p' "$0" | cut -c3-
  echo "CHECK: wildcard-bind, network-lifecycle, block-layout, cyclic-layout, concurrent-jobs, up-idempotent, crash-recovery,"
  echo "       sbatch-steps MPI_CHECK, scancel-cleans-up, cpu-share, pmix-barrier CHECKER -N<n> -n<n> SLOW_RANK"
  exit 0
fi

cluster_sh="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)/slurm/local/cluster.sh"
readonly cluster_sh
: "${DTRAIN_CLUSTER_DIR:?dtrain: DTRAIN_CLUSTER_DIR is unset; source the cluster env.sh first}"

# shellcheck source=tests/cluster/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

checks_py() {
  /usr/bin/python3 "$dtrain_check_dir/cluster_checks.py" "$@"
}

# Runs one step; every task prints one line of facts about itself, sorted by global rank:
#   rank node hostname step_tasks_per_node step_nodelist tmp_identity shm_device own_address node3_address
# (cluster_checks.py step-layout reads them by these names).
run_step() {
  # shellcheck disable=SC2016 # expanded by each task
  srun --kill-on-bad-exit=1 "$@" bash -c '
    read -r own _ < <(getent ahostsv4 "$(hostname)")
    read -r node3 _ < <(getent ahostsv4 node3)
    echo "$SLURM_PROCID $SLURMD_NODENAME $(hostname) $SLURM_STEP_TASKS_PER_NODE $SLURM_STEP_NODELIST" \
      "$(stat -c %d:%i /tmp) $(stat -c %d /dev/shm) ${own:-none} ${node3:-none}"' | sort -n
}

# The layout of one step, and that the nodes look like separate machines: own hostname, /tmp,
# /dev/shm and loopback address.
check_block_layout() {
  local tasks
  tasks=$(run_step -N4 -n8)
  echo "$tasks"
  checks_py step-layout <(echo "$tasks") --tasks 8 --nodes 4 --tasks-per-node "4,2,1(x2)" \
    --ranks-by-node "node1:0,1,2,3 node2:4,5 node3:6 node4:7"
}

check_cyclic_layout() {
  local tasks
  tasks=$(run_step -N3 -n5 -m cyclic)
  echo "$tasks"
  checks_py step-layout <(echo "$tasks") --tasks 5 --nodes 3 --tasks-per-node "3,1(x2)" \
    --first-node-ranks 0,3,4 --ranks-by-node "node1:0,3,4 node2:1 node3:2"
}

# Both jobs' tasks leave a marker and wait until all tasks of the other job have left theirs, so
# the check passes only when the two jobs really run at the same time.
check_concurrent_jobs() {
  local meeting_dir
  meeting_dir=$(mktemp -d -p "$DTRAIN_CLUSTER_DIR" concurrent.XXXXXX)
  # shellcheck disable=SC2064 # the local variable is gone when the trap runs
  trap "rm -rf -- $(printf %q "$meeting_dir")" EXIT
  mkdir "$meeting_dir/markers"
  # shellcheck disable=SC2016 # expanded by each task
  local -a job_step=(srun --kill-on-bad-exit=1 -N4 -n4 bash -c '
    touch "$0/$1.$SLURM_PROCID"
    for ((i = 0; i < 300; i++)); do
      (($(ls "$0" | grep -c "^$2\\.") == 4)) && { echo "$1 $SLURM_PROCID $(hostname) $SLURM_JOB_ID $SLURM_JOB_NODELIST"; exit 0; }
      sleep 0.1
    done
    echo "dtrain: job $1 task $SLURM_PROCID on $(hostname) never saw job $2 running" >&2
    exit 1')
  "${job_step[@]}" "$meeting_dir/markers" first second >"$meeting_dir/first.out" &
  local first_pid=$!
  local second_status=0 first_status=0
  "${job_step[@]}" "$meeting_dir/markers" second first >"$meeting_dir/second.out" || second_status=$?
  wait "$first_pid" || first_status=$?
  cat "$meeting_dir/first.out" "$meeting_dir/second.out"
  ((first_status == 0 && second_status == 0)) ||
    fail "the two jobs did not run at the same time (exit statuses $first_status and $second_status)"
  checks_py concurrent-jobs "$meeting_dir/first.out" "$meeting_dir/second.out"
}

# What `cluster.sh status` prints: each daemon and its pid (it exits 1 when one is stopped,
# which cluster_checks.py daemons reports by name).
daemon_status() {
  "$cluster_sh" status --state-dir "$DTRAIN_CLUSTER_DIR" || true
}

check_hostname_step() {
  expect_equal "hosts of srun -N4 -n4 hostname" "$(srun --kill-on-bad-exit=1 -N4 -n4 hostname | sort | paste -sd,)" \
    "node1,node2,node3,node4"
}

check_up_idempotent() {
  local before after
  before=$(daemon_status)
  "$cluster_sh" up --state-dir "$DTRAIN_CLUSTER_DIR"
  "$cluster_sh" up --state-dir "$DTRAIN_CLUSTER_DIR"
  after=$(daemon_status)
  checks_py daemons "$after" --running 5 --unchanged-from "$before"
  check_hostname_step
}

# Kills every daemon with SIGKILL while a step runs, as a crash would, and expects up to clear the
# orphaned steps and tasks and bring back a working cluster.
check_crash_recovery() {
  local before after probe="dtrain-crash-probe-$$" tries
  before=$(daemon_status)
  checks_py daemons "$before" --running 5
  srun -N4 -n4 bash -c "exec -a $probe sleep 600" &
  local step_pid=$!
  for ((tries = 0; tries < 300 && $(pgrep -fc "^$probe" || true) < 4; tries++)); do
    sleep 0.1
  done
  expect_equal "tasks of the running step" "$(pgrep -fc "^$probe" || true)" 4
  # shellcheck disable=SC2046
  kill -KILL $(checks_py daemon-pids "$before")
  kill -KILL "$step_pid"
  wait "$step_pid" 2>/dev/null || true
  if "$cluster_sh" status --state-dir "$DTRAIN_CLUSTER_DIR"; then
    fail "status reports a cluster whose daemons were killed as running"
  fi
  "$cluster_sh" up --state-dir "$DTRAIN_CLUSTER_DIR"
  expect_equal "tasks of the crashed step left after up" "$(pgrep -fc "^$probe" || true)" 0
  after=$(daemon_status)
  checks_py daemons "$after" --running 5 --when " after up"
  check_hostname_step
}

# Sets the global work_dir to a fresh directory under the state directory (every node sees it;
# /tmp would be per node). When the check ends, the directory is removed and the job whose id is
# in $work_dir/job_id is cancelled: a failed or interrupted check leaves no job behind.
make_work_dir() {
  work_dir=$(mktemp -d -p "$DTRAIN_CLUSTER_DIR" "$1.XXXXXX")
  trap remove_work_dir EXIT
}

remove_work_dir() {
  if [[ -s "$work_dir/job_id" ]]; then
    scancel "$(cat "$work_dir/job_id")" 2>/dev/null || true
  fi
  rm -rf -- "$work_dir"
}

# srun inside a batch script runs on node1 (in its network namespace) and must get its steps' I/O, including an
# MPI step over PMIx, from every node.
check_sbatch_steps() {
  local mpi_check="$1" status=0
  [[ -x "$mpi_check" ]] || fail "MPI check program '$mpi_check' is not executable; build target dtrain_mpi_allreduce_check"
  make_work_dir sbatch-steps
  # shellcheck disable=SC2016 # expanded by the batch script and its tasks
  printf '%s\n' '#!/bin/bash' '#SBATCH -N4 -n8 -t 2' 'set -euo pipefail' \
    'echo "batch start on $(hostname)"' \
    'srun --kill-on-bad-exit=1 bash -c '\''echo "plain step $SLURM_STEP_ID rank $SLURM_PROCID on $(hostname)"'\' \
    "srun --mpi=pmix --kill-on-bad-exit=1 $(printf %q "$mpi_check") --ranks 8 --hosts 4" \
    'echo "batch done"' >"$work_dir/job.sh"
  # --wait: sbatch returns once the job ended, with the batch script's exit status.
  sbatch --wait --parsable -D "$work_dir" -o "$work_dir/out" "$work_dir/job.sh" >"$work_dir/job_id" || status=$?
  cat "$work_dir/out"
  ((status == 0)) || fail "batch job $(cat "$work_dir/job_id") ended with status $status; its output is above"
  checks_py sbatch-steps "$work_dir/out"
}

# A data-less PMIx fence must wait for every rank of the step: Open MPI's MPI_Init relies on it,
# and without it a rank that leaves MPI_Init early crashes a peer still inside it (the TCP BTL
# calls an unregistered receive callback). The last argument is the rank that arrives 1 s late.
check_pmix_barrier() {
  local checker="$1" nodes="$2" tasks="$3" slow_rank="$4" out
  [[ -x "$checker" ]] || fail "PMIx check program '$checker' is not executable; build target dtrain_pmix_barrier_check"
  make_work_dir pmix-barrier
  out=$(srun --mpi=pmix --kill-on-bad-exit=1 "$nodes" "$tasks" "$checker" --marker-dir "$work_dir" \
    --slow-rank "$slow_rank" --delay-ms 1000 2>&1) || fail "the data-less fence let ranks through early ($nodes $tasks):"$'\n'"$out"
  echo "$out"
  expect_line "rank 0's verdict" "^data-less PMIx fence held all" "$out"
}

# scancel of a running batch job must end everything it started on every node: the batch script
# and its sruns on node1, the slurmstepd and the tasks of two overlapping steps on all nodes,
# including tasks that ignore SIGTERM (slurmd sends SIGKILL max(KillWait, 5s) after SIGTERM).
check_scancel_cleans_up() {
  local job_id probe="dtrain-scancel-probe-$$" tries
  make_work_dir scancel
  [[ -z "$(job_processes)" ]] || fail "processes run on the nodes before the job starts:"$'\n'"$(job_processes)"
  printf '%s\n' '#!/bin/bash' '#SBATCH -N4 -n8 -t 2' \
    "srun --overlap -N4 -n8 bash -c 'exec -a $probe-task sleep 600' &" \
    "srun --overlap -N4 -n4 bash -c 'trap \"\" TERM; exec -a $probe-task-ignoring-term sleep 600' &" \
    "bash -c 'exec -a $probe-batch sleep 600' &" \
    'wait' >"$work_dir/job.sh"
  sbatch --parsable -D "$work_dir" -o "$work_dir/out" "$work_dir/job.sh" >"$work_dir/job_id"
  job_id=$(cat "$work_dir/job_id")
  checks_py scancel-job-started "$job_id" "$probe"

  scancel "$job_id"
  # SIGKILL comes after 5s, so what is left at 60s is stuck.
  expect_no_job_processes "scancel of job $job_id" 60
  # The job stays COMPLETING until every slurmd has reported its end to slurmctld.
  local state
  for ((tries = 0; tries < 600; tries++)); do
    state=$(scontrol show job -o "$job_id" | grep -o 'JobState=[A-Z_]*')
    [[ "$state" != JobState=COMPLETING ]] && break
    sleep 0.1
  done
  expect_equal "state of job $job_id" "$state" "JobState=CANCELLED"
}

# The tasks of all nodes share the CPUs task by task (slurm/local/cluster.sh: cpu_cgroup_dir): with the
# kernel's autogroup on and the tasks in the root CPU cgroup, every step's tasks on a node form
# one scheduling group, and node1's four tasks would get what node3's one gets. Prints each
# task's CPU time over one second of spinning, for the reader; the check is the cgroup itself.
check_cpu_share() {
  local autogroup tasks
  autogroup=$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo 0)
  if [[ "$autogroup" != 1 ]]; then
    echo "dtrain: skipped: the kernel's autogroup is off here, so nodes cannot starve each other"
    exit 77
  fi
  local root="" probe mount_dir type options
  while read -r _ mount_dir type options _; do
    [[ $type == cgroup && ,$options, == *,cpu,* ]] && { root=$mount_dir; break; }
  done </proc/mounts
  probe="$root/dtrain-probe-$$"
  if [[ -z "$root" ]] || ! mkdir "$probe" 2>/dev/null; then
    echo "dtrain: skipped: no writable cgroup v1 cpu hierarchy here; cluster.sh warns at up that nodes share the CPUs evenly"
    exit 77
  fi
  rmdir "$probe"
  # shellcheck disable=SC2016 # expanded by each task
  tasks=$(srun --kill-on-bad-exit=1 -N4 -n8 bash -c '
    cgroup=$(grep -E "^[0-9]+:([^:]*,)?cpu(,[^:]*)?:" /proc/self/cgroup | cut -d: -f3)
    cpu=$(python3 -c "import time
end = time.monotonic() + 1
while time.monotonic() < end: pass
print(round(time.process_time(), 2))")
    echo "$SLURM_PROCID $SLURMD_NODENAME $cgroup $cpu"' | sort -n)
  echo "$tasks"
  checks_py cpu-share <(echo "$tasks")
}

# Every node has a network stack of its own: one task per node binds the same port on the
# wildcard address (which on a shared stack only the first could), waits until all four hold
# it, then reaches the next node's listener through that node's name.
check_wildcard_bind() {
  local port out
  port=$(free_port_block 1)
  make_work_dir wildcard-bind
  # shellcheck disable=SC2016 # expanded by each task
  out=$(srun --kill-on-bad-exit=1 -N4 -n4 --ntasks-per-node=1 /usr/bin/python3 -c '
import os, socket, sys, time
port, markers = int(sys.argv[1]), sys.argv[2]
node, rank = os.environ["SLURMD_NODENAME"], int(os.environ["SLURM_PROCID"])
server = socket.socket()
try:
    server.bind(("", port))
except OSError as e:
    sys.exit(f"{node}: cannot bind 0.0.0.0:{port}: {e}")
server.listen()
open(os.path.join(markers, node), "w").close()
deadline = time.monotonic() + 60
while len(os.listdir(markers)) < 4 and time.monotonic() < deadline:
    time.sleep(0.05)
peer = f"node{(rank + 1) % 4 + 1}"
with socket.create_connection((peer, port), timeout=10) as c:
    print(f"{node} bound 0.0.0.0:{port} and reached {peer} at {c.getpeername()[0]}:{port}")
server.settimeout(30)
server.accept()[0].close()
time.sleep(1)
' "$port" "$work_dir" 2>&1) || fail "a wildcard bind or a connection between nodes failed:"$'\n'"$out"
  echo "$out"
  expect_equal "nodes that bound 0.0.0.0:$port at once" "$(grep -c ' bound 0.0.0.0' <<<"$out")" 4
}

# A second cluster beside the first gets its own subnet; status lists its namespaces; and down
# removes every namespace, veth and bridge even after its daemons were killed and its options
# file lost, as after a crash.
check_network_lifecycle() {
  local status_out leftovers
  # Global: the EXIT trap runs after this function returned.
  second=$(mktemp -d -p "$DTRAIN_CLUSTER_DIR" second-cluster.XXXXXX)
  trap '"$cluster_sh" down --state-dir "$second" >/dev/null 2>&1 || true; rm -rf -- "$second"' EXIT
  "$cluster_sh" up --state-dir "$second"
  status_out=$("$cluster_sh" status --state-dir "$second") || fail "status of the second cluster:"$'\n'"$status_out"
  echo "$status_out"
  local first_subnet=$DTRAIN_CLUSTER_SUBNET second_subnet
  # shellcheck disable=SC1091
  second_subnet=$(source "$second/env.sh" && echo "$DTRAIN_CLUSTER_SUBNET")
  [[ $second_subnet != "$first_subnet" ]] || fail "both clusters took the subnet $first_subnet"
  echo "dtrain: ok: the clusters have the subnets $first_subnet and $second_subnet"
  local bridge
  bridge=$(awk '$1 == "network" { print $3; exit }' <<<"$status_out")
  bridge=${bridge%,}
  [[ $bridge == dtrain* ]] || fail "status names no bridge:"$'\n'"$status_out"
  expect_equal "network namespaces in status" "$(grep -c ' netns dtrain' <<<"$status_out")" 4
  local ns routes
  while read -r ns; do
    routes=$(ip -n "$ns" route show)
    ! grep -q '^default' <<<"$routes" || fail "$ns has a default route:"$'\n'"$routes"
  done < <(awk '$2 == "netns" { sub(/,$/, "", $3); print $3 }' <<<"$status_out")
  echo "dtrain: ok: no namespace has a default route"
  # The crash: every process of the second cluster dies at once, and its options are lost.
  # shellcheck disable=SC2046
  kill -KILL $("$cluster_sh" ps --state-dir "$second" | awk '{ print $2 }') 2>/dev/null || true
  rm -f "$second/cluster.options"
  "$cluster_sh" down --state-dir "$second"
  leftovers=$({ ip -br link show | awk -v b="$bridge" '$1 == b || index($1, b "n") == 1'; ip netns list | grep "^$bridge-" || true; })
  [[ -z $leftovers ]] || fail "down left network objects of $bridge behind:"$'\n'"$leftovers"
  echo "dtrain: ok: down removed bridge $bridge, its veth pairs and its namespaces"
}

case "${1:-}" in
  wildcard-bind) check_wildcard_bind ;;
  network-lifecycle) check_network_lifecycle ;;
  block-layout) check_block_layout ;;
  cyclic-layout) check_cyclic_layout ;;
  concurrent-jobs) check_concurrent_jobs ;;
  up-idempotent) check_up_idempotent ;;
  crash-recovery) check_crash_recovery ;;
  sbatch-steps) check_sbatch_steps "${2:?dtrain: sbatch-steps needs the path of dtrain_mpi_allreduce_check}" ;;
  scancel-cleans-up) check_scancel_cleans_up ;;
  cpu-share) check_cpu_share ;;
  pmix-barrier) check_pmix_barrier "${2:?dtrain: pmix-barrier needs the path of dtrain_pmix_barrier_check}" \
    "${3:?dtrain: pmix-barrier needs -N<nodes>}" "${4:?dtrain: pmix-barrier needs -n<tasks>}" \
    "${5:?dtrain: pmix-barrier needs the slow rank}" ;;
  *) fail "unknown check '${1:-}'; use wildcard-bind, network-lifecycle, block-layout, cyclic-layout, concurrent-jobs, up-idempotent, crash-recovery, sbatch-steps, scancel-cleans-up, cpu-share or pmix-barrier" ;;
esac
