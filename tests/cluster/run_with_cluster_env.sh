#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs a command with the client environment of a local cluster: run_with_cluster_env.sh STATE_DIR CMD...
# The env file is written by `slurm/local/cluster.sh up` (the cluster_up fixture), so SLURM_CONF and the
# loopback-only Open MPI settings are defined in one place.
set -euo pipefail

if (($# < 2)); then
  echo "dtrain: usage: $(basename "$0") STATE_DIR COMMAND [ARGS...]" >&2
  exit 2
fi
env_file="$1/env.sh"
shift
if [[ ! -f "$env_file" ]]; then
  echo "dtrain: $env_file is missing: the cluster is not up; run slurm/local/cluster.sh up --state-dir $(dirname "$env_file") (the cluster_up test does)" >&2
  exit 1
fi
# shellcheck disable=SC1090
source "$env_file"
exec "$@"
