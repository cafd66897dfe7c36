#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's two set-up commands for a fresh Debian 12 machine (run as root):
#   slurm/local/quickstart.sh demo   install, build, start the local 4-node cluster, run the demo
#   slurm/local/quickstart.sh test   install, build (normal and ASan+UBSan), run every test
# Both are safe to rerun and share the Release tree build/ (the test command adds build-asan/ and
# build-fuzz/), so running one after the other builds dtrain once. The test command turns
# compiler warnings into errors (DTRAIN_WERROR); the demo leaves that to the tree's cache.
set -euo pipefail

readonly repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
readonly build="${DTRAIN_BUILD_DIR:-$repo/build}"
readonly build_asan="${DTRAIN_ASAN_BUILD_DIR:-$repo/build-asan}"
readonly build_fuzz="${DTRAIN_FUZZ_BUILD_DIR:-$repo/build-fuzz}"
readonly jobs="${DTRAIN_JOBS:-$(nproc)}"
readonly fuzz_seconds="${DTRAIN_FUZZ_SECONDS:-15}"  # tests/fuzz/run_fuzzers.sh runs longer

# One list, used by both commands and by CI.
readonly debian_packages=(
  build-essential cmake ninja-build pkg-config git
  slurmctld slurmd slurm-client libslurm-dev munge
  libpmix-dev libopenmpi-dev openmpi-bin
  libhwloc-dev hwloc
  nlohmann-json3-dev libcli11-dev libxxhash-dev libssl-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-venv python3-pip python3-torch
  libmunge-dev libjson-c-dev libyaml-dev libhttp-parser-dev
  iproute2 nftables procps util-linux bc
  man-db dpkg-dev file rpm librsvg2-bin
  clang libclang-rt-14-dev valgrind
)

usage() {
  sed -n '3,8p' "$0" | sed 's/^# \{0,1\}//'
}

note() { echo "dtrain: $*"; }

install_deps() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "dtrain: installing packages needs root; run as root or with sudo" >&2
    exit 2
  fi
  note "installing Debian packages (${#debian_packages[@]})"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${debian_packages[@]}" >/dev/null
}

configure_and_build() {
  local dir=$1
  shift
  note "building in $dir"
  cmake -S "$repo" -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
}

cluster_up() {
  # The plugin is in plugstack.conf before slurmd starts, so slurmd caches the topology.
  mkdir -p "$build/cluster"
  printf 'required %s\n' "$build/spank/spank_dtrain.so" >"$build/cluster/plugstack.conf"
  "$repo/slurm/local/cluster.sh" up --state-dir "$build/cluster"
}

# The one build type of build/, for both commands.
readonly build_type=Release

run_demo() {
  install_deps
  configure_and_build "$build" -DCMAKE_BUILD_TYPE="$build_type"
  cluster_up
  # shellcheck disable=SC1091
  source "$build/cluster/env.sh"
  exec "$repo/slurm/local/demo.sh" "$build"
}

run_tests() {
  install_deps
  configure_and_build "$build_asan" -DCMAKE_BUILD_TYPE=Debug -DDTRAIN_SANITIZE=ON \
    -DDTRAIN_WERROR=ON -DDTRAIN_BUILD_BENCHMARKS=OFF -DDTRAIN_WITH_NCCL=OFF
  note "unit tests under AddressSanitizer and UndefinedBehaviorSanitizer"
  LSAN_OPTIONS="suppressions=$repo/tests/lsan.supp:fast_unwind_on_malloc=0" \
    UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$build_asan" -L unit --output-on-failure -j "$jobs"
  note "fuzz targets (clang, libFuzzer): ${fuzz_seconds} s each over the committed seed corpora"
  CC=clang CXX=clang++ cmake -S "$repo" -B "$build_fuzz" -G Ninja -DDTRAIN_FUZZ=ON \
    -DDTRAIN_WERROR=ON -DDTRAIN_WITH_NCCL=OFF -DDTRAIN_BUILD_BENCHMARKS=OFF -DDTRAIN_FUZZ_SECONDS="$fuzz_seconds" >/dev/null
  cmake --build "$build_fuzz" -j "$jobs" --target dtrain_fuzzers
  ctest --test-dir "$build_fuzz" -L fuzz --output-on-failure -j "$jobs"
  configure_and_build "$build" -DCMAKE_BUILD_TYPE="$build_type" -DDTRAIN_WERROR=ON
  note "all tests: unit, cluster (the local Slurm cluster starts and stops itself), gpu"
  ctest --test-dir "$build" --output-on-failure
}

case "${1:-}" in
  demo) run_demo ;;
  test) run_tests ;;
  -h | --help) usage ;;
  *)
    usage >&2
    exit 2
    ;;
esac
