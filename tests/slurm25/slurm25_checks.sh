#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks specific to the Slurm 25.11 cluster (tests/slurm25): run through run_slurm25.sh, which
# sources the cluster's env.sh. The plugin suite's own checks (tests/plugin, tests/clients) run
# against this cluster unchanged; these cover what only a second Slurm version raises.
set -euo pipefail

usage() {
  cat <<EOF
Usage: $(basename "$0") CHECK [ARGS...]

Checks:
  versions                 slurmctld, every slurmd and the clients are Slurm 25.11
  rejects-old-plugin PLUGIN  a plugin built against another Slurm release (the 22.05 build
                           tree's spank_dtrain.so) in plugstack.conf makes 25.11's srun refuse
                           to start the step, naming the plugin's version
  resv-ports               with MpiParams=ports (cluster.sh --resv-ports), each step's tasks
                           listen on Slurm's reserved ports: SLURM_STEP_RESV_PORTS holds
                           (most tasks on one node + 1) ports and dtrain's endpoints and master
                           port come from it; the cluster is put back without reserved ports
Needs SLURM_CONF and DTRAIN_CLUSTER_DIR of the 25.11 cluster (its env.sh).
EOF
}

die() {
  echo "dtrain: check failed: $*" >&2
  exit 1
}

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
readonly script_dir
cluster_script="$script_dir/../../slurm/local/cluster.sh"

check_versions() {
  local version nodes
  version=$(scontrol version)
  [[ "$version" == "slurm 25.11."* ]] || die "scontrol version says '$version'"
  # The controller's own version, as the daemons report it over the wire.
  scontrol show config | grep -Eq '^SLURM_VERSION += 25\.11\.' ||
    die "slurmctld does not report 25.11: $(scontrol show config | grep '^SLURM_VERSION')"
  nodes=$(scontrol show node -o | grep -Eo 'NodeName=[^ ]+|Version=[^ ]+' | paste -d' ' - -)
  [[ $(grep -c 'Version=25\.11\.' <<<"$nodes") -eq 4 ]] || die "not every slurmd runs 25.11: $nodes"
  echo "dtrain: ok: $version; slurmctld and $(tr '\n' ' ' <<<"$nodes")"
}

check_rejects_old_plugin() {
  local plugin="$1" plugstack="$DTRAIN_CLUSTER_DIR/plugstack.conf" saved status=0 output
  [[ -f "$plugin" ]] || die "plugin '$plugin' not found"
  saved=$(cat "$plugstack")
  trap 'printf "%s\n" "$saved" >"$plugstack"' EXIT
  echo "required $plugin" >"$plugstack"
  output=$(timeout 60 srun -N1 -n1 --distributed-train true 2>&1) || status=$?
  printf '%s\n' "$saved" >"$plugstack"
  trap - EXIT
  ((status != 0)) || die "25.11's srun ran a step with $plugin loaded:"$'\n'"$output"
  grep -Eq "Incompatible Slurm plugin $plugin version \(22\.05\." <<<"$output" ||
    die "srun failed (status $status) but not for the plugin's Slurm version:"$'\n'"$output"
  echo "dtrain: ok: Slurm 25.11 refuses the 22.05 build of the plugin: $(grep -m1 -o 'Incompatible Slurm plugin.*' <<<"$output")"
}

check_resv_ports() {
  local range=41000-41999 status=0 output
  "$cluster_script" up --state-dir "$DTRAIN_CLUSTER_DIR" --resv-ports "$range" >/dev/null
  # shellcheck disable=SC2016 # the task's shell expands them
  output=$(timeout 60 srun --distributed-train -N4 -n8 /bin/sh -c \
    'echo "TASK $SLURM_PROCID $SLURM_LOCALID $SLURM_STEP_RESV_PORTS $DTRAIN_CURRENT_ENDPOINT $DTRAIN_MASTER_PORT"' 2>&1) ||
    status=$?
  "$cluster_script" up --state-dir "$DTRAIN_CLUSTER_DIR" --no-resv-ports >/dev/null
  ((status == 0)) || die "the step with reserved ports failed (status $status):"$'\n'"$output"
  python3 - "$output" <<'PYEOF' || exit 1
import sys
tasks = [line.split()[1:] for line in sys.argv[1].splitlines() if line.startswith("TASK ")]
def fail(message):
    print(f"dtrain: check failed: {message}\n{sys.argv[1]}", file=sys.stderr)
    sys.exit(1)
if len(tasks) != 8:
    fail(f"{len(tasks)} of 8 tasks reported")
def expand(text):
    ports = []
    for item in text.split(","):
        low, _, high = item.partition("-")
        ports += range(int(low), int(high or low) + 1)
    return ports
for rank, local, reserved, endpoint, master in tasks:
    ports = expand(reserved)
    # -N4 -n8 lays out 4,2,1,1: the busiest node has 4 tasks, so 5 ports per step.
    if len(ports) != 5 or not all(41000 <= p <= 41999 for p in ports):
        fail(f"rank {rank}: SLURM_STEP_RESV_PORTS={reserved}, expected 5 ports in 41000-41999")
    if int(endpoint.rsplit(":", 1)[1]) != ports[int(local)]:
        fail(f"rank {rank}: endpoint {endpoint} is not reserved port {int(local)} of {reserved}")
    if int(master) != ports[-1]:
        fail(f"rank {rank}: master port {master} is not the last reserved port of {reserved}")
print(f"dtrain: ok: reserved ports {tasks[0][2]}: endpoints and master port come from SLURM_STEP_RESV_PORTS")
PYEOF
}

if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  usage
  exit 0
fi
[[ -n "${SLURM_CONF:-}" && -n "${DTRAIN_CLUSTER_DIR:-}" ]] ||
  die "SLURM_CONF and DTRAIN_CLUSTER_DIR are not set; run through run_slurm25.sh"
case "${1:-}" in
  versions) check_versions ;;
  rejects-old-plugin)
    (($# == 2)) || die "rejects-old-plugin needs the path of a plugin built against another Slurm"
    check_rejects_old_plugin "$2"
    ;;
  resv-ports) check_resv_ports ;;
  *)
    usage >&2
    exit 2
    ;;
esac
