#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The bootstrap's phases against bare MPI_Init + MPI_Bcast at several rank counts on the local
# cluster (not a test: it measures and prints). See --help.
set -euo pipefail

usage() {
  cat <<EOF
Usage: $(basename "$0") [-B BUILD_DIR] [--runs N] [--ranks "2 4 8 16 32"] [--retries N]

For each rank count n, launches with srun --mpi=pmix --distributed-train on min(n, 4) nodes,
alternately, N times:
  dtrain-bench --bootstrap-only (dtrain's bootstrap), and
  dtrain-mpi-allreduce-baseline --bootstrap-only (bare MPI_Init_thread + MPI_Bcast).
Both get the plugin's variables and CPU binding, so that only the programs differ.
Prints each phase's median (each launch reports the slowest rank of each phase), the two
totals, their ratio, the median of the paired ratios (launch i of one program against launch
i of the other) and dtrain's time after MPI_Init. More tasks than the cluster's CPUs are
launched with --overcommit. Source the cluster's env.sh first (slurm/local/cluster.sh up prints its path).
128 ranks put 32 tasks on a node, more than the plugin's derived ports allow by default
(port_block=32): start the cluster with port_block=64 in its plugstack.conf, or with reserved
ports.

Options:
  -B BUILD_DIR  the build tree holding src/bench (default: <repo>/build)
  --runs N      launches of each program per rank count (default: 9)
  --ranks LIST  rank counts, space separated (default: "2 4 8 16 32")
  --retries N   launches of a program that fail (in MPI_Init, at Slurm's or PMIx's level, as
                64 or 128 tasks on 2 cores do at times) are tried again up to N times, saying
                so (default: 1)
  -h, --help    print this help
EOF
}

fail() {
  echo "dtrain: $*" >&2
  exit 1
}

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
build="$repo_root/build"
runs=9
retries=1
ranks_list="2 4 8 16 32"
while (($#)); do
  case "$1" in
    -B | --runs | --ranks | --retries)
      (($# >= 2)) || fail "option $1 needs a value; see --help"
      case "$1" in
        -B) build="$2" ;;
        --runs) runs="$2" ;;
        --ranks) ranks_list="$2" ;;
        --retries) retries="$2" ;;
      esac
      shift
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *) fail "unknown argument '$1'; see --help" ;;
  esac
  shift
done
[[ "$runs" =~ ^[1-9][0-9]?$ ]] || fail "--runs '$runs' is not a number in 1-99"
[[ "$retries" =~ ^[0-9]$ ]] || fail "--retries '$retries' is not a number in 0-9"
read -r -a rank_counts <<<"$ranks_list"
((${#rank_counts[@]} > 0)) || fail "--ranks is empty"
for n in "${rank_counts[@]}"; do
  [[ "$n" =~ ^[1-9][0-9]{0,3}$ ]] || fail "--ranks: '$n' is not a rank count in 1-9999"
done
bench="$build/src/bench/dtrain-bench"
baseline="$build/src/bench/dtrain-mpi-allreduce-baseline"
for tool in "$bench" "$baseline"; do
  [[ -x "$tool" ]] || fail "$tool is not built; build the tree (cmake --build $build) or pass -B"
done
: "${DTRAIN_CLUSTER_DIR:?dtrain: DTRAIN_CLUSTER_DIR is unset; source the cluster env.sh first}"
export OMPI_MCA_mpi_yield_when_idle=1

# Every node has a private /tmp; the JSON files go where all of them and this shell can write.
work=$(mktemp -d -p "$DTRAIN_CLUSTER_DIR" growth.XXXXXX)
trap 'rm -rf -- "$work"' EXIT

launch() {  # launch RANKS OUT PROGRAM
  local n=$1 out=$2
  shift 2
  local nodes=$((n < 4 ? n : 4)) extra=()
  ((n <= 4 * 4)) || extra=(--overcommit)
  # Open MPI 4.1's TCP BTL was seen to fail in MPI_Init about once in 30 launches on this loaded
  # machine, and 64 or 128 tasks on its 2 cores at times time out in Slurm's or PMIx's own
  # messages: such a launch is tried again, saying so.
  local attempt
  for ((attempt = 0; attempt <= retries; attempt++)); do
    if srun --mpi=pmix --distributed-train --kill-on-bad-exit=1 "-N$nodes" "-n$n" "${extra[@]}" "$@" \
      --bootstrap-only --json "$out" >/dev/null 2>"$work/err"; then
      return 0
    fi
    echo "# a launch of $* on $n ranks failed; $( ((attempt < retries)) && echo "running it again" || echo "giving up"): $(grep -v 'some tasks get the same CPU' "$work/err" | tail -1)"
  done
  fail "$* on $n ranks failed $((retries + 1)) times: $(cat "$work/err")"
}

echo "# machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); OMPI_MCA_mpi_yield_when_idle=1"
for n in "${rank_counts[@]}"; do
  for ((i = 0; i < runs; i++)); do
    if ((i % 2 == 0)); then
      launch "$n" "$work/dtrain-$n-$i.json" "$bench"
      launch "$n" "$work/bare-$n-$i.json" "$baseline"
    else
      launch "$n" "$work/bare-$n-$i.json" "$baseline"
      launch "$n" "$work/dtrain-$n-$i.json" "$bench"
    fi
  done
done

python3 - "$work" "$runs" "${rank_counts[@]}" <<'EOF'
import json, statistics, sys
work, runs, counts = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
phases = ["mpi_init", "arrival", "placement", "verdict", "preflight", "communicator"]
print(f"\nmedians of {runs} launches, ms; each launch reports each phase's slowest rank")
print(f"{'ranks':>5} " + " ".join(f"{p:>12}" for p in phases)
      + f" {'dtrain':>8} {'bare':>8} {'ratio':>6} {'paired':>6}  {'after MPI_Init':>14}")
for n in counts:
    dtrain = [json.load(open(f"{work}/dtrain-{n}-{i}.json"))["bootstrap"] for i in range(runs)]
    bare = [json.load(open(f"{work}/bare-{n}-{i}.json"))["bootstrap"] for i in range(runs)]
    med = lambda docs, key: 1e3 * statistics.median(d[key] for d in docs)
    total, bare_total = med(dtrain, "total_s"), med(bare, "total_s")
    beyond = 1e3 * statistics.median(d["total_s"] - d["mpi_init_s"] for d in dtrain)
    # Launch i of each program ran next to the other's launch i: the median of their ratios.
    paired = statistics.median(d["total_s"] / b["total_s"] for d, b in zip(dtrain, bare))
    print(f"{n:>5} " + " ".join(f"{med(dtrain, p + '_s'):12.2f}" for p in phases)
          + f" {total:8.1f} {bare_total:8.1f} {total / bare_total:6.3f} {paired:6.3f}  {beyond:14.1f}")
EOF
