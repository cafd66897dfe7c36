#!/usr/bin/env bash
# Throughput and memory figures of dtrain-trainer on the local Slurm cluster (not a test: it
# measures and prints). See --help.
set -euo pipefail

usage() {
  cat <<EOF
Usage: $(basename "$0") [--trainer PATH] [--repeats N] [--steps N] [-- TRAINER FLAGS...]

Runs dtrain-trainer with srun --distributed-train --mpi=pmix on the local cluster of
slurm/cluster.sh (source its env.sh first; spank_dtrain.so must be in its plugstack.conf):
  DDP on 1, 2, 4 and 8 ranks (-N1 -n1, -N2 -n2, -N4 -n4, -N4 -n8) and naive sync on 8 ranks,
each configuration N times, round-robin so that a change in machine load spreads over all of
them. Prints every command, each run's figures, and a table of medians: samples/s, scaling
efficiency against the 1-rank median, the DDP/naive ratio at 8 ranks, and the peak RSS of
rank 0 and rank 1 (naive sync keeps the optimizer state on rank 0 only).

Options:
  --trainer PATH   dtrain-trainer to run (default: \$DTRAIN_TRAINER, else <repo>/build/src/trainer/dtrain-trainer)
  --repeats N      runs per configuration (default: 3)
  --steps N        training steps per run (default: 40)
  -h, --help       print this help
Flags after -- go to every run (default model: the trainer's, 256-1024-1024-10, batch 32 per rank).
More ranks than cores: the runs set OMPI_MCA_mpi_yield_when_idle=1.
EOF
}

fail() {
  echo "dtrain: $*" >&2
  exit 1
}

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
trainer="${DTRAIN_TRAINER:-$repo_root/build/src/trainer/dtrain-trainer}"
repeats=3
steps=40
extra=()
while (($#)); do
  case "$1" in
    --trainer | --repeats | --steps)
      (($# >= 2)) || fail "option $1 needs a value; see --help"
      case "$1" in
        --trainer) trainer="$2" ;;
        --repeats) repeats="$2" ;;
        --steps) steps="$2" ;;
      esac
      shift
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    --)
      shift
      extra=("$@")
      break
      ;;
    *) fail "unknown argument '$1'; see --help" ;;
  esac
  shift
done
[[ "$repeats" =~ ^[1-9][0-9]?$ ]] || fail "--repeats '$repeats' is not a number in 1-99"
[[ "$steps" =~ ^[1-9][0-9]{0,5}$ ]] || fail "--steps '$steps' is not a number in 1-999999"
[[ -x "$trainer" ]] || fail "dtrain-trainer '$trainer' is not executable; build it (ninja dtrain-trainer) or pass --trainer"
: "${DTRAIN_CLUSTER_DIR:?dtrain: DTRAIN_CLUSTER_DIR is unset; source the cluster env.sh first (slurm/cluster.sh up prints its path)}"
export OMPI_MCA_mpi_yield_when_idle=1

# Every node has a private /tmp; the JSON files go where all of them and this shell can write.
work_dir=$(mktemp -d -p "$DTRAIN_CLUSTER_DIR" scaling.XXXXXX)
trap 'rm -rf -- "$work_dir"' EXIT

# name ranks nodes sync
readonly configs=("ddp-1 1 1 ddp" "ddp-2 2 2 ddp" "ddp-4 4 4 ddp" "ddp-8 8 4 ddp" "naive-8 8 4 naive")

command_for() {
  local ranks="$1" nodes="$2" sync="$3" json="$4"
  local words=(srun --distributed-train --mpi=pmix --kill-on-bad-exit=1 "-N$nodes" "-n$ranks"
    "$trainer" --sync "$sync" --max-steps "$steps" --log-every 1000000 "${extra[@]}" --json "$json")
  printf '%q ' "${words[@]}"
}

echo "# machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); OMPI_MCA_mpi_yield_when_idle=1"
for config in "${configs[@]}"; do
  read -r name ranks nodes sync <<<"$config"
  echo "# $name: $(command_for "$ranks" "$nodes" "$sync" "$work_dir/$name.RUN.json")"
done
for ((run = 1; run <= repeats; run++)); do
  for config in "${configs[@]}"; do
    read -r name ranks nodes sync <<<"$config"
    json="$work_dir/$name.$run.json"
    # Open MPI 4.1's TCP BTL was seen to crash in MPI_Init (a NULL callback after "failed to TCP
    # connect to a peer ... Operation now in progress") in about one launch in 30 on this loaded
    # 2-core machine: such a launch is retried once, saying so; a second failure ends the script.
    if ! output=$(eval "$(command_for "$ranks" "$nodes" "$sync" "$json")" 2>&1); then
      echo "# run $run of $name failed; retrying it once. Its output:"
      # shellcheck disable=SC2001 # prefixes every line, not one match
      sed 's/^/#   /' <<<"$output"
      output=$(eval "$(command_for "$ranks" "$nodes" "$sync" "$json")" 2>&1) ||
        fail "run $run of $name failed twice:"$'\n'"$output"
    fi
    python3 - "$json" "$name" "$run" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
rss1 = doc.get("peak_rss_kib_rank1")
print(f"run {sys.argv[3]} {sys.argv[2]:8} {doc['samples_per_sec']:10.1f} samples/s  step "
      f"{doc['step_ms']:8.2f} ms  communication {100 * doc['communication_share']:5.1f}%  "
      f"peak RSS rank 0 {doc['peak_rss_kib_rank0'] / 1024:6.1f} MiB"
      + (f", rank 1 {rss1 / 1024:6.1f} MiB" if rss1 is not None else ""))
EOF
  done
done

python3 - "$work_dir" "$repeats" "${configs[@]}" <<'EOF'
import json, statistics, sys
work_dir, repeats, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = {}
for config in configs:
    name, ranks, nodes, sync = config.split()
    docs = [json.load(open(f"{work_dir}/{name}.{run}.json")) for run in range(1, repeats + 1)]
    def median(key):
        values = [d[key] for d in docs if d.get(key) is not None]
        return statistics.median(values) if values else None
    rows[name] = dict(ranks=int(ranks), nodes=int(nodes), sync=sync,
                      samples=median("samples_per_sec"),
                      runs=[d["samples_per_sec"] for d in docs],
                      step_ms=median("step_ms"), comm=median("communication_share"),
                      rss0=median("peak_rss_kib_rank0"), rss1=median("peak_rss_kib_rank1"),
                      model=docs[0]["model"], batch=docs[0]["global_batch"] // int(ranks))
first = next(iter(rows.values()))
print(f"\nmodel {first['model']}, batch {first['batch']} per rank, medians of {repeats} run(s)")
print(f"{'config':8} {'ranks':>5} {'nodes':>5} {'samples/s':>10} {'efficiency':>10} "
      f"{'step ms':>8} {'comm':>6} {'RSS r0 MiB':>10} {'RSS r1 MiB':>10}  all runs (samples/s)")
base = rows["ddp-1"]["samples"]
for name, r in rows.items():
    efficiency = r["samples"] / (base * r["ranks"])
    rss1 = f"{r['rss1'] / 1024:10.1f}" if r["rss1"] is not None else f"{'-':>10}"
    print(f"{name:8} {r['ranks']:5} {r['nodes']:5} {r['samples']:10.1f} {100 * efficiency:9.1f}% "
          f"{r['step_ms']:8.2f} {100 * r['comm']:5.1f}% {r['rss0'] / 1024:10.1f} {rss1}  "
          + ", ".join(f"{v:.1f}" for v in r["runs"]))
print(f"DDP/naive throughput at 8 ranks: {rows['ddp-8']['samples'] / rows['naive-8']['samples']:.3f}")
EOF
