#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The containers fixture: builds enroot, pyxis and the test image (cached outside the clone, see
# build_runtimes.sh and build_image.sh), then starts the local cluster with enroot on slurmd's
# PATH (pyxis runs the enroot it finds there) and a plugstack.conf that includes
# STATE/plugstack.d/*.conf, where each check puts dtrain's and pyxis's drop-ins in its own order.
# slurmd starts with both loaded, dtrain.conf before pyxis.conf as the packages install them:
# pyxis prepares its runtime directory in slurmd.
# Where a runtime or the image cannot be built here, the reason goes to STATE/skip-reason, this
# exits 77, and every container test reports "skipped: <reason>".
set -euo pipefail

usage() {
  cat <<USAGE
usage: containers_up.sh SOURCE_DIR STATE_DIR PREFIX PLUGIN [ARG...]
  SOURCE_DIR  dtrain's source tree
  STATE_DIR   the cluster's state directory (outside /tmp)
  PREFIX      where the runtimes and the image are built and cached
  PLUGIN      spank_dtrain.so, with its plugstack.conf arguments
USAGE
}

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  usage
  exit 0
fi
[[ $# -ge 4 ]] || {
  usage >&2
  exit 2
}
readonly source_dir=$1 state_dir=$2 prefix=$3
shift 3
readonly here="$source_dir/tests/containers"

skip() {
  mkdir -p "$state_dir"
  printf '%s\n' "$1" >"$state_dir/skip-reason"
  echo "dtrain: skipped: $1" >&2
  exit 77
}

mkdir -p "$state_dir/plugstack.d"
rm -f "$state_dir/skip-reason"
log="$state_dir/containers-build.log"
if ! "$here/build_runtimes.sh" --prefix "$prefix" >"$log" 2>&1; then
  tail -n 20 "$log" >&2
  skip "enroot and pyxis could not be built: $(grep 'dtrain:' "$log" | tail -n 1)"
fi
if ! "$here/build_image.sh" --prefix "$prefix" >>"$log" 2>&1; then
  tail -n 20 "$log" >&2
  skip "the container image could not be built: $(grep 'dtrain:' "$log" | tail -n 1)"
fi
printf 'include %s/plugstack.d/*.conf\n' "$state_dir" >"$state_dir/plugstack.conf"
rm -f "$state_dir"/plugstack.d/*.conf
echo "required $*" >"$state_dir/plugstack.d/dtrain.conf"
echo "required $prefix/pyxis/spank_pyxis.so runtime_path=/tmp/pyxis" >"$state_dir/plugstack.d/pyxis.conf"
PATH="$prefix/enroot/bin:$PATH" exec "$source_dir/slurm/local/cluster.sh" up \
  --state-dir "$state_dir" --plugstack "$state_dir/plugstack.conf"
