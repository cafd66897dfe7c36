#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The demo: dtrain on the local four-node Slurm cluster. Usage: slurm/local/demo.sh BUILD_DIR
# Needs the cluster up with the plugin loaded and its env.sh sourced (slurm/local/quickstart.sh demo
# does both). Exits 0 when every step worked, non-zero as soon as one fails.
set -euo pipefail

if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  sed -n '3,5p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
readonly build=$(cd "${1:?usage: demo.sh BUILD_DIR}" && pwd -P)
readonly workdir="$build/demo" # outside /tmp: every emulated node has its own /tmp
readonly plan_tool="$build/src/plan/dtrain-plan"
readonly trainer="$build/src/trainer/dtrain-trainer"
readonly bench="$build/src/bench/dtrain-bench"
for tool in "$plan_tool" "$trainer" "$bench"; do
  [[ -x "$tool" ]] || {
    echo "dtrain: demo: $tool is missing; build the tree first (slurm/local/quickstart.sh demo)" >&2
    exit 1
  }
done
command -v srun >/dev/null || {
  echo "dtrain: demo: srun is not on PATH; source the cluster's env.sh first" >&2
  exit 1
}
mkdir -p "$workdir"
cd "$workdir"
# Eight ranks share the machine's cores here: let Open MPI yield instead of spinning.
export OMPI_MCA_mpi_yield_when_idle=1

section() { printf '\n== %s\n' "$*"; }

# The four emulated nodes share this machine's cores, so the plugin rightly warns on every node
# with more tasks than cores. On a real node that warning matters; here it is the same fact under
# every section, so it is stated once below and only that warning is filtered from the steps.
readonly cpu_sharing_warning='^dtrain: warning: [0-9]+ tasks share the [0-9]+ CPUs of '
step() {
  srun "$@" 2> >(grep -Ev "$cpu_sharing_warning" >&2)
}

echo "dtrain demo: 4 emulated nodes on one machine with $(nproc) cores, so tasks share CPUs;"
echo "the plugin's warning about it is not repeated under each step."

section "srun -N4 -n8 --distributed-train: what every task got (uneven layout 4,2,1(x2))"
step -N4 -n8 --distributed-train bash -c \
  'printf "%s %s %s %s %s %s %s:%s %s.%s\n" "$RANK" "$GROUP_RANK" "$(hostname)" "$LOCAL_RANK" \
     "$DTRAIN_CURRENT_ENDPOINT" "$DTRAIN_ENDPOINTS" "$MASTER_ADDR" "$MASTER_PORT" \
     "$SLURM_JOB_ID" "$SLURM_STEP_ID"' | sort -n >live.txt
printf '%-6s%-6s%-8s%-7s%-22s%s\n' rank node host local endpoint master
awk '{ printf "%-6s%-6s%-8s%-7s%-22s%s\n", $1, $2, $3, $4, $5, $7 }' live.txt
read -r job_step < <(awk '{ print $8 }' live.txt | sort -u)
[[ $(awk '{ print $8 }' live.txt | sort -u | wc -l) -eq 1 && $(wc -l <live.txt) -eq 8 ]] || {
  echo "dtrain: demo: expected 8 tasks of one step, got:" >&2
  cat live.txt >&2
  exit 1
}
job_id=${job_step%.*}
step_id=${job_step#*.}
echo "job $job_id, step $step_id; every task holds the same endpoint list:"
awk '{ print $6 }' live.txt | sort | uniq -c

section "the same step planned offline by dtrain-plan --job-id $job_id --step-id $step_id"
# Run on node1, where the node names resolve as they did in the step.
step -N1 -n1 -w node1 "$plan_tool" --nodelist 'node[1-4]' --tasks-per-node '4,2,1(x2)' \
  --job-id "$job_id" --step-id "$step_id" --json plan.json >plan.txt
cat plan.txt
python3 - live.txt plan.json <<'EOF'
import json, sys
live = [line.split() for line in open(sys.argv[1])]
plan = json.load(open(sys.argv[2]))
want = [[str(r["rank"]), str(r["node"]), r["host"], str(r["local_rank"]), r["endpoint"]]
        for r in plan["ranks"]]
got = [row[:5] for row in live]
master = f'{plan["master_addr"]}:{plan["master_port"]}'
if got != want or any(row[6] != master for row in live):
    print("dtrain: demo: the offline plan differs from the live step", file=sys.stderr)
    sys.exit(1)
print(f"the live step and the offline plan agree on all {len(got)} ranks, endpoints and master {master}")
EOF

section "dtrain-trainer: DDP training on 8 ranks over 4 nodes"
step --mpi=pmix -N4 -n8 --distributed-train "$trainer" \
  --hidden 256,256 --max-steps 200 --log-every 20 --log-dir "$workdir/logs"

section "dtrain-bench: all_reduce on 8 ranks over 4 nodes (MPI backend)"
step --mpi=pmix -N4 -n8 --distributed-train "$bench" \
  --op all_reduce -b 8 -e 8M -f 8 --backend mpi

printf '\ndtrain demo: every step worked\n'
