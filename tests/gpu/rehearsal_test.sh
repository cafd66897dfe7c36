#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_device_check_rehearsal: device_check.sh on a machine without a GPU, reusing the ctest
# build tree's GPU targets. It must pass the toolchain and build stages, find no device, skip
# every stage that needs one with that reason, write its results and exit 3; bad usage exits 2
# and a missing carry fails the toolchain stage. Then the standalone tree the device builds must
# still configure from dtrain's CMake lists (--configure-only, nothing built). Exits 77 (skipped) where a GPU is visible or
# the tree was built without NCCL: there is nothing to rehearse.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help || $# -ne 3 ]]; then
  echo "usage: rehearsal_test.sh DEVICE_CHECK_SH BUILD_TREE WORK_DIR"
  [[ $# -eq 3 ]] || exit 2
  exit 0
fi
check=$1 tree=$2 work=$3
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIP: a GPU is visible here; run tests/gpu/device_check.sh run itself"
  exit 77
fi
if [[ ! -d $tree/tests/gpu/CMakeFiles/dtrain-nccl-allreduce-loop.dir ]]; then
  echo "SKIP: $tree was configured without NCCL, so it has no GPU targets to rehearse with"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
problems=0
fail() {
  echo "dtrain: rehearsal: $*" >&2
  problems=$((problems + 1))
}
expect_line() {
  local log=$1 pattern=$2
  grep -Eq "$pattern" "$log" || fail "no line matching /$pattern/ in $log"
}

status=0
env -u OUT "$check" run --reuse-build "$tree" --out "$work/out" --jobs 2 >"$work/run.log" 2>&1 || status=$?
cat "$work/run.log"
[[ $status -eq 3 ]] || fail "device_check.sh run exited $status, expected 3 (no device)"
expect_line "$work/run.log" '^dtrain: device-check: toolchain: PASS \(.*nvcc .*NCCL [0-9]'
expect_line "$work/run.log" '^dtrain: device-check: build: PASS \('
expect_line "$work/run.log" '^dtrain: device-check: device: SKIPPED \(no device: '
for stage in ctest-gpu bench trainer-cuda baseline; do
  expect_line "$work/run.log" "^dtrain: device-check: $stage: SKIPPED \\(no device\\)\$"
done
expect_line "$work/run.log" '^dtrain: device-check: summary: 2 PASS, 0 FAIL, 5 SKIPPED .*exit 3'
python3 - "$work/out/device_check.json" <<'PY' || fail "device_check.json does not record the rehearsal"
import json, sys
result = json.load(open(sys.argv[1]))
states = [(s["stage"], s["state"]) for s in result["stages"]]
assert result["exit_status"] == 3, result["exit_status"]
assert states == [("toolchain", "PASS"), ("build", "PASS"), ("device", "SKIPPED"),
                  ("ctest-gpu", "SKIPPED"), ("bench", "SKIPPED"), ("trainer-cuda", "SKIPPED"),
                  ("baseline", "SKIPPED")], states
PY
[[ $(wc -l <"$work/out/device_check.txt") -eq 7 ]] || fail "device_check.txt should hold 7 stage lines"

status=0
"$check" run --reuse-build "$tree" --out "$work/out" --budget 5 >"$work/usage.log" 2>&1 || status=$?
[[ $status -eq 2 ]] || fail "--budget 5 exited $status, expected 2"
expect_line "$work/usage.log" '^dtrain: device-check: run: --budget 5: '

status=0
env -u OUT "$check" run --carry "$work/no-carry" --build-dir "$work/no-build" --out "$work/out2" \
  >"$work/no-carry.log" 2>&1 || status=$?
[[ $status -eq 1 ]] || fail "a missing carry exited $status, expected 1"
expect_line "$work/no-carry.log" '^dtrain: device-check: toolchain: FAIL \(.*no-carry/include/CLI/CLI.hpp missing \(run tests/gpu/device_check.sh prepare'
expect_line "$work/no-carry.log" '^dtrain: device-check: build: SKIPPED '
[[ ! -e $work/no-build ]] || fail "the build stage ran although the toolchain stage failed"

# The device's own route, up to its configure: the standalone tree from dtrain's CMake lists and
# the carried headers (Debian's MPI standing in for the carried wheel, which needs PyPI).
mpi_library=$(sed -n 's/^MPI_mpi_LIBRARY:FILEPATH=//p' "$tree/CMakeCache.txt")
mpi_home=$(dirname "$(dirname "$mpi_library")")
"$check" prepare --carry "$work/carry" --no-mpi >"$work/prepare.log" 2>&1 || fail "prepare --no-mpi failed: $(cat "$work/prepare.log")"
status=0
env -u OUT "$check" run --carry "$work/carry" --mpi-home "$mpi_home" --build-dir "$work/standalone" \
  --out "$work/out3" --configure-only >"$work/configure.log" 2>&1 || status=$?
cat "$work/configure.log"
[[ $status -eq 0 ]] || fail "--configure-only exited $status, expected 0; see $work/out3/build.log"
expect_line "$work/configure.log" '^dtrain: device-check: build: PASS \(tests/gpu/standalone configured in '
expect_line "$work/configure.log" '^dtrain: device-check: device: SKIPPED \(--configure-only\)$'
[[ -f $work/standalone/CMakeCache.txt && ! -e $work/standalone/bench/dtrain-bench ]] ||
  fail "--configure-only should configure $work/standalone and build nothing"
# ctest -L gpu on the device must run the same tests as here: a gpu test added to a folder the
# standalone tree does not add would otherwise go unrun there.
gpu_tests() { ctest --test-dir "$1" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: //p' | sort; }
main_gpu_tests=$(gpu_tests "$tree")
standalone_gpu_tests=$(gpu_tests "$work/standalone")
[[ -n $main_gpu_tests && $main_gpu_tests == "$standalone_gpu_tests" ]] ||
  fail "the gpu tests differ: this tree has [${main_gpu_tests//$'\n'/ }], the standalone tree [${standalone_gpu_tests//$'\n'/ }]; add their folders to tests/gpu/standalone/CMakeLists.txt"

if ((problems > 0)); then
  echo "dtrain: rehearsal: $problems problem(s)" >&2
  exit 1
fi
echo "dtrain: rehearsal: the device check builds, stops at the device stage and reports it"
