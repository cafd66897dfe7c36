#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs a command with the client environment of the Slurm 25.11 cluster:
#   run_slurm25.sh STATE_DIR COMMAND [ARGS...]
# Reports the fixture's skip (STATE_DIR/skipped) with exit status 77, and refuses to run when the
# srun on PATH is not 25.11's, so that no check can pass against the wrong Slurm.
set -euo pipefail

if [[ "${1:-}" == -h || "${1:-}" == --help || $# -lt 2 ]]; then
  echo "Usage: $(basename "$0") STATE_DIR COMMAND [ARGS...]"
  echo "Runs COMMAND with STATE_DIR/env.sh of the Slurm 25.11 cluster (tests/slurm25/slurm25_up.sh) sourced."
  [[ $# -ge 2 || "${1:-}" == -h || "${1:-}" == --help ]] && exit 0
  exit 2
fi
state_dir="$1"
shift
if [[ -f "$state_dir/skipped" ]]; then
  echo "dtrain: skipped: $(cat "$state_dir/skipped")"
  exit 77
fi
env_file="$state_dir/env.sh"
[[ -f "$env_file" ]] ||
  {
    echo "dtrain: $env_file is missing: the Slurm 25.11 cluster is not up; the slurm25_up test starts it" >&2
    exit 1
  }
# shellcheck disable=SC1090
source "$env_file"
version=$(srun --version 2>&1) || true
if [[ "$version" != "slurm 25.11."* ]]; then
  echo "dtrain: srun on PATH ($(command -v srun)) is '$version', not Slurm 25.11; $env_file must put the 25.11 prefix first" >&2
  exit 1
fi
exec "$@"
