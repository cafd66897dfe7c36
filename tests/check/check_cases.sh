#!/usr/bin/env bash
# dtrain-check on the local Slurm cluster (the plugin loaded through the cluster's plugstack.conf).
#
#   check_cases.sh CASE DTRAIN_CHECK
#
#   healthy             srun --distributed-train -N4 -n8: exit 0; the JSON shows 4 nodes, 8 ranks,
#                       no GPUs and one fingerprint
#   held-endpoint-port  another process holds rank 6's endpoint port on node3: exit 1 and the
#                       endpoint-port-in-use finding names node3, the port and the fix
#   no-plugin           srun without --distributed-train: the plugin-not-in-effect finding
set -uo pipefail

case_name=${1:?case}
check=${2:?path to dtrain-check}
work=$(mktemp -d "$PWD/check-case.XXXXXX")
out=$work/output
json=$work/report.json
# More ranks than cores here: let Open MPI yield instead of spinning in blocking calls.
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
# shellcheck source=tests/cluster/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cluster/check_lib.sh"
trap 'kill ${holder_pid:-} 2>/dev/null; restore_plugstack "$work"; rm -rf "$work"' EXIT

fail() {
  echo "FAIL ($case_name): $*" >&2
  echo "---- output ----" >&2
  cat "$out" >&2
  [[ -f $json ]] && { echo "---- json ----" >&2; cat "$json" >&2; }
  exit 1
}

contains() { grep -Eq -- "$1" "$out" || fail "expected output matching: $1"; }

# Evaluates a Python expression over the report as `r`; fails naming it when false.
json_true() {
  python3 - "$json" "$1" <<'PY' || fail "JSON check failed: $1"
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}

run_check() {
  local status
  timeout 120 srun --mpi=pmix "$@" "$check" --timeout 60 --json "$json" >"$out" 2>&1
  status=$?
  echo "$status"
}

case $case_name in
  healthy)
    status=$(run_check --distributed-train -N4 -n8)
    [[ $status == 0 ]] || fail "expected exit 0 on a healthy step, got $status"
    contains "^dtrain-check: 4 nodes, 8 ranks, plugin in effect$"
    contains "^Verdict: healthy"
    json_true 'r["healthy"] and r["exit_status"] == 0 and r["plugin_in_effect"]'
    json_true 'r["node_count"] == 4 and len(r["nodes"]) == 4'
    json_true 'r["rank_count"] == 8 and [x["rank"] for x in r["ranks"]] == list(range(8))'
    json_true 'sorted(n["name"] for n in r["nodes"]) == ["node1", "node2", "node3", "node4"]'
    json_true 'all(n["gpu_count"] == 0 and n["gpus"] == [] for n in r["nodes"])'
    json_true 'r["fingerprint"]["consistent"]'
    json_true 'len({json.dumps(x["fingerprint"], sort_keys=True) for x in r["ranks"]}) == 1'
    json_true 'r["preflight"]["ran"] and r["preflight"]["probes"] > 0 and not r["preflight"]["failures"]'
    json_true 'all(p["in_use"] is False for x in r["ranks"] for p in x["ports"])'
    json_true 'not [f for f in r["findings"] if f["severity"] == "problem"]'
    ;;
  held-endpoint-port)
    # A port range of one block makes the plugin's base port exactly $base (as in
    # tests/bootstrap/bootstrap_cases.sh blocked-endpoint); -N4 -n8 block puts rank 6 alone on
    # node3 (127.0.1.3), so its endpoint is 127.0.1.3:$base.
    base=$(free_port_block 33)
    pin_plugin_ports "$base" "$work"
    hold_port 127.0.1.3 "$base" "$work" || fail "could not hold 127.0.1.3:$base"
    status=$(run_check --distributed-train -N4 -n8)
    [[ $status == 1 ]] || fail "expected exit 1 with a held endpoint port, got $status"
    contains "^  6 +node3 .* 127\.0\.1\.3:$base +IN USE"
    contains "^  \[problem\] endpoint-port-in-use: on node3, rank 6's endpoint 127\.0\.1\.3:$base "
    contains "^      fix: Find the holder with .ss -ltnp"
    json_true "[(f['node'], f['rank']) for f in r['findings'] if f['id'] == 'endpoint-port-in-use'] == [('node3', 6)]"
    json_true "any('127.0.1.3:$base' in f['detail'] and 'ss -ltnp' in f['fix'] for f in r['findings'])"
    json_true 'not r["healthy"] and r["exit_status"] == 1'
    ;;
  no-plugin)
    status=$(run_check -N2 -n2)
    [[ $status == 1 ]] || fail "expected exit 1 without the plugin, got $status"
    contains "^dtrain-check: 2 nodes, 2 ranks, plugin NOT in effect$"
    contains "^  \[problem\] plugin-not-in-effect: no rank has the plugin's DTRAIN_\* variables"
    contains "^      fix: Launch with .srun --mpi=pmix --distributed-train"
    json_true '[f["id"] for f in r["findings"] if f["severity"] == "problem"] == ["plugin-not-in-effect"]'
    json_true 'r["preflight"]["ran"] and not r["preflight"]["failures"]'
    ;;
  *)
    echo "dtrain: check_cases.sh: unknown case $case_name" >&2
    exit 2
    ;;
esac
echo "PASS ($case_name)"
