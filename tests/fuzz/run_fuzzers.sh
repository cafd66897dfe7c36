#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Longer fuzzing runs than CTest's (label fuzz, DTRAIN_FUZZ_SECONDS each): runs every fuzz
# target, or the ones named, for SECONDS each over the committed seeds plus the corpus the
# earlier runs grew in the build tree, then prints each target's executions and crashes from
# libFuzzer's final stats. Exits 1 when any target crashed, leaked or hung.
#
#   CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DDTRAIN_FUZZ=ON -DDTRAIN_WITH_NCCL=OFF
#   ninja -C build-fuzz dtrain_fuzzers
#   tests/fuzz/run_fuzzers.sh 600                      # 10 minutes per target
#   JOBS=2 tests/fuzz/run_fuzzers.sh 3600 build-fuzz fuzz_topology fuzz_layout
#
# fuzz_topology_nolibxml is fuzz_topology with hwloc's own XML reader (HWLOC_LIBXML_IMPORT=0)
# instead of libxml2. Logs: BUILD/tests/fuzz/logs/TARGET.log; a crashing input is saved as
# BUILD/tests/fuzz/artifacts/TARGET/crash-* (or leak-*, timeout-*, oom-*); replay it with
# BUILD/tests/fuzz/TARGET FILE.
set -u

all_targets="fuzz_layout fuzz_plugstack_args fuzz_option fuzz_topology fuzz_topology_nolibxml fuzz_checkpoint"

case "${1:-}" in
  -h | --help)
    sed -n '3,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
seconds=${1:-}
case "$seconds" in
  '' | *[!0-9]*)
    echo "dtrain: usage: run_fuzzers.sh SECONDS [BUILD_DIR] [TARGET...] (SECONDS a whole number)" >&2
    exit 2
    ;;
esac
shift
source_dir=$(cd "$(dirname "$0")" && pwd)
build_dir=${1:-$source_dir/../../build-fuzz}
[ "$#" -gt 0 ] && shift
targets=${*:-$all_targets}
jobs=${JOBS:-1}
fuzz_bin=$build_dir/tests/fuzz
if [ ! -d "$fuzz_bin" ]; then
  echo "dtrain: no fuzz build in '$build_dir'; configure it with -DDTRAIN_FUZZ=ON (see --help)" >&2
  exit 2
fi
logs=$fuzz_bin/logs
mkdir -p "$logs"

# TARGET -> binary and extra environment
binary_of() {
  case "$1" in
    fuzz_topology_nolibxml) echo fuzz_topology ;;
    *) echo "$1" ;;
  esac
}

run_one() {
  target=$1
  binary=$(binary_of "$target")
  if [ ! -x "$fuzz_bin/$binary" ]; then
    echo "dtrain: $fuzz_bin/$binary is not built; run ninja -C $build_dir $binary" >"$logs/$target.log"
    return
  fi
  corpus=$fuzz_bin/corpus/$target
  artifacts=$fuzz_bin/artifacts/$target
  mkdir -p "$corpus" "$artifacts"
  set -- -max_total_time="$seconds" -timeout=120 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/"
  [ -f "$source_dir/dict/$binary.dict" ] && set -- "$@" -dict="$source_dir/dict/$binary.dict"
  xml_import=
  [ "$target" = fuzz_topology_nolibxml ] && xml_import=0
  ls "$artifacts" >"$logs/$target.artifacts.before"
  # The last line of the log records libFuzzer's exit status for the summary.
  env UBSAN_OPTIONS=print_stacktrace=1 ${xml_import:+HWLOC_LIBXML_IMPORT=$xml_import} \
    "$fuzz_bin/$binary" "$@" "$corpus" "$source_dir/corpus/$binary" >"$logs/$target.log" 2>&1
  echo "dtrain-run-status $?" >>"$logs/$target.log"
}

running=0
for target in $targets; do
  run_one "$target" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait
    running=0
  fi
done
wait

final_stat() { sed -n "s/^stat::$2: *//p" "$logs/$1.log" | tail -n 1; }

failed=0
total=0
printf '%-24s %8s %12s %8s %6s %8s  %s\n' target seconds executions exec/s new crashes result
for target in $targets; do
  execs=$(final_stat "$target" number_of_executed_units)
  rate=$(final_stat "$target" average_exec_per_sec)
  new=$(final_stat "$target" new_units_added)
  status=$(sed -n 's/^dtrain-run-status //p' "$logs/$target.log")
  artifacts=$fuzz_bin/artifacts/$target
  crashes=0
  if [ -d "$artifacts" ]; then
    crashes=$(ls "$artifacts" | grep -Fvx -f "$logs/$target.artifacts.before" | grep -c .)
  fi
  result=ok
  if [ -z "$status" ] || [ -z "$execs" ]; then
    result="did not run: see $logs/$target.log"
    failed=1
  elif [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    result="FAILED (exit $status): see $logs/$target.log"
    failed=1
  fi
  total=$((total + ${execs:-0}))
  printf '%-24s %8s %12s %8s %6s %8s  %s\n' "$target" "$seconds" "${execs:--}" "${rate:--}" \
    "${new:--}" "$crashes" "$result"
done
printf '%-24s %8s %12s\n' total "" "$total"
exit "$failed"
