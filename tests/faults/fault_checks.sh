#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fault injection on the local Slurm cluster (issue 7): fault_checks.sh CHECK [ARGS...]
# Runs with the cluster's env.sh sourced (run_with_cluster_env.sh) and the plugin loaded through
# the cluster's plugstack.conf. Each check injects one fault, prints what it saw and fails with
# a message naming the difference from the promised outcome.
#
# Environment: DTRAIN_FAULT_RANK, DTRAIN_BENCH, DTRAIN_BOOTSTRAP_HELPER (built programs, set by
# CTest; only the checks that run them need them).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
cluster_sh="$(cd "$here/../.." && pwd -P)/slurm/local/cluster.sh"
readonly here cluster_sh
: "${DTRAIN_CLUSTER_DIR:?dtrain: DTRAIN_CLUSTER_DIR is unset; source the cluster env.sh first}"
readonly nodes=(node1 node2 node3 node4)
# More ranks than cores here: let Open MPI yield instead of spinning in blocking calls.
export OMPI_MCA_mpi_yield_when_idle=1

# shellcheck source=tests/cluster/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cluster/check_lib.sh"

# A fresh directory under the state directory (every node sees it; /tmp is per node), removed
# when the check ends.
make_work_dir() {
  work_dir=$(mktemp -d -p "$DTRAIN_CLUSTER_DIR" "fault-$1.XXXXXX")
  trap 'rm -rf -- "$work_dir"' EXIT
}

# Seconds since the epoch with microseconds, without a subprocess.
now() { echo "${EPOCHREALTIME}"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
at_most() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }

# Runs an srun step whose every task prints one line; fails unless all tasks ran.
expect_step_runs() {
  local what="$1" tasks="$2" out
  shift 2
  # shellcheck disable=SC2016 # expanded by each task
  out=$(srun --distributed-train --kill-on-bad-exit=1 "$@" bash -c 'echo "$DTRAIN_RANK $(hostname)"' 2>&1) ||
    fail "$what: srun $* failed:"$'\n'"$out"
  expect_equal "$what: tasks that ran" "$(grep -c '^[0-9]* node[0-9]$' <<<"$out")" "$tasks"
}

# ---- a rank killed before the bootstrap ---------------------------------------------------------
# A rank SIGKILLs itself before it calls the bootstrap (before MPI_Init): rank 7, alone on node4
# in -N4 -n8, and rank 5, which shares node2 with rank 4; or, with the bootstrap test helper,
# rank 7 right after MPI_Init but before the bootstrap's arrival step. Every other rank must exit
# with a dtrain message within the deadline + 5 s; the time is measured around the whole srun,
# which bounds every rank's own time.
check_killed_before_bootstrap() {
  local deadline=10 out status started finished took
  make_work_dir killed-before-bootstrap
  : "${DTRAIN_FAULT_RANK:?dtrain: DTRAIN_FAULT_RANK (the dtrain-fault-rank program) is unset}"
  local -A programs=(
    [before-mpi-init]="$DTRAIN_FAULT_RANK --victim 7 --when before-init"
    [before-mpi-init-shared-node]="$DTRAIN_FAULT_RANK --victim 5 --when before-init"
  )
  local -A victims=([before-mpi-init]=7 [before-mpi-init-shared-node]=5 [after-mpi-init]=7)
  local -A victim_nodes=([before-mpi-init]=node4 [before-mpi-init-shared-node]=node2 [after-mpi-init]=node4)
  if [[ -n "${DTRAIN_BENCH:-}" && -n "${DTRAIN_BOOTSTRAP_HELPER:-}" ]]; then
    printf '0-6 %s --bootstrap-only\n7 %s --mode die-after-init\n' \
      "$DTRAIN_BENCH" "$DTRAIN_BOOTSTRAP_HELPER" >"$work_dir/after-mpi-init.conf"
    programs[after-mpi-init]="--multi-prog $work_dir/after-mpi-init.conf"
  fi
  local moment victim
  for moment in before-mpi-init before-mpi-init-shared-node after-mpi-init; do
    [[ -n "${programs[$moment]:-}" ]] || {
      echo "note: $moment not run: DTRAIN_BENCH and DTRAIN_BOOTSTRAP_HELPER are unset"
      continue
    }
    victim=${victims[$moment]}
    echo "---- rank $victim killed $moment, DTRAIN_BOOTSTRAP_TIMEOUT=$deadline"
    status=0
    started=$(now)
    # shellcheck disable=SC2086 # the program line is split on purpose
    out=$(DTRAIN_BOOTSTRAP_TIMEOUT=$deadline timeout 120 srun --mpi=pmix --distributed-train \
      -N4 -n8 ${programs[$moment]} 2>&1) || status=$?
    finished=$(now)
    took=$(elapsed "$started" "$finished")
    grep -E '^(dtrain|srun|slurmstepd)' <<<"$out" | grep -v 'some tasks get the same CPU' | cut -c1-200 || true
    ((status != 124)) || fail "$moment: the step still ran after 120 s"
    ((status != 0)) || fail "$moment: the step succeeded without rank $victim"
    at_most "$took" $((deadline + 5)) ||
      fail "$moment: the step took ${took} s, more than the deadline ${deadline} s + 5 s"
    echo "ok: $moment: every rank had exited ${took} s after srun started (bound $((deadline + 5)) s)"
    expect_line "$moment: srun names the dead task" "${victim_nodes[$moment]}: task $victim: Killed" "$out"
    if [[ "$moment" == before-mpi-init ]] && grep -Eq "STEP [0-9.]+ ON node[0-9] CANCELLED" <<<"$out"; then
      # A race decides who acts first: when node4's slurmstepd has exited before the others
      # reach the PMIx fence inside MPI_Init, Slurm's PMIx plugin cannot reach node4 and cancels
      # the step itself, before dtrain's deadline. node2's stepd outlives its dead task, so the
      # shared-node case has no such race.
      echo "ok: $moment: Slurm's PMIx plugin cancelled the step (node4 left the MPI_Init fence)"
      continue
    fi
    if [[ "$moment" == before-mpi-init* ]]; then
      # While MPI_Init waits, MPI cannot say who is missing: rank 0 finds out by connecting to
      # every rank's endpoint shortly before the deadline; the others say where they were stuck.
      expect_line "$moment: the dead rank named by rank 0" \
        "^dtrain: rank 0 on node1: .*still in MPI_Init_thread\. Checked [0-9.]+ s before the deadline: rank $victim \([0-9.:]+\) does not answer on the plugin's endpoint" "$out"
      local rank
      for ((rank = 1; rank < 8; rank++)); do
        ((rank == victim)) && continue
        expect_line "$moment: rank $rank's message" \
          "^dtrain: rank $rank on node[0-9]: .*still in MPI_Init_thread. Another rank probably died" "$out"
      done
    else
      # Rank 0 names the missing rank and ends the job with MPI_Abort; the others wait 1.5 s
      # longer so that rank 0's message is the one the user sees.
      expect_line "$moment: the dead rank named by rank 0" \
        "^dtrain: rank 0 on node1: timed out after $deadline s .*rank $victim never arrived" "$out"
    fi
  done
}

# ---- a rank killed during an all_reduce ---------------------------------------------------------
# Rank 7 SIGKILLs itself while the other ranks wait in all_reduce call 20. With
# --kill-on-bad-exit (see README.md: without it the step hangs), the step must end and leave no
# slurmstepd or task on any node.
check_killed_during_all_reduce() {
  local out status=0 started took
  : "${DTRAIN_FAULT_RANK:?dtrain: DTRAIN_FAULT_RANK (the dtrain-fault-rank program) is unset}"
  expect_no_job_processes "before the check"
  started=$(now)
  out=$(timeout 120 srun --mpi=pmix --distributed-train --kill-on-bad-exit=1 -N4 -n8 \
    "$DTRAIN_FAULT_RANK" --victim 7 --when during-all-reduce --iterations 100000 --die-at 20 2>&1) ||
    status=$?
  took=$(elapsed "$started" "$(now)")
  grep -v 'some tasks get the same CPU' <<<"$out" | grep -E '^(srun|dtrain|slurmstepd)' || true
  ((status != 124)) || fail "the step still ran 120 s after rank 7 died:"$'\n'"$out"
  ((status != 0)) || fail "the step succeeded although rank 7 died"
  grep -q 'finished 100000 all_reduce calls' <<<"$out" && fail "a rank finished all its all_reduce calls without rank 7"
  expect_line "the dead rank named" "node4: task 7: Killed" "$out"
  echo "ok: the step ended ${took} s after srun started (exit status $status)"
  expect_no_job_processes "after the step"
}

# ---- an endpoint port held by a foreign process -------------------------------------------------
# On node3 (rank 6 alone in -N4 -n8), a process other than the rank listens on rank 6's endpoint
# before the rank starts. The preflight must name the node and the port.
check_endpoint_port_held() {
  local out status=0 held
  : "${DTRAIN_BENCH:?dtrain: DTRAIN_BENCH (the dtrain-bench program) is unset}"
  out=$(timeout 120 srun --mpi=pmix --distributed-train -N4 -n8 "$here/hold_endpoint.py" --rank 6 -- \
    "$DTRAIN_BENCH" --bootstrap-only --timeout 30 2>&1) || status=$?
  grep -v 'some tasks get the same CPU' <<<"$out" || true
  ((status != 124)) || fail "the step still ran after 120 s"
  ((status != 0)) || fail "the bootstrap succeeded although rank 6's endpoint port was held"
  held=$(sed -n 's/^hold_endpoint.py: rank 6 on node3: holding //p' <<<"$out")
  [[ "$held" == "$(node_address node3)":* ]] || fail "the holder did not report holding rank 6's endpoint on node3"
  expect_line "the preflight names node and port" \
    "rank 6 on node3 cannot listen on ${held//./\\.}: address already in use" "$out"
  expect_line "and how to find the holder" "ss -ltnp 'sport = :${held##*:}'\" on node3" "$out"
}

# ---- a node's fabric link down (profile fabric) ---------------------------------------------------
# The fabric profile's cluster: dtrain's endpoints on a second network (suffix=-fab), Slurm on the
# first, and node_check=on, so that every job's epilog checks each node's own fabric link as root.

# The state and reason of a node as slurmctld has them: "STATE|REASON".
node_state() { sinfo -h -N -n "$1" -o '%T|%E' | head -1; }

# Waits up to 30 s until the jobs named in $@ are no longer known to slurmctld (their epilogs ran).
wait_jobs_gone() {
  local tries
  for ((tries = 0; tries < 300; tries++)); do
    [[ -z "$(squeue -h -j "$(IFS=,; echo "$*")" -o %i 2>/dev/null)" ]] && return 0
    sleep 0.1
  done
  fail "jobs $* still listed after 30 s: $(squeue -h -j "$(IFS=,; echo "$*")" -o '%i %T' 2>&1)"
}

resume_node() {
  scontrol update nodename="$1" state=resume >/dev/null 2>&1 || true
}

# Waits up to 30 s until all four nodes are idle without a reason, so that a job's nodes are the
# ones Slurm picks on an idle cluster (node1-3 for -N3); an earlier check's node may still be
# completing its last job or be resumed only just.
wait_all_idle() {
  local tries node states
  for ((tries = 0; tries < 300; tries++)); do
    states=""
    for node in node1 node2 node3 node4; do states+="$node=$(node_state "$node") "; done
    [[ "$states" == "node1=idle|none node2=idle|none node3=idle|none node4=idle|none " ]] && return 0
    sleep 0.1
  done
  fail "the nodes are not all idle 30 s later: $states"
}

# The state of job $1 in slurmctld (PENDING, RUNNING, COMPLETED, ...).
job_state() { scontrol show job -o "$1" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }

# Waits up to 60 s until node $1 is drained (or draining).
wait_drained() {
  local tries
  for ((tries = 0; tries < 600; tries++)); do
    [[ "$(node_state "$1")" == drain* ]] && return 0
    sleep 0.1
  done
}

# A job that put itself back in the queue on 75: waits until it is PENDING, then until it ended
# (Slurm holds a requeued job back until its credentials expired: AuthInfo=cred_expire, 15 s on
# the fabric profile, 120 s by default). Sets `state` to its final state and `resumed` to when
# its output first said "resuming from".
wait_requeued_run() {
  local job="$1" what="$2" tries
  for ((tries = 0; tries < 600; tries++)); do
    state=$(job_state "$job")
    [[ "$state" == PENDING ]] && break
    sleep 0.1
  done
  expect_equal "job $job after $what" "$state" PENDING
  resumed=""
  for ((tries = 0; tries < 3000; tries++)); do
    state=$(job_state "$job")
    [[ "$state" =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)$ ]] && break
    [[ -z "$resumed" ]] && grep -q '^resuming from ' "$work_dir/job.out" && resumed=$(now)
    sleep 0.1
  done
}

# The end of the batch template of docs/admin.md ("Bad nodes"): a step that exited 75 (nodes
# cannot reach each other) puts its own job back in the queue, at most three times, and the
# job's epilog keeps the node it drained away from the next run.
requeue_on_node_fault() {
  # shellcheck disable=SC2016 # expanded by the batch script
  printf '%s\n' 'status=$?' \
    'if [ "$status" -eq 75 ] && [ "${SLURM_RESTART_COUNT:-0}" -lt 3 ]; then' \
    '  scontrol requeue "$SLURM_JOB_ID"' 'fi' 'exit "$status"'
}

# The step both node-fault checks run while node2 is at fault ($1 says how): a 3-node dtrain-bench
# bootstrap on node1-3, which must end with status 75 and name node2 as the suspect node. Waits
# until the job's epilogs ran. Sets `out` (the step's output), `job` and `finished` (when srun
# returned).
bootstrap_step_suspecting_node2() {
  local what="$1" status=0
  # shellcheck disable=SC2016 # expanded by each task
  out=$(timeout 120 srun --mpi=pmix --distributed-train -w 'node[1-3]' -N3 -n3 \
    bash -c 'echo "job $SLURM_JOB_ID"; exec "$0" --bootstrap-only --timeout 60' "$DTRAIN_BENCH" 2>&1) ||
    status=$?
  finished=$(now)
  echo "$out"
  ((status != 124)) || fail "the step still ran after 120 s"
  expect_equal "srun's exit status with $what" "$status" 75
  expect_line "the report names node2 as the suspect" \
    'suspect node: node2 \(an end of all [0-9]+ failed connections between nodes, with node1, node3\)' "$out"
  job=$(sed -n 's/^job \([0-9]*\)$/\1/p' <<<"$out" | head -1)
  [[ -n "$job" ]] || fail "the step did not print its job id"
  wait_jobs_gone "$job"
}

# node2's data fabric is down (its cable pulled: no carrier), its management network and slurmd
# are fine, so Slurm starts the step there. The bootstrap's preflight must fail, its report must
# name node2 as the suspect node, and every rank must exit with 75 (EX_TEMPFAIL), which srun
# passes on; then the job's epilog on node2, as root, finds fab0 without carrier and drains node2
# with a dtrain reason, and no other node. Resumed and with the link back, the same step runs.
# Prints the time from the fault to the failed step and to the drain.
check_fabric_down() {
  local out fault finished drained job
  : "${DTRAIN_BENCH:?dtrain: DTRAIN_BENCH (the dtrain-bench program) is unset}"
  trap '"$cluster_sh" fabric-up node2 --state-dir "$DTRAIN_CLUSTER_DIR" >/dev/null 2>&1 || true; resume_node node2' EXIT
  "$cluster_sh" fabric-down node2 --state-dir "$DTRAIN_CLUSTER_DIR"
  fault=$(now)
  bootstrap_step_suspecting_node2 "node2's fabric down"
  drained=$(now)
  expect_line "a failed connection with node2 is named" \
    '(cannot reach rank 1 at node2:[0-9]+|rank 1 on node2 cannot reach)' "$out"
  expect_line "node2 drained by the epilog's node check" \
    "^drain(ed|ing)?\|dtrain: fabric: fab0 \([0-9.]+\) has no carrier, operstate down \(job $job\)\$" \
    "$(node_state node2)"
  local node
  for node in node1 node3 node4; do
    expect_line "$node not drained" '^(idle|mixed|allocated|completing)\|none$' "$(node_state "$node")"
  done
  echo "ok: node2's fabric down: the step failed with status 75 naming node2 after" \
    "$(elapsed "$fault" "$finished") s; node2 drained $(elapsed "$fault" "$drained") s after the fault"
  resume_node node2
  "$cluster_sh" fabric-up node2 --state-dir "$DTRAIN_CLUSTER_DIR"
  trap - EXIT
  out=$(timeout 120 srun --mpi=pmix --distributed-train -w 'node[1-3]' -N3 -n3 \
    "$DTRAIN_BENCH" --bootstrap-only --timeout 60 2>&1) ||
    fail "with node2 resumed and its fabric back, the step failed:"$'\n'"$out"
  echo "ok: with node2 resumed and its fabric back up the same step bootstraps"
}

# A job cannot drain a node: one that exits with the node-fault status on healthy nodes leaves
# every node as it was; and a reason an administrator set while the job ran stays, even on a node
# whose fabric is down.
check_fabric_no_false_drain() {
  local out job node reason
  # shellcheck disable=SC2016 # expanded by the task
  out=$(srun --distributed-train -w 'node[1-3]' -N3 -n3 bash -c 'echo "job $SLURM_JOB_ID"; exit 75' 2>&1) &&
    fail "a step whose tasks exit 75 succeeded"
  job=$(sed -n 's/^job \([0-9]*\)$/\1/p' <<<"$out" | head -1)
  [[ -n "$job" ]] || fail "the step did not print its job id:"$'\n'"$out"
  wait_jobs_gone "$job"
  for node in node1 node2 node3 node4; do
    expect_line "$node after a job that exited 75 on healthy nodes" '^(idle|mixed|allocated)\|none$' "$(node_state "$node")"
  done

  make_work_dir fabric-admin-reason
  trap '"$cluster_sh" fabric-up node2 --state-dir "$DTRAIN_CLUSTER_DIR" >/dev/null 2>&1 || true; resume_node node2; rm -rf -- "$work_dir"' EXIT
  job=$(sbatch --parsable -w 'node[1-3]' -N3 -n3 -o "$work_dir/job.out" --wrap \
    "while [ ! -e '$work_dir/go' ]; do sleep 0.1; done; srun --mpi=pmix --distributed-train $DTRAIN_BENCH --bootstrap-only --timeout 60")
  local tries
  for ((tries = 0; tries < 300; tries++)); do
    [[ "$(squeue -h -j "$job" -o %T)" == RUNNING ]] && break
    sleep 0.1
  done
  reason="admin: memory test $job"
  scontrol update nodename=node2 state=drain reason="$reason"
  "$cluster_sh" fabric-down node2 --state-dir "$DTRAIN_CLUSTER_DIR"
  touch "$work_dir/go"
  wait_jobs_gone "$job"
  grep -q 'suspect node: node2' "$work_dir/job.out" || fail "the job's output names no suspect:"$'\n'"$(cat "$work_dir/job.out")"
  expect_line "node2's reason, set by an administrator while the job ran, stays" \
    "^drain(ed|ing)?\|$reason\$" "$(node_state node2)"
  echo "ok: a job exiting 75 on healthy nodes drained nothing; an administrator's reason survived the node check"
}

# The lines node $1's slurmd log gained after byte $2 (the epilog's messages are slurmd's).
slurmd_log_since() { tail -c +"$(($2 + 1))" "$DTRAIN_CLUSTER_DIR/log/slurmd.$1.log"; }
slurmd_log_size() { stat -c %s "$DTRAIN_CLUSTER_DIR/log/slurmd.$1.log"; }

# A job that lies: every task exits with the node-fault status, and node3's task writes a fault
# hint naming node3 (healthy) and one naming node1 through the pipe the plugin gave it. node3's
# epilog runs its deeper check on the hint, finds its link up and its peers reachable, logs that
# the hint did not reproduce and drains nothing; the hint naming another node is logged and
# ignored. Nothing else a job writes reaches root.
check_fabric_hint_lie() {
  local out job node before
  before=$(slurmd_log_size node3)
  # shellcheck disable=SC2016 # expanded by each task
  out=$(srun --distributed-train -w 'node[1-3]' -N3 -n3 bash -c '
    echo "job $SLURM_JOB_ID"
    if [ "$SLURMD_NODENAME" = node3 ]; then
      echo "suspect node3 a lie" >&"$DTRAIN_FAULT_HINT_FD"
      echo "suspect node1 another lie" >&"$DTRAIN_FAULT_HINT_FD"
      echo "suspect ../../etc/passwd x" >&"$DTRAIN_FAULT_HINT_FD"
    fi
    exit 75' 2>&1) && fail "a step whose tasks exit 75 succeeded"
  job=$(sed -n 's/^job \([0-9]*\)$/\1/p' <<<"$out" | head -1)
  [[ -n "$job" ]] || fail "the step did not print its job id:"$'\n'"$out"
  wait_jobs_gone "$job"
  for node in node1 node2 node3 node4; do
    expect_line "$node after a job that lied about node3" '^(idle|mixed|allocated)\|none$' "$(node_state "$node")"
  done
  local log
  log=$(slurmd_log_since node3 "$before")
  expect_line "node3's slurmd log: the lie did not reproduce" \
    "dtrain: node check: job $job's fault hint \(suspect node3: a lie\) did not reproduce: fab0 is up; fab0 \([0-9.]+\) reached 2 of 2 peers' fabric addresses \((node1, node2|node2, node1)\); node3 not drained" "$log"
  expect_line "node3's slurmd log: the hint naming node1 is ignored" \
    "dtrain: node check: job $job's fault hint \(suspect node1: another lie\), written on node3, names another node; ignored" "$log"
  expect_line "node3's slurmd log: the line that names no node is dropped" \
    "dtrain: fault hint of step $job\.0: 1 line\(s\) that are not 'suspect NODE DETAIL' ignored" "$log"
  echo "ok: a job that named healthy node3 in its fault hint drained nothing; node3's log says the hint did not reproduce"
}

# A black-hole node: node2's fabric link is up (carrier 1), but no packet passes it. A 3-node
# step's bootstrap fails with 75 naming node2; node2's ranks leave the fault hint; the link
# check alone would pass, the hint makes node2's epilog probe its peers, which it cannot reach,
# and drains node2 with a fabric-reach reason; node1 and node3 stay. Prints the time from the
# fault to the failed step and to the drain.
check_fabric_black_hole_node() {
  local out fault finished drained job node before
  : "${DTRAIN_BENCH:?dtrain: DTRAIN_BENCH (the dtrain-bench program) is unset}"
  trap '"$cluster_sh" unblackhole node2 all --state-dir "$DTRAIN_CLUSTER_DIR" >/dev/null 2>&1 || true; resume_node node2' EXIT
  before=$(slurmd_log_size node2)
  "$cluster_sh" blackhole node2 all --state-dir "$DTRAIN_CLUSTER_DIR"
  fault=$(now)
  bootstrap_step_suspecting_node2 "node2 a black hole"
  drained=$(now)
  expect_line "node2 drained by the deeper check its hint asked for" \
    "^drain(ed|ing)?\|dtrain: fabric-reach: fab0 \([0-9.]+\) reached none of 2 peers' fabric addresses \((node3, node1|node1, node3)\) within 1500 ms \(job $job\)\$" \
    "$(node_state node2)"
  for node in node1 node3 node4; do
    expect_line "$node not drained" '^(idle|mixed|allocated|completing)\|none$' "$(node_state "$node")"
  done
  expect_line "node2's slurmd log: the hint was confirmed" \
    "dtrain: node check: job $job's fault hint \(suspect node2: bootstrap preflight: an end of every failed connection between nodes \(rank 1 on node2\)\) confirmed: fabric-reach: " \
    "$(slurmd_log_since node2 "$before")"
  echo "ok: node2 a black hole (link up, nothing passes): the step failed with status 75 naming node2 after" \
    "$(elapsed "$fault" "$finished") s; node2 drained by its hinted reachability check $(elapsed "$fault" "$drained") s after the fault"
  "$cluster_sh" unblackhole node2 all --state-dir "$DTRAIN_CLUSTER_DIR"
  resume_node node2
  trap - EXIT
}

# The whole loop: a 3-node training job (sbatch --requeue) trains and checkpoints on node1-3, then
# node2's fabric cable is pulled before its next step. That step fails with 75 naming node2; the
# job's epilog drains node2; the batch script puts its job back in the queue (the template of
# docs/admin.md); it runs again on node1, node3 and node4, resumes from its last checkpoint, and its
# final parameters equal those of an uninterrupted run on those nodes byte for byte. Prints the
# time from the fault to the drain and from the drain to the resumed training.
check_fabric_requeue_resume() {
  : "${DTRAIN_TRAINER:?dtrain: DTRAIN_TRAINER (the dtrain-trainer program) is unset}"
  make_work_dir fabric-requeue
  trap '"$cluster_sh" fabric-up node2 --state-dir "$DTRAIN_CLUSTER_DIR" >/dev/null 2>&1 || true; resume_node node2; rm -rf -- "$work_dir"' EXIT
  local model=(--input-dim 32 --hidden "64,64" --classes 4 --samples 8192 --batch-size 16 --seed 11)
  local first=80 total=200 every=40 out job fault drained resumed tries state
  out=$(cd "$work_dir" && srun --mpi=pmix --distributed-train --kill-on-bad-exit=1 -w 'node[1,3-4]' -N3 -n3 \
    "$DTRAIN_TRAINER" "${model[@]}" --max-steps "$total" --save-params reference.dtc 2>&1) ||
    fail "the uninterrupted run on node1, node3 and node4 failed:"$'\n'"$out"
  {
    # shellcheck disable=SC2016 # expanded by the batch script
    printf '%s\n' '#!/bin/bash' '#SBATCH -N3 -n3 -t 5 --requeue' '#SBATCH --distributed-train' \
      'echo "batch start, restart ${SLURM_RESTART_COUNT:-0}, nodes $SLURM_JOB_NODELIST"' \
      'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then'
    printf '  srun --mpi=pmix --kill-on-bad-exit=1'
    printf ' %q' "$DTRAIN_TRAINER" "${model[@]}" --max-steps "$first" --checkpoint-dir ckpt \
      --checkpoint-every "$every"
    printf ' || exit $?\n  touch first.done\n  while [ ! -e go ]; do sleep 0.1; done\nfi\n'
    printf 'srun --mpi=pmix --kill-on-bad-exit=1'
    printf ' %q' "$DTRAIN_TRAINER" "${model[@]}" --max-steps "$total" --checkpoint-dir ckpt \
      --checkpoint-every "$every" --save-params final.dtc
    printf '\n'
    requeue_on_node_fault
  } >"$work_dir/job.sh"
  wait_all_idle
  job=$(sbatch --parsable -D "$work_dir" -o "$work_dir/job.out" --open-mode=append "$work_dir/job.sh")
  for ((tries = 0; tries < 1200; tries++)); do
    [[ -e "$work_dir/first.done" ]] && break
    sleep 0.1
  done
  [[ -e "$work_dir/first.done" ]] || fail "job $job did not finish its first $first steps in 120 s:"$'\n'"$(cat "$work_dir/job.out")"
  expect_line "the first run's nodes" '^batch start, restart 0, nodes node\[1-3\]$' "$(cat "$work_dir/job.out")"
  "$cluster_sh" fabric-down node2 --state-dir "$DTRAIN_CLUSTER_DIR"
  fault=$(now)
  touch "$work_dir/go"
  wait_drained node2
  drained=$(now)
  expect_line "node2 drained by the epilog's node check" "^drain(ed|ing)?\\|dtrain: fabric: .* \\(job $job\\)\$" "$(node_state node2)"
  wait_requeued_run "$job" "its step exited 75"
  cat "$work_dir/job.out"
  expect_equal "job $job in the end" "$state" COMPLETED
  expect_equal "restarts of job $job" "$(scontrol show job -o "$job" | grep -o 'Restarts=[0-9]*')" "Restarts=1"
  expect_line "the step that met node2's pulled cable names it" 'suspect node: node2 ' "$(cat "$work_dir/job.out")"
  expect_line "the requeued run's nodes leave node2 out" '^batch start, restart 1, nodes node\[1,3-4\]$' "$(cat "$work_dir/job.out")"
  expect_line "the requeued run resumes from the first run's last checkpoint" \
    "^resuming from .*ckpt-$first\\.dtc at step $first\$" "$(cat "$work_dir/job.out")"
  cmp "$work_dir/reference.dtc" "$work_dir/final.dtc" ||
    fail "final.dtc (requeued onto other nodes) differs from reference.dtc (uninterrupted)"
  echo "ok: requeued away from node2 and resumed at step $first; final state equals the uninterrupted run's byte for byte ($(stat -c %s "$work_dir/final.dtc") bytes)"
  echo "ok: fault to drain $(elapsed "$fault" "$drained") s; drain to the resumed training $(elapsed "$drained" "${resumed:-$drained}") s (Slurm holds a requeued job until its credentials expire: AuthInfo=cred_expire=15 here)"
}

# The fabric cut in the middle of training: the job's MPI traffic runs on the fabric
# (OMPI_MCA_btl_tcp_if_include, as on sites whose collectives use the data network), so when
# node2's cable is pulled every rank blocks in an all-reduce. dtrain-trainer's
# --collective-timeout 10 ends each rank with 75 after 10 s; node2 is drained, the job requeued,
# and it resumes from its last checkpoint on node1, node3 and node4 with an uninterrupted run's
# final bytes. Prints the time from the fault to the ranks' exit, to the drain and to the resumed
# training.
check_fabric_cut_mid_training() {
  : "${DTRAIN_TRAINER:?dtrain: DTRAIN_TRAINER (the dtrain-trainer program) is unset}"
  : "${DTRAIN_CLUSTER_FABRIC_SUBNET:?dtrain: DTRAIN_CLUSTER_FABRIC_SUBNET is unset: source the env.sh of a fabric cluster}"
  make_work_dir fabric-cut
  trap '"$cluster_sh" fabric-up node2 --state-dir "$DTRAIN_CLUSTER_DIR" >/dev/null 2>&1 || true; resume_node node2; rm -rf -- "$work_dir"' EXIT
  local model=(--input-dim 32 --hidden "64,64" --classes 4 --samples 65536 --batch-size 16 --seed 5
    --epochs 2)
  local total=1500 every=40 timeout=10 out job fault ended drained resumed tries state committed
  out=$(cd "$work_dir" && OMPI_MCA_btl_tcp_if_include=$DTRAIN_CLUSTER_FABRIC_SUBNET \
    srun --mpi=pmix --distributed-train --kill-on-bad-exit=1 -w 'node[1,3-4]' -N3 -n3 \
    "$DTRAIN_TRAINER" "${model[@]}" --max-steps "$total" --save-params reference.dtc 2>&1) ||
    fail "the uninterrupted run on node1, node3 and node4 failed:"$'\n'"$out"
  {
    # shellcheck disable=SC2016 # expanded by the batch script
    printf '%s\n' '#!/bin/bash' '#SBATCH -N3 -n3 -t 5 --requeue' '#SBATCH --distributed-train' \
      "export OMPI_MCA_btl_tcp_if_include=$DTRAIN_CLUSTER_FABRIC_SUBNET" \
      'echo "batch start, restart ${SLURM_RESTART_COUNT:-0}, nodes $SLURM_JOB_NODELIST"'
    printf 'srun --mpi=pmix'
    printf ' %q' "$DTRAIN_TRAINER" "${model[@]}" --max-steps "$total" --checkpoint-dir ckpt \
      --checkpoint-every "$every" --collective-timeout "$timeout" --save-params final.dtc
    printf '\n'
    requeue_on_node_fault
  } >"$work_dir/job.sh"
  wait_all_idle
  job=$(sbatch --parsable -D "$work_dir" -o "$work_dir/job.out" --open-mode=append "$work_dir/job.sh")
  for ((tries = 0; tries < 1200; tries++)); do
    committed=$(sed -n 's/^ckpt-\([0-9]*\)\.dtc$/\1/p' "$work_dir/ckpt/latest" 2>/dev/null || true)
    ((${committed:-0} >= 2 * every)) && break
    sleep 0.1
  done
  ((${committed:-0} >= 2 * every)) || fail "job $job wrote no checkpoint at step $((2 * every)) in 120 s:"$'\n'"$(cat "$work_dir/job.out")"
  expect_line "the first run's nodes" '^batch start, restart 0, nodes node\[1-3\]$' "$(cat "$work_dir/job.out")"
  "$cluster_sh" fabric-down node2 --state-dir "$DTRAIN_CLUSTER_DIR"
  fault=$(now)
  for ((tries = 0; tries < 1200; tries++)); do
    state=$(job_state "$job")
    [[ "$state" != RUNNING ]] && break
    sleep 0.05
  done
  ended=$(now)
  [[ "$state" != RUNNING ]] || fail "job $job still runs 60 s after node2's fabric went down"
  wait_drained node2
  drained=$(now)
  expect_line "node2 drained by the epilog's node check" "^drain(ed|ing)?\\|dtrain: fabric: .* \\(job $job\\)\$" "$(node_state node2)"
  for node in node1 node3 node4; do
    expect_line "$node not drained" '^(idle|mixed|allocated|completing)\|none$' "$(node_state "$node")"
  done
  wait_requeued_run "$job" "its ranks exited 75"
  grep -v '^step ' "$work_dir/job.out"
  expect_equal "job $job in the end" "$state" COMPLETED
  expect_line "a rank names the blocked collective" \
    "did not finish within $timeout s \\(blocked [0-9.]+ s\\): a peer stopped answering" "$(cat "$work_dir/job.out")"
  expect_line "the requeued run's nodes leave node2 out" '^batch start, restart 1, nodes node\[1,3-4\]$' "$(cat "$work_dir/job.out")"
  expect_line "the requeued run resumes from a checkpoint" '^resuming from .*ckpt-[0-9]+\.dtc at step [0-9]+$' "$(cat "$work_dir/job.out")"
  cmp "$work_dir/reference.dtc" "$work_dir/final.dtc" ||
    fail "final.dtc (cut mid-training, requeued onto other nodes) differs from reference.dtc (uninterrupted)"
  echo "ok: cut at step >= $committed: final state equals the uninterrupted run's byte for byte ($(stat -c %s "$work_dir/final.dtc") bytes)"
  echo "ok: fault to the ranks' exit $(elapsed "$fault" "$ended") s (--collective-timeout $timeout); to the drain $(elapsed "$fault" "$drained") s; drain to the resumed training $(elapsed "$drained" "${resumed:-$drained}") s (Slurm holds a requeued job until its credentials expire: AuthInfo=cred_expire=15 here)"
}

# ---- slurmd of one node stopped mid-job ---------------------------------------------------------
# While job A runs on all four nodes, node2's slurmd is stopped (SIGTERM, as `systemctl stop`).
# A step launched meanwhile must fail cleanly: an error naming node2, no hang, nothing left on
# any node. Job A's running step keeps its slurmstepd and must still end. Once the slurmd is
# started again, the next step must run on all four nodes.
check_slurmd_stopped() {
  local a_status=0 b_status=0 b_out tries
  make_work_dir slurmd-stopped
  expect_no_job_processes "before the check"
  # shellcheck disable=SC2016 # expanded by each task
  srun --distributed-train -N4 -n4 bash -c 'touch "$0/started.$SLURM_PROCID"; sleep 4; echo "A $SLURM_PROCID done"' \
    "$work_dir" >"$work_dir/a.out" 2>&1 &
  local a_pid=$!
  for ((tries = 0; tries < 300 && $(find "$work_dir" -name 'started.*' | wc -l) < 4; tries++)); do
    sleep 0.1
  done
  expect_equal "tasks of job A started" "$(find "$work_dir" -name 'started.*' | wc -l)" 4
  # Restart node2 whatever happens below, so that a failed check leaves a whole cluster.
  trap '"$cluster_sh" start-node node2 --state-dir "$DTRAIN_CLUSTER_DIR" >/dev/null 2>&1 || true; rm -rf -- "$work_dir"' EXIT
  "$cluster_sh" stop-node node2 --state-dir "$DTRAIN_CLUSTER_DIR"

  # shellcheck disable=SC2016 # expanded by each task
  b_out=$(timeout 90 srun --distributed-train -N4 -n4 bash -c 'echo "B $SLURM_PROCID ran"' 2>&1) || b_status=$?
  echo "$b_out"
  ((b_status != 124)) || fail "a step launched while node2's slurmd was stopped still waited after 90 s"
  ((b_status != 0)) || fail "a step launched while node2's slurmd was stopped succeeded"
  expect_line "the failed step names the node" "failed on node node2" "$b_out"
  wait "$a_pid" || a_status=$?
  grep -v 'some tasks get the same CPU' "$work_dir/a.out" || true
  expect_equal "job A's running step (exit status)" "$a_status" 0
  expect_no_job_processes "after both steps"

  "$cluster_sh" start-node node2 --state-dir "$DTRAIN_CLUSTER_DIR"
  expect_step_runs "the next step after node2's slurmd is back" 8 -N4 -n8
  expect_no_job_processes "after the next step"
}

# ---- endurance ----------------------------------------------------------------------------------
# Counts what steps could leak, per node: processes, files in the node's /tmp, entries in its
# /dev/shm, and listening sockets on its address.
resource_counts() {
  local node index pid tmp_files shm_entries ports processes
  for index in "${!nodes[@]}"; do
    node=${nodes[index]}
    pid=$("$cluster_sh" ps --state-dir "$DTRAIN_CLUSTER_DIR" | awk -v node="$node" '$1 == node && $3 == "slurmd" { print $2; exit }')
    [[ -n "$pid" ]] || fail "no slurmd runs on $node"
    processes=$("$cluster_sh" ps --state-dir "$DTRAIN_CLUSTER_DIR" | awk -v node="$node" '$1 == node' | wc -l)
    tmp_files=$(find "$DTRAIN_CLUSTER_DIR/tmp/$node" -mindepth 1 | wc -l)
    shm_entries=$(nsenter --target "$pid" --mount -- find /dev/shm -mindepth 1 | wc -l)
    ports=$(nsenter --target "$pid" --net -- ss -Hltn | wc -l)
    echo "$node processes=$processes tmp_files=$tmp_files shm_entries=$shm_entries listening_ports=$ports"
  done
}

# Runs STEPS plugin steps one after another inside the current allocation; the last line says
# how many failed.
run_endurance_steps() {
  local steps="$1" failures=0 step out started
  started=$(now)
  for ((step = 1; step <= steps; step++)); do
    # A step that hangs is a failure too, and must not hold the test until CTest kills it.
    if ! out=$(timeout 60 srun --distributed-train -N4 -n8 true 2>&1); then
      failures=$((failures + 1))
      echo "step $step failed:"$'\n'"$out" >&2
    fi
    ((step % 50)) || echo "$step steps in $(elapsed "$started" "$(now)") s, $failures failed"
  done
  echo "failed=$failures"
}

# The steps run in one job allocation, as a training job's steps do; one job per step would
# mostly measure slurmctld's scheduling, which waits for the previous job to finish completing.
check_endurance() {
  local steps="$1" before after out started took tries failures
  before=$(resource_counts)
  echo "before:"$'\n'"$before"
  started=$(now)
  out=$(salloc --quiet -N4 -n8 "${BASH_SOURCE[0]}" endurance-steps "$steps") || true
  took=$(elapsed "$started" "$(now)")
  echo "$out"
  failures=$(sed -n 's/^failed=//p' <<<"$out")
  [[ -n "$failures" ]] || fail "the allocation for the $steps steps did not run them"
  echo "$steps steps of srun --distributed-train -N4 -n8 true in one allocation: ${took} s, $failures failed"
  # The job's slurmstepd processes may still be reporting to slurmctld.
  for ((tries = 0; tries < 100; tries++)); do
    after=$(resource_counts)
    [[ "$after" == "$before" ]] && break
    sleep 0.2
  done
  echo "after:"$'\n'"$after"
  expect_equal "failed steps" "$failures" 0
  [[ "$after" == "$before" ]] || fail "resources leaked over $steps steps: before and after differ:"$'\n'"$(diff <(echo "$before") <(echo "$after") || true)"
  echo "ok: no process, file, shared-memory entry or listening port leaked over $steps steps"
}

# ---- slurmstepd under valgrind ------------------------------------------------------------------
# Restarts the cluster with node1's slurmstepd under memcheck, runs one plugin step there, and
# fails when an error's stack has a dtrain frame. The cluster is restarted without valgrind after.
check_valgrind_stepd() {
  local logs="$DTRAIN_CLUSTER_DIR/valgrind" out tries
  command -v valgrind >/dev/null || fail "valgrind is not installed (Debian package valgrind)"
  trap '"$cluster_sh" up --state-dir "$DTRAIN_CLUSTER_DIR" --no-valgrind-stepd' EXIT
  "$cluster_sh" up --state-dir "$DTRAIN_CLUSTER_DIR" --valgrind-stepd node1 \
    --valgrind-suppressions "$here/stepd.supp"
  rm -f "$logs"/*.log
  # shellcheck disable=SC2016 # expanded by each task
  out=$(timeout 300 srun --distributed-train -N1 -n2 -w node1 bash -c 'echo "rank=${DTRAIN_RANK:-unset} of ${DTRAIN_WORLD_SIZE:-unset}"' 2>&1) ||
    fail "the step under valgrind failed:"$'\n'"$out"
  echo "$out"
  expect_equal "ranks the plugin gave the tasks" "$(grep '^rank=' <<<"$out" | sort | paste -sd' ')" "rank=0 of 2 rank=1 of 2"
  # The step's slurmstepd writes its summary when it exits, shortly after srun returns.
  for ((tries = 0; tries < 600; tries++)); do
    [[ -z "$(job_processes)" ]] && grep -qs 'ERROR SUMMARY' "$logs"/*.log && break
    sleep 0.1
  done
  "$here/valgrind_verdict.py" "$logs"
}

case "${1:-}" in
  killed-before-bootstrap) check_killed_before_bootstrap ;;
  killed-during-all-reduce) check_killed_during_all_reduce ;;
  endpoint-port-held) check_endpoint_port_held ;;
  slurmd-stopped) check_slurmd_stopped ;;
  fabric-down) check_fabric_down ;;
  fabric-no-false-drain) check_fabric_no_false_drain ;;
  fabric-requeue-resume) check_fabric_requeue_resume ;;
  fabric-cut-mid-training) check_fabric_cut_mid_training ;;
  fabric-hint-lie) check_fabric_hint_lie ;;
  fabric-black-hole-node) check_fabric_black_hole_node ;;
  endurance) check_endurance "${2:-200}" ;;
  endurance-steps) run_endurance_steps "${2:?dtrain: endurance-steps needs a step count}" ;;
  valgrind-stepd) check_valgrind_stepd ;;
  *) fail "unknown check '${1:-}'; use killed-before-bootstrap, killed-during-all-reduce, endpoint-port-held, slurmd-stopped, fabric-down, fabric-no-false-drain, fabric-requeue-resume, fabric-cut-mid-training, fabric-hint-lie, fabric-black-hole-node, endurance [STEPS], endurance-steps STEPS or valgrind-stepd" ;;
esac
