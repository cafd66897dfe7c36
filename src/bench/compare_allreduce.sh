#!/usr/bin/env bash
# Puts dtrain-bench's all_reduce busbw next to a plain MPI_Allreduce loop on the same ranks
# and sizes (one allocation, same timing method), and dtrain's bootstrap time next to bare
# MPI_Init + MPI_Bcast.
#
# Usage: compare_allreduce.sh [-N nodes] [-n ranks] [-b minbytes] [-e maxbytes] [-i iters]
#                             [-R sweeps] [-r bootstrap-runs] [-p programs] [-k dir] [-B bindir]
# -p takes a comma-separated list (default dtrain,released,baseline):
#   dtrain    dtrain-bench as shipped;
#   released  dtrain-bench --keep-freed-memory 0 (the baseline's heap policy), so that its
#             ratio shows dtrain's own overhead alone;
#   baseline  the plain MPI_Allreduce loop (always run: every ratio is over it);
#   control   the baseline again, as a separate launch: its ratio over the baseline is the
#             run's noise floor, the spread a ratio of 1.0 shows on this machine.
# The sweeps repeat R times (default 3), rotating the order, and each size takes the median
# busbw of its R runs, so that load from other processes hits all programs alike. -k keeps
# every run's output and JSON in dir.
# Under Slurm (SLURM_JOB_ID set, or SRUN_ALLOC=1 to let srun allocate) it launches with
#   srun --mpi=pmix -N<nodes> -n<ranks>
# elsewhere with mpirun on loopback. LAUNCH="..." overrides the launcher entirely.
set -euo pipefail

nodes=4 ranks=8 min=8 max=64M runs=5 iters=20 sweeps=3 program_list=dtrain,released,baseline
keep=""
bindir="$(cd "$(dirname "$0")" && pwd)"
usage_end=$(grep -n '^set -euo pipefail' "$0" | cut -d: -f1)
while getopts "N:n:b:e:r:R:i:p:k:B:h" flag; do
  case "$flag" in
    N) nodes=$OPTARG ;; n) ranks=$OPTARG ;; b) min=$OPTARG ;; e) max=$OPTARG ;;
    r) runs=$OPTARG ;; R) sweeps=$OPTARG ;; i) iters=$OPTARG ;; p) program_list=$OPTARG ;;
    k) keep=$OPTARG ;; B) bindir=$OPTARG ;;
    h) sed -n "2,$((usage_end - 1))p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "dtrain: compare_allreduce.sh: unknown option; see -h" >&2; exit 2 ;;
  esac
done
for number in "$nodes" "$ranks" "$iters" "$sweeps" "$runs"; do
  [[ $number =~ ^[0-9]+$ ]] || { echo "dtrain: compare_allreduce.sh: '$number' is not a whole number (-N -n -i -R -r)" >&2; exit 2; }
done
((sweeps >= 1)) || { echo "dtrain: compare_allreduce.sh: -R must be 1 or more" >&2; exit 2; }
IFS=, read -r -a programs <<<"$program_list"
has_baseline=0
for program in "${programs[@]}"; do
  case "$program" in
    dtrain | released | control) ;;
    baseline) has_baseline=1 ;;
    *) echo "dtrain: compare_allreduce.sh: -p '$program' is not a program; use dtrain, released, baseline or control" >&2; exit 2 ;;
  esac
done
((has_baseline)) || programs+=(baseline)
((${#programs[@]} >= 2)) || { echo "dtrain: compare_allreduce.sh: -p needs a program besides the baseline" >&2; exit 2; }

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
echo "# programs: ${programs[*]}"
# Where ranks outnumber cores, spinning MPI calls starve each other; both programs get the same.
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}

# Not under /tmp: every Slurm node of the local cluster has a private /tmp.
if [[ -n $keep ]]; then
  mkdir -p "$keep"
  work=$(cd "$keep" && pwd)
else
  work=$(mktemp -d "${DTRAIN_COMPARE_DIR:-$PWD}/dtrain-compare.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi

launch_sweep() {
  local program=$1 sweep=$2 tool=$bench
  local args=(--op all_reduce -c 1)
  case "$program" in
    released) args+=(--keep-freed-memory 0) ;;
    baseline | control) tool=$baseline args=() ;;
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
count=${#programs[@]}
for ((s = 0; s < sweeps; s++)); do
  for ((p = 0; p < count; p++)); do
    program=${programs[(s + p) % count]}
    retry_once "the $program run of sweep $s" launch_sweep "$program" "$s"
  done
done

for ((i = 0; i < runs; i++)); do
  retry_once "bootstrap run $i of dtrain-bench" \
    "${launch[@]}" "$bench" --bootstrap-only --json "$work/boot-dtrain-$i.json" >/dev/null
  retry_once "bootstrap run $i of the baseline" \
    "${launch[@]}" "$baseline" --bootstrap-only --json "$work/boot-mpi-$i.json" >/dev/null
done

python3 - "$work" "$runs" "$sweeps" "${programs[@]}" <<'PY'
import json, statistics, sys
work, runs, sweeps, programs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def rows(name, s):
    report = json.load(open(f"{work}/{name}-{s}.json"))
    return report["collectives"][0]["rows"] if "collectives" in report else report["rows"]
runs_of = {name: [{r["size"]: r["out_of_place"]["busbw"] for r in rows(name, s)} for s in range(sweeps)]
           for name in programs}
median = {name: {size: statistics.median(run[size] for run in sweeps_)
                 for size in sweeps_[0]} for name, sweeps_ in runs_of.items()}
others = [name for name in ("dtrain", "released", "control") if name in programs]
ranks = json.load(open(f"{work}/baseline-0.json"))["ranks"]
print(f"# all_reduce float sum, out-of-place, {ranks} ranks; busbw in GB/s, median of {sweeps} sweeps")
print("# dtrain: dtrain-bench as shipped; released: with --keep-freed-memory 0 (glibc's default")
print("# heap policy, as the baseline has); control: the baseline launched again.")
print("# x/base: median busbw over the baseline's; paired: the median and range, over sweeps, of")
print("# dtrain / baseline within one sweep")
def over_baseline(name, size):
    base = median["baseline"][size]
    return median[name][size] / base if base > 0 else float("nan")
sizes = sorted(set.intersection(*(set(median[name]) for name in programs)))
header = f"{'size (B)':>12}" + "".join(f" | {name:>8}" for name in others + ["baseline"])
header += "".join(f" | {name[:4] + '/base':>9}" for name in others)
if "dtrain" in programs:
    header += f" | {'paired':>21}"
print(header)
ratios = {name: [] for name in others}
paired_medians = []
for size in sizes:
    line = f"{size:>12}" + "".join(f" | {median[name][size]:>8.3f}" for name in others + ["baseline"])
    for name in others:
        ratio = over_baseline(name, size)
        line += f" | {ratio:>9.3f}"
        if size >= 1 << 20:
            ratios[name].append(ratio)
    if "dtrain" in programs:
        paired = [o[size] / t[size] for o, t in zip(runs_of["dtrain"], runs_of["baseline"]) if t[size] > 0]
        if paired:
            mid = statistics.median(paired)
            if size >= 1 << 20:
                paired_medians.append(mid)
            line += f" | {mid:>5.3f} ({min(paired):.3f}..{max(paired):.3f})"
        else:
            line += f" | {'n/a':>21}"
    print(line)
labels = {"dtrain": "ratio", "released": "released ratio", "control": "control ratio (noise floor)"}
for name in others:
    values = ratios[name]
    if values:
        print(f"# {labels[name]} from 1 MB up: median {statistics.median(values):.3f}, "
              f"lowest {min(values):.3f}, highest {max(values):.3f} over {len(values)} sizes")
if paired_medians:
    print(f"# paired ratio from 1 MB up: median {statistics.median(paired_medians):.3f}, "
          f"lowest {min(paired_medians):.3f} over {len(paired_medians)} sizes")
boot = [json.load(open(f"{work}/boot-dtrain-{i}.json"))["bootstrap"]["total_s"] for i in range(runs)]
bare = [json.load(open(f"{work}/boot-mpi-{i}.json"))["bootstrap"]["total_s"] for i in range(runs)]
if runs:
    print(f"# bootstrap time, median of {runs} launches (max over ranks): dtrain "
          f"{statistics.median(boot)*1e3:.1f} ms, bare MPI_Init+MPI_Bcast {statistics.median(bare)*1e3:.1f} ms")
PY
