#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Puts dtrain-bench's all_reduce busbw next to a plain MPI_Allreduce loop on the same ranks
# and sizes (one allocation, same timing method), and dtrain's bootstrap time next to bare
# MPI_Init + MPI_Bcast.
#
# Usage: compare_allreduce.sh [-N nodes] [-n ranks] [-b minbytes] [-e maxbytes] [-i iters]
#                             [-R sweeps] [-r bootstrap-runs] [-p programs] [-t target]
#                             [-k dir] [-B bindir]
# -p takes a comma-separated list (default dtrain,released,baseline):
#   dtrain    dtrain-bench as shipped;
#   released  dtrain-bench --keep-freed-memory 0 (the baseline's heap policy), so that its
#             ratio shows dtrain's own overhead alone;
#   baseline  the plain MPI_Allreduce loop (always run: every ratio is over it);
#   control   the baseline again, as a separate launch: its ratio over the baseline is the
#             run's noise floor, the spread a ratio of 1.0 shows on this machine.
# The sweeps repeat R times (default 3) in every order of the programs, and each size takes the
# median busbw of its R runs, so that load from other processes hits all programs alike.
# Within each sweep dtrain's busbw is divided by the baseline's; from 6 sweeps up each size also
# gets the distribution-free 95 % interval of that paired ratio's median, and every size from
# 1 MB up is called met, missed or undecided against the target ratio -t (default 0.95): met
# when the whole interval lies at or above it. The control's interval shows what the noise lets
# a ratio of exactly 1.0 look like. -k keeps every run's output and JSON in dir.
# Under Slurm (SLURM_JOB_ID set, or SRUN_ALLOC=1 to let srun allocate) it launches with
#   srun --mpi=pmix -N<nodes> -n<ranks>
# elsewhere with mpirun on loopback. LAUNCH="..." overrides the launcher entirely.
set -euo pipefail

nodes=4 ranks=8 min=8 max=64M runs=5 iters=20 sweeps=3 program_list=dtrain,released,baseline
target=0.95
keep=""
bindir="$(cd "$(dirname "$0")" && pwd)"
usage_end=$(grep -n '^set -euo pipefail' "$0" | cut -d: -f1)
while getopts "N:n:b:e:r:R:i:p:t:k:B:h" flag; do
  case "$flag" in
    N) nodes=$OPTARG ;; n) ranks=$OPTARG ;; b) min=$OPTARG ;; e) max=$OPTARG ;;
    r) runs=$OPTARG ;; R) sweeps=$OPTARG ;; i) iters=$OPTARG ;; p) program_list=$OPTARG ;;
    t) target=$OPTARG ;; k) keep=$OPTARG ;; B) bindir=$OPTARG ;;
    h) sed -n "3,$((usage_end - 1))p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "dtrain: compare_allreduce.sh: unknown option; see -h" >&2; exit 2 ;;
  esac
done
for number in "$nodes" "$ranks" "$iters" "$sweeps" "$runs"; do
  [[ $number =~ ^[0-9]+$ ]] || { echo "dtrain: compare_allreduce.sh: '$number' is not a whole number (-N -n -i -R -r)" >&2; exit 2; }
done
((sweeps >= 1)) || { echo "dtrain: compare_allreduce.sh: -R must be 1 or more" >&2; exit 2; }
[[ $target =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "dtrain: compare_allreduce.sh: -t '$target' is not a ratio such as 0.95" >&2; exit 2; }
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
# Sweep s rotates the list by s/2 and runs odd sweeps backwards, so that every program runs
# first, last and after each other program equally often: one run can leave the machine slower
# for the next (memory to give back, sockets in TIME_WAIT), which must not favour any program.
count=${#programs[@]}
for ((s = 0; s < sweeps; s++)); do
  for ((p = 0; p < count; p++)); do
    position=$(( s % 2 == 0 ? p : count - 1 - p ))
    program=${programs[(s / 2 + position) % count]}
    retry_once "the $program run of sweep $s" launch_sweep "$program" "$s"
  done
done

for ((i = 0; i < runs; i++)); do
  retry_once "bootstrap run $i of dtrain-bench" \
    "${launch[@]}" "$bench" --bootstrap-only --json "$work/boot-dtrain-$i.json" >/dev/null
  retry_once "bootstrap run $i of the baseline" \
    "${launch[@]}" "$baseline" --bootstrap-only --json "$work/boot-mpi-$i.json" >/dev/null
done

python3 - "$work" "$runs" "$sweeps" "$target" "${programs[@]}" <<'PY'
import json, math, statistics, sys
work, runs, sweeps, target = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
programs = sys.argv[5:]

def rows(name, s):
    report = json.load(open(f"{work}/{name}-{s}.json"))
    return report["collectives"][0]["rows"] if "collectives" in report else report["rows"]

def median_interval(values, confidence=0.95):
    """Distribution-free interval for the median: the j-th smallest and j-th largest value, with
    j the largest index whose binomial coverage is at least `confidence`. None below 6 values,
    where even [min, max] covers less than 95 %."""
    xs, n = sorted(values), len(values)
    best = None
    for j in range(1, n // 2 + 1):
        outside = sum(math.comb(n, i) for i in range(j)) / 2 ** n
        if 1 - 2 * outside >= confidence:
            best = j
    return None if best is None else (xs[best - 1], xs[n - best])

runs_of = {name: [{r["size"]: r["out_of_place"]["busbw"] for r in rows(name, s)} for s in range(sweeps)]
           for name in programs}
median = {name: {size: statistics.median(run[size] for run in sweeps_)
                 for size in sweeps_[0]} for name, sweeps_ in runs_of.items()}
others = [name for name in ("dtrain", "released", "control") if name in programs]
ranks = json.load(open(f"{work}/baseline-0.json"))["ranks"]
print(f"# all_reduce float sum, out-of-place, {ranks} ranks; busbw in GB/s, median of {sweeps} sweeps")
print("# dtrain: dtrain-bench as shipped; released: with --keep-freed-memory 0 (glibc's default")
print("# heap policy, as the baseline has); control: the baseline launched again.")
print("# x/base: median busbw over the baseline's. paired: x / baseline within each sweep, its median")
print("# and the distribution-free 95 % interval of that median (6 sweeps or more)")
sizes = sorted(set.intersection(*(set(median[name]) for name in programs)))
paired_names = [name for name in ("dtrain", "control") if name in programs]
header = f"{'size (B)':>12}" + "".join(f" | {name:>8}" for name in others + ["baseline"])
header += "".join(f" | {name[:4] + '/base':>9}" for name in others)
header += "".join(f" | {name[:4] + ' paired':>23}" for name in paired_names)
print(header)

def paired(name, size):
    return [o[size] / b[size] for o, b in zip(runs_of[name], runs_of["baseline"]) if b[size] > 0]

ratios = {name: [] for name in others}
paired_medians = []
verdicts = {"met": [], "missed": [], "undecided": []}
for size in sizes:
    line = f"{size:>12}" + "".join(f" | {median[name][size]:>8.3f}" for name in others + ["baseline"])
    for name in others:
        base = median["baseline"][size]
        ratio = median[name][size] / base if base > 0 else float("nan")
        line += f" | {ratio:>9.3f}"
        if size >= 1 << 20:
            ratios[name].append(ratio)
    for name in paired_names:
        values = paired(name, size)
        if not values:
            line += f" | {'n/a':>23}"
            continue
        mid, interval = statistics.median(values), median_interval(values)
        cell = f"{mid:.3f} " + (f"[{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "(too few sweeps)")
        line += f" | {cell:>23}"
        if name == "dtrain" and size >= 1 << 20:
            paired_medians.append(mid)
            if interval:
                verdict = "met" if interval[0] >= target else "missed" if interval[1] < target else "undecided"
                verdicts[verdict].append(size)
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
if any(verdicts.values()):
    def sizes_text(found):
        return ", ".join(f"{size >> 20} MB" for size in found) or "none"
    print(f"# target {target:g} from 1 MB up, by the paired 95 % interval: met (interval above) at "
          f"{sizes_text(verdicts['met'])}; undecided (interval spans it) at "
          f"{sizes_text(verdicts['undecided'])}; missed (interval below) at {sizes_text(verdicts['missed'])}")
boot = [json.load(open(f"{work}/boot-dtrain-{i}.json"))["bootstrap"]["total_s"] for i in range(runs)]
bare = [json.load(open(f"{work}/boot-mpi-{i}.json"))["bootstrap"]["total_s"] for i in range(runs)]
if runs:
    print(f"# bootstrap time, median of {runs} launches (max over ranks): dtrain "
          f"{statistics.median(boot)*1e3:.1f} ms, bare MPI_Init+MPI_Bcast {statistics.median(bare)*1e3:.1f} ms")
PY
