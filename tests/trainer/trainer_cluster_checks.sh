#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# dtrain-trainer on the local Slurm cluster: trainer_cluster_checks.sh CHECK
#   resume-after-kill  a batch job is interrupted twice mid-run (scontrol requeue, then scancel and
#                      a fresh sbatch), resumes each time from the last complete checkpoint, and
#                      ends with the bytes of an uninterrupted run's final state; the per-rank logs
#                      are named after the emulated nodes
#   corrupt-latest     a damaged newest checkpoint is refused by name and the previous one is used
# Runs with the cluster's env.sh sourced and spank_dtrain.so in the cluster's plugstack.conf.
# Environment: DTRAIN_TRAINER (the dtrain-trainer binary, set by CTest).
set -euo pipefail

: "${DTRAIN_CLUSTER_DIR:?dtrain: DTRAIN_CLUSTER_DIR is unset; source the cluster env.sh first}"
: "${DTRAIN_TRAINER:?dtrain: DTRAIN_TRAINER is unset; point it at the dtrain-trainer binary}"
# Eight ranks on two cores: let Open MPI yield instead of spinning in blocking calls.
export OMPI_MCA_mpi_yield_when_idle=1

# About 85k parameters with Adam: a step takes 10-30 ms on 8 ranks here, so a run lasts long
# enough to be interrupted between checkpoints without making the test slow.
readonly model=(--input-dim 64 --hidden "256,256" --classes 8 --samples 65536 --batch-size 16
  --seed 7)
readonly every=40
readonly log_every=5

# shellcheck source=tests/cluster/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cluster/check_lib.sh"

# Escapes a path for use inside an extended regular expression.
# shellcheck disable=SC2001 # one substitution over a character class
regex_quote() { sed 's/[][\\.*^$+?(){}|]/\\&/g' <<<"$1"; }

# A fresh directory under the state directory (every node sees it; /tmp is private per node),
# removed when the check ends.
make_work_dir() {
  work_dir=$(mktemp -d -p "$DTRAIN_CLUSTER_DIR" "trainer-$1.XXXXXX")
  trap 'rm -rf -- "$work_dir"' EXIT
}

trainer_step() {
  srun --distributed-train --mpi=pmix --kill-on-bad-exit=1 -N4 -n8 "$DTRAIN_TRAINER" "$@"
}

job_state() {
  scontrol show job -o "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2
}

wait_for_state() {
  local job="$1" wanted="$2" tries state=""
  for ((tries = 0; tries < 600; tries++)); do
    state=$(job_state "$job")
    [[ "$state" =~ ^($wanted)$ ]] && return 0
    sleep 0.1
  done
  fail "job $job is in state '$state' 60 s later, expected $wanted; its output:"$'\n'"$(cat "$work_dir/job.out")"
}

# The step named by the checkpoint directory's commit pointer `latest` (0 when there is none).
committed_step() {
  local name
  name=$(cat "$1/latest" 2>/dev/null || true)
  [[ "$name" =~ ^ckpt-([0-9]+)\.dtc$ ]] && echo "${BASH_REMATCH[1]}" || echo 0
}

# Waits until job $1 has committed a checkpoint at step $2 or later, while it still runs.
wait_for_checkpoint() {
  local job="$1" step="$2" checkpoints="$3" tries state
  for ((tries = 0; tries < 1200; tries++)); do
    (($(committed_step "$checkpoints") >= step)) && break
    state=$(job_state "$job")
    [[ "$state" =~ ^(PENDING|CONFIGURING|RUNNING)$ ]] ||
      fail "job $job is $state before it wrote a checkpoint at step $step; its output:"$'\n'"$(cat "$work_dir/job.out")"
    sleep 0.1
  done
  (($(committed_step "$checkpoints") >= step)) ||
    fail "job $job wrote no checkpoint at step >= $step within 120 s; its output:"$'\n'"$(cat "$work_dir/job.out")"
  state=$(job_state "$job")
  [[ "$state" == RUNNING ]] ||
    fail "job $job is $state, not RUNNING, when checkpoint $(cat "$checkpoints/latest") appeared: the run is too short to be interrupted on this machine"
}

# After an interruption: the last checkpoint committed and the last step the killed run logged
# must be at most one checkpoint interval apart. Sets committed_at_kill.
check_lost_steps() {
  local what="$1" checkpoints="$2" log="$3" logged
  committed_at_kill=$(committed_step "$checkpoints")
  [[ -f "$checkpoints/ckpt-$committed_at_kill.dtc" ]] ||
    fail "$what: $checkpoints/latest names ckpt-$committed_at_kill.dtc, which is missing"
  logged=$(grep -Eo '^step [0-9]+/' "$log" | tail -n 1 | tr -dc 0-9)
  ((logged >= committed_at_kill && logged - committed_at_kill <= every)) ||
    fail "$what: the killed run logged step $logged, the last committed checkpoint is step $committed_at_kill: more than --checkpoint-every $every steps would be lost"
  echo "ok: $what: the killed run logged step $logged (it logs every $log_every), the last complete checkpoint is step $committed_at_kill"
}

# Checks that the lines rank 0 logged after byte `offset` resume at `step` and go on from there.
check_resumed_at() {
  local what="$1" log="$2" offset="$3" step="$4" checkpoints="$5" resumed
  resumed=$(tail -c +"$((offset + 1))" "$log")
  expect_line "$what: resume line" \
    "^resuming from $(regex_quote "$checkpoints")/ckpt-$step\.dtc at step $step\$" "$resumed"
  expect_equal "$what: first progress line after the resume" \
    "$(grep -Eo '^step [0-9]+/' <<<"$resumed" | head -n 1)" "step $((step + log_every))/"
  if grep -q '^dtrain: warning' <<<"$resumed"; then
    fail "$what: the resume warned:"$'\n'"$(grep '^dtrain: warning' <<<"$resumed")"
  fi
}

log_names() { find "$1" -mindepth 1 -maxdepth 1 -printf '%f\n'; }

# Per-rank logs are node_<host>_rank_<r>.log with the hostname the task really had; -N4 -n8 lays
# out 4,2,1,1 (block) over node1..node4, and each file's first line names the same rank and node.
check_rank_logs() {
  local logs="$1" rank host expected=() name
  for rank in 0 1 2 3 4 5 6 7; do
    case $rank in
      [0-3]) host=node1 ;;
      [4-5]) host=node2 ;;
      6) host=node3 ;;
      7) host=node4 ;;
    esac
    name="node_${host}_rank_$rank.log"
    expected+=("$name")
    [[ -f "$logs/$name" ]] || fail "per-rank log $name is missing; $logs holds: $(log_names "$logs" | paste -sd' ')"
    expect_line "$name first line" "^dtrain-trainer: rank $rank/8 on $host," "$(head -n 1 "$logs/$name")"
  done
  expect_equal "per-rank log files" "$(log_names "$logs" | sort | paste -sd' ')" \
    "$(printf '%s\n' "${expected[@]}" | sort | paste -sd' ')"
}

# Output is appended so that the job's restarts land in one file.
submit_job() {
  sbatch --parsable -D "$work_dir" -o "$work_dir/job.out" --open-mode=append "$work_dir/job.sh"
}

check_resume_after_kill() {
  make_work_dir resume
  local total=360 reference_out job checkpoints="$work_dir/ckpt" logs="$work_dir/logs"
  local rank0_log="$logs/node_node1_rank_0.log" offset step
  local run=("${model[@]}" --max-steps "$total" --log-every "$log_every")

  echo "== uninterrupted run"
  reference_out=$(cd "$work_dir" && trainer_step "${run[@]}" --save-params reference.dtc 2>&1) ||
    fail "the uninterrupted run failed:"$'\n'"$reference_out"
  expect_line "uninterrupted run" '^parameter hash agreed on 8 ranks: 0x[0-9a-f]{16}$' "$reference_out"

  # srun inherits --distributed-train from the batch allocation.
  {
    # shellcheck disable=SC2016 # expanded by the batch script
    printf '%s\n' '#!/bin/bash' '#SBATCH -N4 -n8 -t 5' '#SBATCH --distributed-train' \
      'echo "batch start on $(hostname), restart ${SLURM_RESTART_COUNT:-0}"'
    printf 'exec srun --mpi=pmix --kill-on-bad-exit=1'
    printf ' %q' "$DTRAIN_TRAINER" "${run[@]}" --checkpoint-dir "$checkpoints" \
      --checkpoint-every "$every" --log-dir "$logs" --save-params final.dtc
    printf '\n'
  } >"$work_dir/job.sh"

  echo "== interrupted by scontrol requeue"
  job=$(submit_job)
  wait_for_checkpoint "$job" $((2 * every)) "$checkpoints"
  scontrol requeue "$job"
  local requeued_at
  requeued_at=$(date +%s)
  # The requeued job returns to PENDING once its old processes have ended.
  wait_for_state "$job" PENDING
  expect_no_job_processes "after scontrol requeue of job $job" 60
  check_lost_steps "requeue" "$checkpoints" "$rank0_log"
  step=$committed_at_kill
  offset=$(stat -c %s "$rank0_log")
  # Slurm holds a requeued job back until its old credential expired (its begin time); release
  # it now, but not in the second of the requeue: each slurmd revoked the old credential at the
  # job's end time, in whole seconds, and refuses a credential created in that second
  # (cred_revoked: ctime <= revoked), so a launch in it failed the job.
  while (($(date +%s) <= requeued_at + 1)); do sleep 0.2; done
  scontrol update "JobId=$job" StartTime=now
  wait_for_checkpoint "$job" $((step + 2 * every)) "$checkpoints"
  check_resumed_at "after the requeue" "$rank0_log" "$offset" "$step" "$checkpoints"
  expect_equal "restarts of job $job" \
    "$(scontrol show job -o "$job" | grep -o 'Restarts=[0-9]*')" "Restarts=1"

  echo "== interrupted by scancel, then submitted again"
  scancel "$job"
  wait_for_state "$job" CANCELLED
  expect_no_job_processes "after scancel of job $job" 60
  check_lost_steps "scancel" "$checkpoints" "$rank0_log"
  step=$committed_at_kill
  offset=$(stat -c %s "$rank0_log")
  job=$(submit_job)
  wait_for_state "$job" 'COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY'
  expect_equal "state of the resubmitted job $job" "$(job_state "$job")" COMPLETED
  check_resumed_at "after the resubmission" "$rank0_log" "$offset" "$step" "$checkpoints"
  expect_line "summary of the last segment" "^  steps $step\.\.$total of $total," \
    "$(tail -c +"$((offset + 1))" "$rank0_log")"

  echo "== final state"
  local reference_hash final_hash
  reference_hash=$(grep -Eo 'agreed on 8 ranks: 0x[0-9a-f]{16}' <<<"$reference_out")
  final_hash=$(grep -Eo 'agreed on 8 ranks: 0x[0-9a-f]{16}' "$rank0_log" | tail -n 1)
  expect_equal "parameter hash after two interruptions" "$final_hash" "$reference_hash"
  cmp "$work_dir/reference.dtc" "$work_dir/final.dtc" ||
    fail "final.dtc (interrupted twice) differs from reference.dtc (uninterrupted)"
  echo "ok: final state file equals the uninterrupted run's byte for byte ($(stat -c %s "$work_dir/final.dtc") bytes)"
  expect_equal "batch script starts" "$(grep '^batch start' "$work_dir/job.out" | paste -sd'|')" \
    "batch start on node1, restart 0|batch start on node1, restart 1|batch start on node1, restart 0"
  check_rank_logs "$logs"
}

# Inverts one byte of a file in place.
flip_byte() {
  local file="$1" at="$2" value
  value=$(od -An -tu1 -j "$at" -N1 "$file" | tr -dc 0-9)
  printf '%b' "\\$(printf '%03o' $((255 - value)))" | dd of="$file" bs=1 seek="$at" conv=notrunc status=none
}

check_corrupt_latest() {
  make_work_dir corrupt
  local checkpoints="$work_dir/ckpt" out
  local run=("${model[@]}" --max-steps $((2 * every)) --log-every "$every" --checkpoint-dir
    "$checkpoints" --checkpoint-every "$every")
  out=$(cd "$work_dir" && trainer_step "${run[@]}" 2>&1) || fail "the first run failed:"$'\n'"$out"
  expect_equal "committed checkpoint" "$(cat "$checkpoints/latest")" "ckpt-$((2 * every)).dtc"
  local newest="$checkpoints/ckpt-$((2 * every)).dtc" previous="$checkpoints/ckpt-$every.dtc"
  cp "$newest" "$work_dir/intact.dtc"
  # A byte in the middle of the parameters: the file keeps its size, only the checksum shows it.
  flip_byte "$newest" $(($(stat -c %s "$newest") / 2))
  cmp -s "$newest" "$work_dir/intact.dtc" && fail "flip_byte left $newest unchanged"

  out=$(cd "$work_dir" && trainer_step "${run[@]}" --save-params final.dtc 2>&1) ||
    fail "the run over a corrupt checkpoint failed instead of falling back:"$'\n'"$out"
  expect_line "refusal" "^dtrain: warning: checkpoint $(regex_quote "$newest") is corrupt: payload checksum mismatch .*; refusing it\$" "$out"
  expect_line "fallback" \
    "^dtrain: warning: falling back to the previous checkpoint $(regex_quote "$previous")\$" "$out"
  expect_line "resume" "^resuming from $(regex_quote "$previous") at step $every\$" "$out"
  expect_line "summary" "^  steps $every\.\.$((2 * every)) of $((2 * every))," "$out"
  cmp "$work_dir/intact.dtc" "$work_dir/final.dtc" ||
    fail "retraining steps $every..$((2 * every)) from $previous did not reproduce the intact checkpoint"
  echo "ok: retraining from step $every reproduced the intact step-$((2 * every)) checkpoint byte for byte"
}

case "${1:-}" in
  resume-after-kill) check_resume_after_kill ;;
  corrupt-latest) check_corrupt_latest ;;
  *) fail "unknown check '${1:-}'; use resume-after-kill or corrupt-latest" ;;
esac
