#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Throughput and memory figures of dtrain-trainer on the local Slurm cluster (not a test: it
# measures and prints). See --help.
set -euo pipefail

usage() {
  cat <<EOF
Usage: $(basename "$0") [--trainer PATH] [--repeats N] [--steps N] [--link-rate RATE]
         [--plot FILE.svg] [--plotter PATH] [-- TRAINER FLAGS...]

Runs dtrain-trainer with srun --distributed-train --mpi=pmix on the local cluster of
slurm/local/cluster.sh (source its env.sh first; spank_dtrain.so must be in its plugstack.conf):
  DDP on 1 rank (-N1 -n1), and DDP, naive and dp sync on 2, 4 and 8 ranks (-N2 -n2, -N4 -n4,
  -N4 -n8), each configuration N times, round-robin so that a change in machine load spreads
  over all of them. Prints every command, each run's figures, and a table of medians:
samples/s, scaling efficiency against the 1-rank median, the step time split into compute,
communication and idle (means over the ranks), the peak RSS of rank 0 and rank 1 (dp keeps the
optimizer state on rank 0 only), and the DDP/naive and DDP/dp throughput ratios at 8 ranks.
Idle is the time a rank waits in a collective because another rank is still computing (the
slowest rank's compute minus its own, e.g. rank 0's gradient sum and optimizer step under dp),
plus the trainer's own idle (logging); communication is the rest of the time in collectives.

Options:
  --trainer PATH   dtrain-trainer to run (default: \$DTRAIN_TRAINER, else <repo>/build/src/trainer/dtrain-trainer)
  --repeats N      runs per configuration (default: 3)
  --steps N        training steps per run (default: 40)
  --link-rate RATE give every node's link this bandwidth in each direction while the runs last
                   (tc's rate syntax: 1gbit, 500mbit; needs root): a token-bucket filter on both
                   ends of each node's veth pair, as a switch port of that speed would. Without
                   it every "link" is a memory copy on the same CPUs, so no node's link can be
                   a bottleneck (such as rank 0's under dp); the filters are removed on exit
  --plot FILE.svg  also draw the medians as a chart: samples/s against ranks, one line per sync
                   mode, and DDP's ideal (its 1-rank median times the ranks), dashed
  --plotter PATH   dtrain-plot to draw it with (default: \$DTRAIN_PLOT, else dtrain-plot beside
                   the trainer's build tree, <build>/src/bench/dtrain-plot, else on PATH)
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
link_rate=""
plot=""
plotter="${DTRAIN_PLOT:-}"
extra=()
while (($#)); do
  case "$1" in
    --trainer | --repeats | --steps | --link-rate | --plot | --plotter)
      (($# >= 2)) || fail "option $1 needs a value; see --help"
      case "$1" in
        --trainer) trainer="$2" ;;
        --repeats) repeats="$2" ;;
        --steps) steps="$2" ;;
        --link-rate) link_rate="$2" ;;
        --plot) plot="$2" ;;
        --plotter) plotter="$2" ;;
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
# The chart's tools and directory are checked before the runs, not after them.
if [[ -n "$plot" ]]; then
  if [[ -z "$plotter" ]]; then
    plotter="$(dirname "$trainer")/../bench/dtrain-plot"
    [[ -x "$plotter" ]] || plotter=$(command -v dtrain-plot || true)
  fi
  [[ -n "$plotter" && -x "$plotter" ]] ||
    fail "--plot needs dtrain-plot; build it (ninja dtrain-plot) or pass --plotter"
  plot_dir=$(dirname -- "$plot")
  [[ -d "$plot_dir" && -w "$plot_dir" ]] || fail "--plot $plot: cannot write to the directory $plot_dir"
fi
: "${DTRAIN_CLUSTER_DIR:?dtrain: DTRAIN_CLUSTER_DIR is unset; source the cluster env.sh first (slurm/local/cluster.sh up prints its path)}"
export OMPI_MCA_mpi_yield_when_idle=1

# Every node has a private /tmp; the JSON files go where all of them and this shell can write.
work_dir=$(mktemp -d -p "$DTRAIN_CLUSTER_DIR" scaling.XXXXXX)
shaped=()  # "NETNS DEVICE" per filter; NETNS "-" is the host
remove_link_limits() {
  local entry ns dev
  for entry in "${shaped[@]}"; do
    read -r ns dev <<<"$entry"
    if [[ $ns == - ]]; then
      tc qdisc del dev "$dev" root 2>/dev/null || true
    else
      ip netns exec "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
    fi
  done
}
trap 'remove_link_limits; rm -rf -- "$work_dir"' EXIT

# The cluster's bridge is the one whose alias is its state directory (slurm/local/cluster.sh);
# its ports dtrainInK face nodeK's eth0 in the namespace dtrainI-nodeK.
limit_links() {
  [[ "$link_rate" =~ ^[1-9][0-9]*(\.[0-9]+)?([kmg]?bit|[kmg]?bps)$ ]] ||
    fail "--link-rate '$link_rate' is not a rate like 1gbit or 500mbit"
  command -v tc >/dev/null || fail "--link-rate needs tc (Debian package iproute2)"
  local state bridge alias port node ns
  state=$(cd "$DTRAIN_CLUSTER_DIR" && pwd -P)
  for alias in /sys/class/net/dtrain*/ifalias; do
    [[ -r $alias && $(<"$alias") == "$state" ]] && bridge=$(basename "$(dirname "$alias")")
  done
  [[ -n "${bridge:-}" ]] || fail "--link-rate: no bridge of the cluster in $state (is it up?)"
  for port in /sys/class/net/"$bridge"n[0-9]*; do
    port=$(basename "$port")
    node=node${port##*n}
    ns="$bridge-$node"
    # burst: at least one GSO segment (64 KiB) so that no packet is larger than the bucket.
    tc qdisc replace dev "$port" root tbf rate "$link_rate" burst 256kb latency 100ms ||
      fail "--link-rate: tc could not shape $port (needs root)"
    shaped+=("- $port")
    ip netns exec "$ns" tc qdisc replace dev eth0 root tbf rate "$link_rate" burst 256kb \
      latency 100ms || fail "--link-rate: tc could not shape eth0 of $ns"
    shaped+=("$ns eth0")
  done
  echo "# links: every node's link limited to $link_rate each way (tc tbf on $bridge's ports and the nodes' eth0)"
}
[[ -z "$link_rate" ]] || limit_links

# name ranks nodes sync
readonly configs=("ddp-1 1 1 ddp"
  "ddp-2 2 2 ddp" "naive-2 2 2 naive" "dp-2 2 2 dp"
  "ddp-4 4 4 ddp" "naive-4 4 4 naive" "dp-4 4 4 dp"
  "ddp-8 8 4 ddp" "naive-8 8 4 naive" "dp-8 8 4 dp")

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

python3 - "$work_dir" "$repeats" "${plot:+$work_dir/plot.json}" "${configs[@]}" <<'EOF'
import json, statistics, sys
work_dir, repeats, plot_json, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]

def split(doc):
    """Mean over the ranks of (compute, communication, idle) in ms per step. A rank's wait for
    the slowest rank's compute is moved from communication to idle."""
    ranks = doc["ranks"]
    slowest = max(r["compute_ms_per_step"] for r in ranks)
    parts = [0.0, 0.0, 0.0]
    for r in ranks:
        wait = min(slowest - r["compute_ms_per_step"], r["communication_ms_per_step"])
        parts[0] += r["compute_ms_per_step"]
        parts[1] += r["communication_ms_per_step"] - wait
        parts[2] += wait + r["idle_ms_per_step"]
    return [p / len(ranks) for p in parts]

rows = {}
for config in configs:
    name, ranks, nodes, sync = config.split()
    docs = [json.load(open(f"{work_dir}/{name}.{run}.json")) for run in range(1, repeats + 1)]
    def median(key):
        values = [d[key] for d in docs if d.get(key) is not None]
        return statistics.median(values) if values else None
    splits = [split(d) for d in docs]
    rows[name] = dict(ranks=int(ranks), nodes=int(nodes), sync=sync,
                      samples=median("samples_per_sec"),
                      runs=[d["samples_per_sec"] for d in docs],
                      step_ms=median("step_ms"),
                      split=[statistics.median(s[k] for s in splits) for k in range(3)],
                      rss0=median("peak_rss_kib_rank0"), rss1=median("peak_rss_kib_rank1"),
                      model=docs[0]["model"], batch=docs[0]["global_batch"] // int(ranks))
first = next(iter(rows.values()))
print(f"\nmodel {first['model']}, batch {first['batch']} per rank, medians of {repeats} run(s); "
      "compute/comm/idle: ms per step, mean over the ranks")
print(f"{'config':8} {'ranks':>5} {'nodes':>5} {'samples/s':>10} {'efficiency':>10} "
      f"{'step ms':>8} {'compute':>8} {'comm':>8} {'idle':>8} {'RSS r0 MiB':>10} {'RSS r1 MiB':>10}"
      "  all runs (samples/s)")
base = rows["ddp-1"]["samples"]
for name, r in rows.items():
    efficiency = r["samples"] / (base * r["ranks"])
    rss1 = f"{r['rss1'] / 1024:10.1f}" if r["rss1"] is not None else f"{'-':>10}"
    compute, comm, idle = r["split"]
    print(f"{name:8} {r['ranks']:5} {r['nodes']:5} {r['samples']:10.1f} {100 * efficiency:9.1f}% "
          f"{r['step_ms']:8.2f} {compute:8.2f} {comm:8.2f} {idle:8.2f} {r['rss0'] / 1024:10.1f} "
          f"{rss1}  " + ", ".join(f"{v:.1f}" for v in r["runs"]))
for other in ("naive", "dp"):
    print(f"DDP/{other} throughput at 8 ranks: "
          f"{rows['ddp-8']['samples'] / rows[other + '-8']['samples']:.3f}")
if plot_json:
    # The table's medians as a dtrain-plot series file (src/bench/plot_input.hpp).
    syncs = []
    for r in rows.values():
        if r["sync"] not in syncs:
            syncs.append(r["sync"])
    series = [{"label": sync, "group": sync,
               "points": sorted([r["ranks"], r["samples"]] for r in rows.values() if r["sync"] == sync)}
              for sync in syncs]
    ddp_ranks = sorted(r["ranks"] for r in rows.values() if r["sync"] == "ddp")
    series.append({"label": "ddp ideal (1-rank median x ranks)", "group": "ddp", "dashed": True,
                   "points": [[n, base * n] for n in ddp_ranks]})
    json.dump({"tool": "dtrain-plot",
               "title": f"dtrain-trainer samples/s, model {first['model']}, batch {first['batch']} "
                        f"per rank, medians of {repeats} run(s)",
               "x_label": "ranks", "x_ticks": "number", "y_label": "samples/s",
               "series": series}, open(plot_json, "w"), indent=1)
EOF
if [[ -n "$plot" ]]; then
  "$plotter" -o "$plot" "$work_dir/plot.json"
  echo "# chart: $plot"
fi
