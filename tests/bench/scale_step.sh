#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The figures of docs/scale.md: one node's share of a 12,500-node × 8-task step (100,000
# ranks), planned by dtrain_scale_step through the plugin's own code, before and after
# ip_max_nodes, with names resolved from a hosts file read once and, where this runs as root
# and may unshare a mount namespace, by getaddrinfo over a 12,500-line /etc/hosts (bind-mounted
# in a private mount namespace: the machine's own /etc/hosts is never touched). Then the
# TF_CONFIG of that step, taken from its memory file's content, through tf_config_at_scale.py.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: tests/bench/scale_step.sh [-B BUILD_DIR] [-r REPEAT] [-t TOPOLOGY_XML] [-p PYTHON] [-q]
  -B  the build tree holding tests/bench/dtrain_scale_step (default: build)
  -r  timed runs per configuration, each in a fresh process; medians are printed (default 9)
  -t  hwloc XML the binding plan loads (default: tests/fixtures/topologies/dgx-h100.xml)
  -p  python for the TF_CONFIG check; one that imports tensorflow checks it with TensorFlow too
      (default: python3)
  -q  skip the slow run: getaddrinfo for all 12,500 names on one node (about a minute)
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
build=build
repeat=9
topology=$source_dir/tests/fixtures/topologies/dgx-h100.xml
python=python3
slow=1
while getopts "B:r:t:p:qh" opt; do
  case $opt in
    B) build=$OPTARG ;;
    r) repeat=$OPTARG ;;
    t) topology=$OPTARG ;;
    p) python=$OPTARG ;;
    q) slow=0 ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
tool=$build/tests/bench/dtrain_scale_step
if [[ ! -x $tool ]]; then
  echo "dtrain: scale-step: $tool is not built; cmake --build $build --target dtrain_scale_step" >&2
  exit 2
fi
work=$build/tests/bench/scale
mkdir -p "$work"
hosts=$work/hosts
nodes=12500
before=ip_max_nodes=$nodes  # every node resolves every name, as dtrain did before ip_max_nodes

run() {
  echo "\$ $*"
  "$@"
  echo
}

echo "== hosts file"
run "$tool" --nodes "$nodes" --hosts-file "$hosts" --write-hosts-file

echo "== after: default ip_max_nodes, names from the hosts file (read once)"
run "$tool" --hosts-file "$hosts" --repeat "$repeat" --topology "$topology" \
  --tf-config-out "$work/tf_config.json"
echo "== before: ip_max_nodes=$nodes, names from the hosts file (read once)"
run "$tool" --hosts-file "$hosts" --repeat "$repeat" --topology "$topology" \
  --plugstack-args "$before"
echo "== after, frameworks=torch: only DTRAIN_ENDPOINTS is too long for execve"
run "$tool" --hosts-file "$hosts" --repeat "$repeat" --topology "$topology" \
  --plugstack-args frameworks=torch

# getaddrinfo through nss_files reads /etc/hosts at every lookup: a 12,500-line file there is
# what a site that lists its nodes in /etc/hosts has.
if [[ $EUID -eq 0 ]] && unshare --mount true 2>/dev/null; then
  in_namespace() {
    unshare --mount -- bash -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$hosts" "$@"
  }
  echo "== after: getaddrinfo, /etc/hosts of $nodes names (private mount namespace), a node"
  echo "   other than rank 0's, which resolves its own name and rank 0's"
  run in_namespace "$tool" --resolver system --repeat "$repeat" --topology "$topology" \
    --node $((nodes / 2))
  if ((slow)); then
    echo "== before: getaddrinfo, /etc/hosts of $nodes names, one run"
    run in_namespace "$tool" --resolver system --repeat 1 --topology "$topology" \
      --plugstack-args "$before"
  fi
else
  echo "== getaddrinfo runs: SKIPPED (they need root and unshare --mount)"
fi

echo "== TF_CONFIG of rank 0, from its memory file's content"
run "$python" "$here/tf_config_at_scale.py" "$work/tf_config.json" --workers 100000 --index 0
