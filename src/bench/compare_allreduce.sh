#!/usr/bin/env bash
# Puts dtrain-bench's all_reduce busbw next to a plain MPI_Allreduce loop on the same ranks
# and sizes (one allocation, same timing method), and dtrain's bootstrap time next to bare
# MPI_Init + MPI_Bcast.
#
# Usage: compare_allreduce.sh [-N nodes] [-n ranks] [-b minbytes] [-e maxbytes] [-i iters]
#                             [-R sweeps] [-r bootstrap-runs] [-B bindir]
# dtrain-bench runs twice per sweep, as shipped and with --keep-freed-memory 0 (the heap
# policy the baseline has), so that the second ratio shows dtrain's own overhead alone. The
# sweeps repeat R times (default 3), rotating the order, and each size takes the median busbw
# of its R runs, so that load from other processes hits all programs alike.
# Under Slurm (SLURM_JOB_ID set, or SRUN_ALLOC=1 to let srun allocate) it launches with
#   srun --mpi=pmix -N<nodes> -n<ranks>
# elsewhere with mpirun on loopback. LAUNCH="..." overrides the launcher entirely.
set -euo pipefail

nodes=4 ranks=8 min=8 max=64M runs=5 iters=20 sweeps=3
bindir="$(cd "$(dirname "$0")" && pwd)"
while getopts "N:n:b:e:r:R:i:B:h" flag; do
  case "$flag" in
    N) nodes=$OPTARG ;; n) ranks=$OPTARG ;; b) min=$OPTARG ;; e) max=$OPTARG ;;
    r) runs=$OPTARG ;; R) sweeps=$OPTARG ;; i) iters=$OPTARG ;; B) bindir=$OPTARG ;;
    h) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "dtrain: compare_allreduce.sh: unknown option; see -h" >&2; exit 2 ;;
  esac
done
bench="$bindir/dtrain-bench"
baseline="$bindir/dtrain-mpi-allreduce-baseline"
for tool in "$bench" "$baseline"; do
  [[ -x $tool ]] || { echo "dtrain: compare_allreduce.sh: $tool not found; pass -B <dir with the tools>" >&2; exit 2; }
done

if [[ -n ${LAUNCH:-} ]]; then
  read -r -a launch <<<"$LAUNCH"
elif [[ -n ${SLURM_JOB_ID:-} || ${SRUN_ALLOC:-0} == 1 ]]; then
  launch=(srun --mpi=pmix -N"$nodes" -n"$ranks")
  export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
else
  launch=(mpirun --allow-run-as-root --oversubscribe -np "$ranks" --mca btl self,vader,tcp
          --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
fi
echo "# launcher: ${launch[*]}"
# Where ranks outnumber cores, spinning MPI calls starve each other; both programs get the same.
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}

# Not under /tmp: every Slurm node of the local cluster has a private /tmp.
work=$(mktemp -d "${DTRAIN_COMPARE_DIR:-$PWD}/dtrain-compare.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Three programs per sweep: dtrain-bench as shipped, dtrain-bench with glibc's default heap
# policy (--keep-freed-memory 0, the baseline's), and the baseline. The order rotates from one
# sweep to the next so that no program always runs first.
launch_sweep() {
  local program=$1 sweep=$2 tool=$bench
  local args=(--op all_reduce -c 1)
  case "$program" in
    released) args+=(--keep-freed-memory 0) ;;
    baseline) tool=$baseline args=() ;;
  esac
  "${launch[@]}" "$tool" "${args[@]}" -b "$min" -e "$max" -f 2 -n "$iters" -w 5 \
    --json "$work/$program-$sweep.json" >"$work/$program-$sweep.out"
}
# One retry: on a Slurm 22.05 cluster without PMIxCollFence=ring (slurm/site/mpi.conf.pmix-fence)
# Open MPI now and then crashes in MPI_Init, which says nothing about either program's bandwidth.
retry_once() {
  local what=$1
  shift
  "$@" && return 0
  echo "dtrain: compare_allreduce.sh: $what failed; running it again" >&2
  "$@"
}
programs=(dtrain released baseline)
for ((s = 0; s < sweeps; s++)); do
  for ((p = 0; p < 3; p++)); do
    program=${programs[(s + p) % 3]}
    retry_once "the $program run of sweep $s" launch_sweep "$program" "$s"
  done
done

for ((i = 0; i < runs; i++)); do
  retry_once "bootstrap run $i of dtrain-bench" \
    "${launch[@]}" "$bench" --bootstrap-only --json "$work/boot-dtrain-$i.json" >/dev/null
  retry_once "bootstrap run $i of the baseline" \
    "${launch[@]}" "$baseline" --bootstrap-only --json "$work/boot-mpi-$i.json" >/dev/null
done

python3 - "$work" "$runs" "$sweeps" <<'PY'
import json, statistics, sys
work, runs, sweeps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def rows(name, s):
    report = json.load(open(f"{work}/{name}-{s}.json"))
    return report["collectives"][0]["rows"] if "collectives" in report else report["rows"]
runs_of = {name: [{r["size"]: r["out_of_place"]["busbw"] for r in rows(name, s)} for s in range(sweeps)]
           for name in ("dtrain", "released", "baseline")}
median = {name: {size: statistics.median(run[size] for run in sweeps_)
                 for size in sweeps_[0]} for name, sweeps_ in runs_of.items()}
ranks = json.load(open(f"{work}/dtrain-0.json"))["ranks"]
print(f"# all_reduce float sum, out-of-place, {ranks} ranks; busbw in GB/s, median of {sweeps} sweeps")
print("# dtrain: dtrain-bench as shipped; released: with --keep-freed-memory 0 (glibc's default")
print("# heap policy, as the baseline has); ratio: over the baseline; paired: dtrain / baseline")
print("# within each sweep, lowest .. highest")
print(f"{'size (B)':>12} | {'dtrain':>8} | {'released':>8} | {'baseline':>8} | {'ratio':>6} | "
      f"{'released':>8} | {'paired':>13}")
ratios, released_ratios = [], []
def over_baseline(name, size):
    base = median["baseline"][size]
    return median[name][size] / base if base > 0 else float("nan")
for size in sorted(set(median["dtrain"]) & set(median["baseline"]) & set(median["released"])):
    ratio, released = over_baseline("dtrain", size), over_baseline("released", size)
    paired = [o[size] / t[size] for o, t in zip(runs_of["dtrain"], runs_of["baseline"]) if t[size] > 0]
    spread = f"{min(paired):.3f}..{max(paired):.3f}" if paired else "n/a"
    if size >= 1 << 20:
        ratios.append(ratio)
        released_ratios.append(released)
    print(f"{size:>12} | {median['dtrain'][size]:>8.3f} | {median['released'][size]:>8.3f} | "
          f"{median['baseline'][size]:>8.3f} | {ratio:>6.3f} | {released:>8.3f} | {spread:>13}")
if ratios:
    print(f"# ratio from 1 MB up: median {statistics.median(ratios):.3f}, lowest {min(ratios):.3f} over {len(ratios)} sizes")
    print(f"# released ratio from 1 MB up: median {statistics.median(released_ratios):.3f}, "
          f"lowest {min(released_ratios):.3f} over {len(released_ratios)} sizes")
boot = [json.load(open(f"{work}/boot-dtrain-{i}.json"))["bootstrap"]["total_s"] for i in range(runs)]
bare = [json.load(open(f"{work}/boot-mpi-{i}.json"))["bootstrap"]["total_s"] for i in range(runs)]
if runs:
    print(f"# bootstrap time, median of {runs} launches (max over ranks): dtrain "
          f"{statistics.median(boot)*1e3:.1f} ms, bare MPI_Init+MPI_Bcast {statistics.median(bare)*1e3:.1f} ms")
PY
