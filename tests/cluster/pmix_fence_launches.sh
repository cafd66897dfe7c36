#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Counts failed MPI launches on the local cluster with each way of running Slurm's PMIx fences:
#   pmix_fence_launches.sh [--launches N] [--load K] [--state-dir DIR] MPI_CHECK
# For each of `--pmix-fence ring` and `--pmix-fence slurm-default` (slurm/local/cluster.sh), it
# restarts a cluster of its own in DIR (default: <build>/cluster-fence, beside MPI_CHECK's build
# tree) and runs N (default 150) launches of `srun --mpi=pmix -N4 -n8 MPI_CHECK --ranks 8 --hosts 4`
# (dtrain_mpi_allreduce_check) while K (default: the number of CPUs) busy loops load the machine,
# alternating the two modes in rounds of 10 so that both see the same load. It prints every failed
# launch's last lines and one summary line per mode; it exits 0 when it could count, whatever the
# counts (a measurement, not a test). The cluster is taken down at the end.
set -euo pipefail

launches=150
load=$(nproc)
state_dir=""
usage() { sed -n '3,11p' "$0" | cut -c3-; }
while (($#)); do
  case $1 in
    --launches | --load | --state-dir)
      (($# >= 2)) || { echo "dtrain: $1 needs a value" >&2; exit 2; }
      case $1 in
        --launches) launches=$2 ;;
        --load) load=$2 ;;
        --state-dir) state_dir=$2 ;;
      esac
      shift 2
      ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "dtrain: unknown option '$1'; see --help" >&2; exit 2 ;;
    *) break ;;
  esac
done
(($# == 1)) || { echo "dtrain: give the path of dtrain_mpi_allreduce_check; see --help" >&2; exit 2; }
mpi_check=$(realpath -- "$1")
[[ -x $mpi_check ]] || { echo "dtrain: '$1' is not an executable" >&2; exit 2; }
[[ $launches =~ ^[1-9][0-9]*$ && $load =~ ^[0-9]+$ ]] || { echo "dtrain: --launches and --load take whole numbers" >&2; exit 2; }
state_dir=${state_dir:-$(dirname "$(dirname "$(dirname "$mpi_check")")")/cluster-fence}
cluster_sh="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)/slurm/local/cluster.sh"

load_pids=()
cleanup() {
  ((${#load_pids[@]} == 0)) || kill "${load_pids[@]}" 2>/dev/null || true
  "$cluster_sh" down --state-dir "$state_dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT
for ((i = 0; i < load; i++)); do
  sh -c 'while :; do :; done' &
  load_pids+=($!)
done

declare -A failed=([ring]=0 [slurm-default]=0) ran=([ring]=0 [slurm-default]=0)
out=$(mktemp)
while ((ran[ring] < launches || ran[slurm-default] < launches)); do
  for mode in ring slurm-default; do
    ((ran[$mode] < launches)) || continue
    "$cluster_sh" up --state-dir "$state_dir" --pmix-fence "$mode" >/dev/null
    # shellcheck disable=SC1091
    source "$state_dir/env.sh"
    for ((i = 0; i < 10 && ran[$mode] < launches; i++)); do
      ran[$mode]=$((ran[$mode] + 1))
      if ! timeout 120 srun --mpi=pmix --kill-on-bad-exit=1 -N4 -n8 "$mpi_check" --ranks 8 --hosts 4 >"$out" 2>&1; then
        failed[$mode]=$((failed[$mode] + 1))
        echo "dtrain: $mode launch ${ran[$mode]} failed:"
        tail -n 5 "$out" | sed 's/^/    /'
      fi
    done
  done
done
rm -f "$out"
for mode in ring slurm-default; do
  echo "dtrain: PMIx fence $mode: ${failed[$mode]} of ${ran[$mode]} launches failed (srun --mpi=pmix -N4 -n8, $load busy loops)"
done
