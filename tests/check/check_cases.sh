#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# dtrain-check on the local Slurm cluster (the plugin loaded through the cluster's plugstack.conf).
#
#   check_cases.sh CASE DTRAIN_CHECK
#
#   healthy             srun --distributed-train -N4 -n8: exit 0; the JSON shows 4 nodes, 8 ranks,
#                       no GPUs and one fingerprint
#   held-endpoint-port  another process holds rank 6's endpoint port on node3: exit 1 and the
#                       endpoint-port-in-use finding names node3, the port and the fix
#   no-plugin           srun without --distributed-train: the plugin-not-in-effect finding
#
# This script drives srun; check_cases.py holds the expectations on dtrain-check's exit status,
# output and JSON report.
set -uo pipefail

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '3,14p' "$0" | cut -c3-
  exit 0
fi
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
fail_context=$case_name

# run_check SRUN_OPTIONS... [-- CHECK_CASES_PY_OPTIONS...]: runs dtrain-check in one step, then
# check_cases.py on its exit status, output and JSON report.
run_check() {
  local srun_options=() status
  while (($#)) && [[ $1 != -- ]]; do
    srun_options+=("$1")
    shift
  done
  (($#)) && shift
  timeout 120 srun --mpi=pmix "${srun_options[@]}" "$check" --timeout 60 --json "$json" >"$out" 2>&1
  status=$?
  /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/check_cases.py" "$case_name" --status "$status" \
    --output "$out" --json "$json" "$@"
}

case $case_name in
  healthy)
    run_check --distributed-train -N4 -n8
    ;;
  held-endpoint-port)
    # pin_plugin_ports puts local rank 0's port of every step in $base..$base+64 (as in
    # tests/bootstrap/bootstrap_cases.sh blocked-endpoint); -N4 -n8 block puts rank 6 alone on
    # node3, so its endpoint is node3's address and one of those 65 ports, all held.
    base=$(free_port_block 66)
    pin_plugin_ports "$base" "$work"
    node3=$(node_address node3)
    hold_port "$node3" "$base" "$work" node3 65 || fail "could not hold $node3:$base-$((base + 64)) on node3"
    run_check --distributed-train -N4 -n8 -- --base-port "$base"
    ;;
  no-plugin)
    run_check -N2 -n2
    ;;
  *)
    echo "dtrain: check_cases.sh: unknown case $case_name; use healthy, held-endpoint-port or no-plugin" >&2
    exit 2
    ;;
esac
