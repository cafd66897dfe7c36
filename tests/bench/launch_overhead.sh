#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Launch overhead of the plugin: `srun -N4 -n8 true` with and without --distributed-train,
# alternated so both see the same machine noise. Prints both medians and their ratio.
# Usage: launch_overhead.sh [ROUNDS] [srun options...]   (needs the cluster's env.sh sourced)
set -euo pipefail
rounds=${1:-15}
shift || true
layout=("${@:--N4}")
[[ $# -gt 0 ]] || layout=(-N4 -n8)

time_step() {
  local start end
  start=$(date +%s%N)
  srun "${layout[@]}" "$@" true
  end=$(date +%s%N)
  echo $(((end - start) / 1000))
}

median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

plain=()
dtrain=()
srun "${layout[@]}" true  # warm up the daemons and the page cache
for ((i = 0; i < rounds; i++)); do
  plain+=("$(time_step)")
  dtrain+=("$(time_step --distributed-train)")
done
p=$(printf '%s\n' "${plain[@]}" | median)
d=$(printf '%s\n' "${dtrain[@]}" | median)
echo "srun ${layout[*]} true, $rounds rounds each, alternated"
printf 'without --distributed-train: median %8.1f ms\n' "$(echo "$p / 1000" | bc -l)"
printf 'with    --distributed-train: median %8.1f ms\n' "$(echo "$d / 1000" | bc -l)"
printf 'ratio with/without: %.3f\n' "$(echo "$d / $p" | bc -l)"
