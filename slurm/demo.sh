#!/usr/bin/env bash
# The demo: dtrain on the local four-node Slurm cluster. Usage: slurm/demo.sh BUILD_DIR
# Needs the cluster up with the plugin loaded and its env.sh sourced (slurm/quickstart.sh demo
# does both).
set -euo pipefail

readonly build=$(cd "${1:?usage: demo.sh BUILD_DIR}" && pwd -P)
readonly workdir="$build/demo"   # outside /tmp: every emulated node has its own /tmp
mkdir -p "$workdir"
cd "$workdir"
# Eight ranks share two cores here: let Open MPI yield instead of spinning.
export OMPI_MCA_mpi_yield_when_idle=1

section() { printf '\n== %s\n' "$*"; }

section "srun -N4 -n8 --distributed-train: what every task got (uneven layout 4,2,1(x2))"
printf '%-5s %-6s %-6s %-5s %-22s %s\n' rank host local node endpoint master
srun -N4 -n8 --distributed-train bash -c \
  'printf "%-5s %-6s %-6s %-5s %-22s %s\n" "$RANK" "$(hostname)" "$LOCAL_RANK" "$GROUP_RANK" "$DTRAIN_CURRENT_ENDPOINT" "$MASTER_ADDR:$MASTER_PORT"' |
  sort -n
echo "every task holds the same endpoint list:"
srun -N4 -n8 --distributed-train bash -c 'echo "$DTRAIN_ENDPOINTS"' | sort | uniq -c

section "the same step planned offline by dtrain-plan"
"$build/src/plan/dtrain-plan" --nodelist 'node[1-4]' --tasks-per-node '4,2,1(x2)' \
  --plugstack-args address=name | head -12

if [[ -x "$build/src/trainer/dtrain-trainer" ]]; then
  section "dtrain-trainer: DDP training on 8 ranks over 4 nodes"
  srun --mpi=pmix -N4 -n8 --distributed-train "$build/src/trainer/dtrain-trainer" \
    --hidden 256,256 --max-steps 200 --log-every 20 --log-dir "$workdir/logs"
fi

if [[ -x "$build/src/bench/dtrain-bench" ]]; then
  section "dtrain-bench: all_reduce on 8 ranks over 4 nodes (MPI backend)"
  srun --mpi=pmix -N4 -n8 --distributed-train "$build/src/bench/dtrain-bench" \
    --op all_reduce -b 8 -e 8M -f 8 --backend mpi
fi
