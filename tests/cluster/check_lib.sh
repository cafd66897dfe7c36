# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Shell helpers shared by the cluster check scripts (sourced, not run).

# fail MESSAGE...: prints "dtrain: MESSAGE" and exits 1, the one failure of every script that
# sources this. A script sets fail_context (say, its case name) to have it before the message, and
# lists in fail_files what a reader needs to see the failure (a command's captured output).
fail_context=""
fail_files=()
fail() {
  echo "dtrain: ${fail_context:+$fail_context: }$*" >&2
  local file
  for file in "${fail_files[@]}"; do
    [[ -s $file ]] || continue
    echo "---- $file ----" >&2
    cat -- "$file" >&2
  done
  exit 1
}

expect_equal() {
  local what="$1" actual="$2" expected="$3"
  [[ "$actual" == "$expected" ]] || fail "$what is '$actual', expected '$expected'"
  echo "dtrain: ok: $what = $actual"
}

# expect_line WHAT PATTERN TEXT: some line of TEXT matches the extended regex PATTERN.
expect_line() {
  local what="$1" pattern="$2" text="$3"
  grep -Eq -- "$pattern" <<<"$text" || fail "$what: no line matches /$pattern/ in:"$'\n'"$text"
  echo "dtrain: ok: $what: $(grep -Em1 -- "$pattern" <<<"$text" | cut -c1-160)"
}

dtrain_check_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
dtrain_cluster_sh="$dtrain_check_dir/../../slurm/local/cluster.sh"

# The processes of jobs on the nodes: steps, tasks and batch scripts (everything but the daemons).
job_processes() {
  "$dtrain_cluster_sh" ps --state-dir "${DTRAIN_CLUSTER_DIR:?}" |
    awk '$1 != "slurmctld" && $3 != "slurmd"'
}

# expect_no_job_processes WHAT [SECONDS]: waits until no job process is left on any node.
# Steps end asynchronously after srun returns (slurmstepd reports to slurmctld, then exits), and
# after an MPI_Abort or a SIGKILL a node's slurmstepd was seen to linger for about 40 s in Slurm's
# PMIx plugin. The bound (default 90 s) is a liveness bound, not a speed requirement.
expect_no_job_processes() {
  local what="$1" seconds="${2:-90}" tries left=""
  for ((tries = 0; tries < seconds * 5; tries++)); do
    left=$(job_processes)
    [[ -z "$left" ]] && break
    sleep 0.2
  done
  [[ -z "$left" ]] || fail "$what: processes left on the nodes $seconds s later:"$'\n'"$left"
  echo "dtrain: ok: $what: no job process left on any node (after $((tries / 5)).$((tries % 5 * 2)) s)"
}

# free_port_block COUNT: a random base port such that base-1 .. base+COUNT-1 are free on
# loopback now, so that concurrent runs rarely meet.
free_port_block() {
  python3 - "$1" <<'PY'
import random, socket, sys
n = int(sys.argv[1])
# Below the kernel's ephemeral range: the outgoing connections of tests running beside this one
# take ports from that range at any moment, between this check and the ranks' listen().
with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
    ephemeral_low, ephemeral_high = map(int, f.read().split())
low, high = (10000, ephemeral_low) if ephemeral_low - n > 11000 else (ephemeral_high + 2, 65535)
for _ in range(200):
    base = random.randrange(low, high - n)
    try:
        for port in range(base - 1, base + n):
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))
        print(base)
        break
    except OSError:
        continue
PY
}

# pin_plugin_ports BASE SAVE_DIR: a ports= range of 32 rows of 65 ports gives the derived scheme
# 65 colours, so local rank l of any step of any job listens on one of BASE + 65 l .. BASE + 65 l
# + 64 (row l): holding the 65 ports of row 0 (hold_port ADDR BASE DIR NODE 65) holds local rank
# 0's port whatever the job id. check_ports=off lets the step start with that port held by the
# user's own process (the plugin would refuse it, since TensorFlow and PaddlePaddle bind their
# endpoint ports): the callers test what the bootstrap and dtrain-check find. plugstack.conf is
# saved in SAVE_DIR; restore_plugstack puts it back (call it from the caller's EXIT trap).
pin_plugin_ports() {
  local base="$1" save_dir="$2" plugstack="${DTRAIN_CLUSTER_DIR:?}/plugstack.conf"
  cp "$plugstack" "$save_dir/plugstack.saved"
  sed -i "s|spank_dtrain.so.*|& ports=$base-$((base + 65 * 32 - 1)) port_block=32 check_ports=off|" \
    "$plugstack"
}

restore_plugstack() {
  local save_dir="$1"
  [[ -f $save_dir/plugstack.saved ]] || return 0
  cp "$save_dir/plugstack.saved" "${DTRAIN_CLUSTER_DIR:?}/plugstack.conf"
}

# node_address NODE: NODE's address on the local cluster's subnet (from env.sh).
node_address() {
  local entry
  for entry in ${DTRAIN_CLUSTER_NODE_ADDRESSES:?source the cluster\'s env.sh}; do
    [[ ${entry%%=*} == "$1" ]] && echo "${entry#*=}" && return 0
  done
  fail "no address for node '$1' in DTRAIN_CLUSTER_NODE_ADDRESSES ($DTRAIN_CLUSTER_NODE_ADDRESSES)"
}

# hold_port ADDR PORT FLAG_DIR [NODE [COUNT]]: another process listens on ADDR:PORT (and the
# COUNT - 1 ports after it) for 300 s at most, on NODE of the local cluster (in its network
# namespace) when given ("" for this machine), and this returns once it does; its pid is left in
# holder_pid for the caller to kill.
hold_port() {
  local addr="$1" port="$2" flag="$3/held.$2" node="${4:-}" count="${5:-1}"
  local -a on_node=()
  [[ -z $node ]] || on_node=("$dtrain_cluster_sh" exec "$node" --state-dir "${DTRAIN_CLUSTER_DIR:?}" --)
  "${on_node[@]}" python3 -c "import socket,sys,time
held = []
for p in range(int(sys.argv[2]), int(sys.argv[2]) + int(sys.argv[4])):
    s = socket.socket(); s.bind((sys.argv[1], p)); s.listen(); held.append(s)
open(sys.argv[3], 'w').close(); time.sleep(300)" \
    "$addr" "$port" "$flag" "$count" &
  # shellcheck disable=SC2034 # the caller kills it
  holder_pid=$!
  for _ in $(seq 100); do [[ -e $flag ]] && return 0; sleep 0.1; done
  echo "dtrain: could not hold $addr:$port" >&2
  return 1
}
