#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The slurm25 fixture: builds Slurm 25.11 (cached outside the clone), builds dtrain's plugin against
# it, and starts a second local cluster on it. Exits 77 with "skipped: <reason>" when this machine
# cannot build Slurm 25.11 at all (no source tarball, missing build packages), and records the
# reason in STATE_DIR/skipped so that every slurm25 test reports the same skip.
set -euo pipefail

usage() {
  cat <<EOF
Usage: $(basename "$0") SOURCE_DIR BINARY_DIR STATE_DIR PREFIX [CMAKE_OPTION...]

  SOURCE_DIR   dtrain's source tree
  BINARY_DIR   where the plugin is built against Slurm 25.11 (BINARY_DIR/plugin)
  STATE_DIR    state directory of the 25.11 cluster (not under /tmp)
  PREFIX       where Slurm 25.11 is built and cached (tests/slurm25/build_slurm.sh --prefix)
  CMAKE_OPTION passed to the plugin's cmake configure (compilers, build type)
EOF
}

die() {
  echo "dtrain: $*" >&2
  exit 1
}

if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  usage
  exit 0
fi
(($# >= 4)) || {
  usage >&2
  exit 2
}
source_dir="$1"
binary_dir="$2"
state_dir="$3"
prefix="$4"
shift 4
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
readonly script_dir

mkdir -p "$state_dir"
rm -f "$state_dir/skipped"
skip() {
  echo "$*" >"$state_dir/skipped"
  echo "dtrain: skipped: $*"
  exit 77
}

tarball="${DTRAIN_SLURM25_TARBALL:-$source_dir/../shared/third_party/slurm-25.11.7.tar.gz}"
[[ -f "$tarball" ]] ||
  skip "Slurm 25.11 source $tarball not found (set DTRAIN_SLURM25_TARBALL to its path)"
if ! "$script_dir/build_slurm.sh" --prefix "$prefix" --tarball "$tarball" --check >/dev/null 2>&1; then
  missing=()
  for header in munge.h hwloc.h json-c/json.h yaml.h http_parser.h pmix2/include/pmix.h; do
    case "$header" in
      pmix2/*) [[ -f "/usr/lib/x86_64-linux-gnu/$header" ]] || missing+=(libpmix-dev) ;;
      *) [[ -f "/usr/include/$header" ]] || missing+=("$header") ;;
    esac
  done
  ((${#missing[@]} == 0)) ||
    skip "building Slurm 25.11 needs ${missing[*]}: apt-get install libmunge-dev libhwloc-dev libjson-c-dev libyaml-dev libhttp-parser-dev libpmix-dev"
  echo "dtrain: no Slurm 25.11 build in $prefix yet: building it once for this machine (8 to 14 minutes on 2 cores)"
fi
# nice: the build must not slow down whatever else the machine runs (other test suites).
prefix=$(nice -n 10 "$script_dir/build_slurm.sh" --prefix "$prefix" --tarball "$tarball" | tail -n 1)

# The plugin for a 25.11 node is built against 25.11's headers: Slurm refuses a SPANK plugin whose
# plugin_version names another major.minor release (see slurm25_checks.sh rejects-old-plugin).
plugin_build="$binary_dir/plugin"
cmake -S "$source_dir" -B "$plugin_build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DDTRAIN_BUILD_TESTS=OFF -DDTRAIN_BUILD_BENCHMARKS=OFF -DDTRAIN_WITH_NCCL=OFF \
  -DDTRAIN_SANITIZE=OFF "$@" >"$binary_dir/plugin-configure.log" 2>&1 || {
  tail -n 30 "$binary_dir/plugin-configure.log" >&2
  die "configuring the plugin against $prefix failed; see $binary_dir/plugin-configure.log"
}
found_include=$(sed -n 's/^SLURM_INCLUDE_DIR:PATH=//p' "$plugin_build/CMakeCache.txt")
[[ "$found_include" == "$prefix/include" ]] ||
  die "the plugin build found Slurm's headers in '$found_include', not in $prefix/include; remove $plugin_build and rerun"
nice -n 10 cmake --build "$plugin_build" --target spank_dtrain -j"$(nproc)" >"$binary_dir/plugin-build.log" 2>&1 || {
  tail -n 30 "$binary_dir/plugin-build.log" >&2
  die "building the plugin against $prefix failed; see $binary_dir/plugin-build.log"
}
plugin="$plugin_build/spank/spank_dtrain.so"
[[ -f "$plugin" ]] || die "the plugin build made no $plugin"
echo "dtrain: plugin for Slurm 25.11 built: $plugin"

# As tests/cluster's cluster_up: the plugin is in plugstack.conf from the start.
echo "required $plugin" >"$state_dir/plugstack.conf"
exec "$source_dir/slurm/local/cluster.sh" up --state-dir "$state_dir" --slurm "$prefix"
