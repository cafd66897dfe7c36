#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A real four-node Slurm cluster on one machine, for dtrain's cluster tests and demos.
#
# slurmctld and four slurmd (node1..node4) run from Debian's Slurm packages, or from another Slurm
# installation with --slurm PREFIX (a current release, built by tests/slurm25). Each daemon lives in
# its own mount and UTS namespace with its own hostname, /tmp and /dev/shm, as on real nodes;
# without that, PMIx directories and Open MPI shared-memory segments of different "nodes" collide.
# Every node also has a network stack of its own: a network namespace joined to the host's by a veth
# pair on a bridge, with an address from 198.18.0.0/15 (the range set aside for benchmark networks)
# and no route anywhere else, so a wildcard bind on one node leaves the port free on the others.
# Slurm's PMIx fences run as a ring (mpi.conf; why: generate_mpi_conf), and the daemons run in a
# CPU cgroup of their own so that tasks, not nodes, share the CPUs (why: cpu_cgroup_dir).
# All state lives under the state directory; nothing is written to the host's /tmp.
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo_root=$(cd "$script_dir/../.." && pwd -P)
readonly script_dir repo_root
readonly nodes=(node1 node2 node3 node4)
readonly ctld_hostname=dtrain-ctld
# Site profiles (--profile): each names the features of real sites' slurm.conf it turns on.
readonly profile_names=(default reserved-ports pack cgroup tmpfs gres debian-hosts site fabric)
readonly gres_gpus_per_node=4
# The fabric profile's second interface in every node, and the suffix of its names in hosts files.
readonly fabric_ifname=fab0
readonly fabric_suffix=-fab

usage() {
  cat <<EOF
Usage: $(basename "$0") {up|down|status|restart|ps} [options]
       $(basename "$0") {stop-node|start-node} NODE [options]
       $(basename "$0") [options] exec NODE [--] COMMAND [ARGS...]
       $(basename "$0") {fabric-down|fabric-up} NODE [options]
       $(basename "$0") {blackhole|unblackhole} NODE PORT|all [options]

Runs a local four-node Slurm cluster for dtrain's cluster tests: node[1-4] with 4 CPUs each in
one partition where two jobs may share each CPU, so \`srun -N4 -n8\` lays out 4,2,1(x2) and two
such jobs run at the same time. Every node has its own hostname, /tmp, /dev/shm and network
namespace: a bridge on the host carries the subnet 198.18.X.0/24 (X chosen per state directory,
--subnet overrides), the host (slurmctld, srun) is 198.18.X.1 and nodeK is 198.18.X.1K. The
subnet has no route off this machine. The daemons run in a CPU cgroup of their own, so that the
machine's cores are shared task by task rather than node by node (why: cpu_cgroup_dir in this
script). down removes the cgroup, the namespaces, the veth pairs and the bridge (and those of
the fabric profile's second network, with its blackhole rules).

Commands:
  up        start the cluster unless it already runs with the same configuration, then wait
            until all four nodes are idle; recovers from crashed daemons and stale state
  down      stop every daemon, step and task of this state directory
  status    print each daemon and sinfo; exit status 0 only when all daemons run
  restart   down, then up
  ps        list every process of the cluster, one per line: NAME PID COMMAND ARGS..., where
            NAME is slurmctld or the node (node1..node4) whose namespaces the process lives in
  exec NODE [--] COMMAND [ARGS...]
            run COMMAND on NODE: in its network, mount and UTS namespaces (its address, /tmp,
            /etc/hosts and hostname), as root; for tests that act on one node from outside Slurm
  stop-node NODE   stop the slurmd of one node with SIGTERM, as stopping the slurmd service of
            a real node does; its running steps (slurmstepd and tasks) are left alone
  start-node NODE  start the slurmd of one node again (inside the namespaces of its surviving
            steps, if any) and wait until slurmctld sees the node respond
  fabric-down NODE  (profile fabric) take NODE's fabric link down as a pulled cable or a dead
            switch port would: the host's end of its fabric veth goes down, so the node's
            $fabric_ifname loses its carrier (carrier 0, operstate down) while it stays
            administratively up; Slurm, on the management network, is untouched
  fabric-up NODE    (profile fabric) bring NODE's fabric link back and wait for its carrier
  blackhole NODE PORT    (profile fabric) drop every TCP packet to PORT on NODE's fabric
            address, silently (no reset), with an nftables rule in NODE's network namespace:
            a connect there times out, other ports and the management address still answer
  blackhole NODE all     (profile fabric) drop every packet in and out of NODE's fabric
            interface (ICMP too) while its link stays up: a node that reaches nobody
  unblackhole NODE PORT|all  (profile fabric) remove that rule

Options:
  --state-dir DIR      where all state lives (default: \$DTRAIN_CLUSTER_DIR, else
                       <repo>/build/cluster); must not be under /tmp, which is private per node
  --plugstack FILE     PlugStackConfig to use (default: DIR/plugstack.conf, created empty)
  --port-base N        slurmctld listens on N and every slurmd on N+1, each in its node's
                       network namespace (default: derived from the state directory, in
                       10000-18990, so two state dirs can coexist)
  --resv-ports A-B     set MpiParams=ports=A-B (Slurm reserved ports); default: not set
  --no-resv-ports      remove a previously set --resv-ports
  --pmix-fence ring|slurm-default  how Slurm's PMIx plugin runs fences: ring (the default;
                       why: generate_mpi_conf in this script) or Slurm's own choice, to compare
  --subnet 198.18.X.0/24  the nodes' subnet, any /24 in 198.18.0.0/15 (default: derived from
                       the state directory, skipping subnets that another cluster's bridge holds)
  --fabric-subnet 198.18.Y.0/24  the fabric's subnet with --profile fabric, another /24 in
                       198.18.0.0/15 (default: chosen like --subnet, never the same)
  --valgrind-stepd NODE  run every slurmstepd of NODE under valgrind memcheck: a wrapper is
                       bind-mounted over /usr/sbin/slurmstepd (PREFIX/sbin/slurmstepd
                       with --slurm) in that node's mount namespace
                       only; logs go to DIR/valgrind/<pid>.log (delete them between runs)
  --valgrind-suppressions FILE  suppression file for --valgrind-stepd (default: none)
  --no-valgrind-stepd  remove a previously set --valgrind-stepd
  --slurm PREFIX       run the Slurm installed in PREFIX (PREFIX/sbin/slurmctld, its slurmd,
                       slurmstepd and plugins; 24.05 or later) instead of Debian's; env.sh then
                       puts PREFIX/bin first in PATH, so clients use its srun and sbatch
  --no-slurm           go back to Debian's Slurm after an earlier --slurm
  --profile NAME       the site features to configure (default: default):
                       default         what the tests use: no cgroups, no gres, one hosts file
                       reserved-ports  MpiParams=ports=A-B (--resv-ports, else a range derived
                                       from the port base), so steps get SLURM_STEP_RESV_PORTS
                       pack            SelectTypeParameters=CR_Core,CR_Pack_Nodes
                       cgroup          task/cgroup,task/affinity with ConstrainCores=yes and
                                       proctrack/cgroup (cgroup.conf); tasks are bound to
                                       CPUs only on request (TaskPluginParam=None)
                       tmpfs           job_container/tmpfs: every job gets a private /tmp
                       gres            GresTypes=gpu, $gres_gpus_per_node gpus per node (gres.conf), backed by
                                       character devices made in each node's mount namespace
                       debian-hosts    node1's /etc/hosts maps node1 to 127.0.1.1, as Debian's
                                       installer writes it; the other nodes map it to its address
                       site            all of the above but debian-hosts
                       fabric          a second network, the data fabric: every node gets
                                       $fabric_ifname on a second bridge, in another /24 of
                                       198.18.0.0/15 (--fabric-subnet), named nodeK$fabric_suffix
                                       in every hosts file, and sees its own interfaces in
                                       /sys/class/net; Slurm stays on the management network,
                                       and a plugin with suffix=$fabric_suffix puts dtrain's
                                       endpoints on the fabric; AuthInfo=cred_expire=15 (a
                                       requeued job may start again after 16 s instead of
                                       121 s). Faults to
                                       inject: fabric-down, blackhole; up leaves them in place,
                                       restart clears them
                       A profile that this machine's Slurm cannot run still starts; up then
                       prints Slurm's error and what the profile would need, and exits 1.
  --timeout SECONDS    how long up waits for idle nodes (default: 60)
  -h, --help           print this help

Options given to up are remembered in DIR/cluster.options for later up/restart calls.
Clients source DIR/env.sh, which exports SLURM_CONF, the nodes' addresses and Open MPI settings
that keep it on the cluster's subnet:
  $(basename "$0") up && . "\${DTRAIN_CLUSTER_DIR:-$repo_root/build/cluster}/env.sh" && srun -N4 -n8 hostname
EOF
}

die() {
  echo "dtrain: $*" >&2
  exit 1
}

note() {
  echo "dtrain: $*"
}

subcommand=""
state_dir="${DTRAIN_CLUSTER_DIR:-$repo_root/build/cluster}"
opt_plugstack=""
opt_port_base=""
explicit_port_base=""
opt_resv_ports=""
opt_no_resv_ports=0
opt_pmix_fence=""
opt_valgrind_node=""
opt_valgrind_suppressions=""
opt_no_valgrind=0
opt_slurm_prefix=""
opt_no_slurm=0
opt_subnet=""
opt_fabric_subnet=""
opt_profile=""
node_argument=""
port_argument=""
exec_command=()
wait_timeout=60

is_node() {
  local node
  for node in "${nodes[@]}"; do
    [[ "$1" == "$node" ]] && return 0
  done
  return 1
}

parse_args() {
  while (($#)); do
    # The command of exec starts at its first word after NODE that is not an option.
    if [[ "$subcommand" == exec && -n "$node_argument" && "$1" != -* ]]; then
      exec_command=("$@")
      break
    fi
    case "$1" in
      up | down | status | restart | ps | stop-node | start-node | exec | fabric-down | fabric-up | blackhole | unblackhole)
        [[ -z "$subcommand" ]] || die "two commands given ('$subcommand' and '$1'); give one of up|down|status|restart|ps|stop-node|start-node|exec|fabric-down|fabric-up|blackhole|unblackhole"
        subcommand="$1"
        if [[ ! "$1" =~ ^(up|down|status|restart|ps)$ ]]; then
          if (($# < 2)) || [[ "$2" == -* ]]; then
            die "$1 needs a node name (one of ${nodes[*]}) right after it"
          fi
          node_argument="$2"
          shift
        fi
        if [[ "$subcommand" == *blackhole ]]; then
          if (($# < 2)) || { [[ "$2" != all ]] && { [[ ! "$2" =~ ^[1-9][0-9]{0,4}$ ]] || ((10#$2 > 65535)); }; }; then
            die "$subcommand $node_argument needs a TCP port (1-65535) or 'all' after the node, e.g. $subcommand $node_argument 29500"
          fi
          port_argument="$2"
          shift
        fi
        ;;
      --state-dir | --plugstack | --port-base | --resv-ports | --timeout | --valgrind-stepd | --valgrind-suppressions | --slurm | --subnet | --fabric-subnet | --pmix-fence | --profile)
        (($# >= 2)) || die "option $1 needs a value; see --help"
        case "$1" in
          --state-dir) state_dir="$2" ;;
          --plugstack) opt_plugstack="$2" ;;
          --port-base) opt_port_base="$2" ;;
          --resv-ports) opt_resv_ports="$2" ;;
          --timeout) wait_timeout="$2" ;;
          --valgrind-stepd) opt_valgrind_node="$2" ;;
          --valgrind-suppressions) opt_valgrind_suppressions="$2" ;;
          --slurm) opt_slurm_prefix="$2" ;;
          --subnet) opt_subnet="$2" ;;
          --fabric-subnet) opt_fabric_subnet="$2" ;;
          --pmix-fence) opt_pmix_fence="$2" ;;
          --profile) opt_profile="$2" ;;
        esac
        shift
        ;;
      --)
        [[ "$subcommand" == exec ]] || die "'--' only goes before the command of exec"
        shift
        exec_command=("$@")
        break
        ;;
      --no-resv-ports) opt_no_resv_ports=1 ;;
      --no-valgrind-stepd) opt_no_valgrind=1 ;;
      --no-slurm) opt_no_slurm=1 ;;
      -h | --help)
        usage
        exit 0
        ;;
      *) die "unknown argument '$1'; see --help" ;;
    esac
    shift
  done
  if [[ "$subcommand" == exec ]] && ((${#exec_command[@]} == 0)); then
    die "exec $node_argument needs a command to run there"
  fi
  [[ -n "$subcommand" ]] || die "no command given; use one of up|down|status|restart|ps|stop-node|start-node|exec|fabric-down|fabric-up|blackhole|unblackhole (see --help)"
  if [[ -n "$node_argument" ]]; then
    is_node "$node_argument" || die "$subcommand: unknown node '$node_argument'; the nodes are ${nodes[*]}"
  fi
  if [[ -n "$opt_valgrind_node" ]]; then
    is_node "$opt_valgrind_node" || die "--valgrind-stepd: unknown node '$opt_valgrind_node'; the nodes are ${nodes[*]}"
  fi
  [[ "$wait_timeout" =~ ^[1-9][0-9]{0,3}$ ]] || die "--timeout '$wait_timeout' is not a number of seconds in 1-9999"
}

# Resolves the state directory and the paths inside it. Refuses /tmp: every node has a private
# /tmp, so files there would be invisible to the daemons.
setup_paths() {
  state_dir=$(realpath -m -- "$state_dir")
  case "$state_dir/" in
    /tmp/* | /dev/shm/*) die "state directory '$state_dir' is under /tmp or /dev/shm, which every node has privately; pick a directory elsewhere, e.g. the build tree" ;;
  esac
  if [[ "$subcommand" == up || "$subcommand" == restart ]]; then
    mkdir -p "$state_dir" || die "cannot create state directory '$state_dir'"
  elif [[ ! -d "$state_dir" ]]; then
    note "no cluster state in '$state_dir'; nothing runs there"
    [[ "$subcommand" == down ]] && exit 0
    exit 1
  fi
  conf="$state_dir/slurm.conf"
  # shellcheck disable=SC2034 # read by name through generated_configs
  {
    mpi_conf="$state_dir/mpi.conf"
    cgroup_conf="$state_dir/cgroup.conf"
    gres_conf="$state_dir/gres.conf"
    job_container_conf="$state_dir/job_container.conf"
  }
  job_container_dir="$state_dir/jobcontainer"
  gres_dev_dir="$state_dir/gres-dev"
  hosts_file="$state_dir/hosts"
  env_file="$state_dir/env.sh"
  options_file="$state_dir/cluster.options"
  run_dir="$state_dir/run"
  log_dir="$state_dir/log"
  tmp_root="$state_dir/tmp"
  valgrind_dir="$state_dir/valgrind"
}

# Serialises up/down/restart on one state directory (two ctest runs, a test and a shell).
# Everything started while holding it closes fd 9, or a daemon would hold the lock for ever.
lock_state_dir() {
  exec 9>"$state_dir/.lock"
  flock -w 180 9 || die "another cluster.sh holds $state_dir/.lock for over 180s; is an up or down stuck?"
}

require_environment() {
  ((EUID == 0)) || die "cluster.sh must run as root (slurmd needs namespaces and mounts); rerun with sudo"
  local tool
  if [[ -n "$slurm_prefix" ]]; then
    for tool in sbin/slurmctld sbin/slurmd sbin/slurmstepd bin/srun bin/sinfo bin/scontrol; do
      [[ -x "$slurm_prefix/$tool" ]] || die "--slurm '$slurm_prefix': $slurm_prefix/$tool not found; build Slurm into that prefix (tests/slurm25/build_slurm.sh) or pass --no-slurm"
    done
  fi
  for tool in slurmctld slurmd srun sinfo scontrol munge unmunge munged unshare nsenter setsid flock ss taskset python3; do
    command -v "$tool" >/dev/null || die "'$tool' not found; install the Debian packages slurmctld slurmd slurm-client munge util-linux iproute2 python3"
  done
}

# Which Slurm runs: Debian's (empty prefix) or the one of --slurm PREFIX, remembered like the
# other options. Resolved before anything else, because every command (status's sinfo, up's wait)
# must talk to the cluster with its own version's tools: Slurm speaks only the protocols of its
# own and the two previous releases. PATH then names that installation's tools first, and the
# daemons inherit it.
resolve_slurm_prefix() {
  local saved_slurm_prefix=""
  if [[ -f "$options_file" ]]; then
    # shellcheck disable=SC1090
    source <(grep -E '^saved_slurm_prefix=' "$options_file")
  fi
  slurm_prefix="$saved_slurm_prefix"
  ((opt_no_slurm == 0)) || slurm_prefix=""
  if [[ -n "$opt_slurm_prefix" ]]; then
    [[ -d "$opt_slurm_prefix" ]] || die "--slurm '$opt_slurm_prefix' is not a directory; give the prefix Slurm was installed into (tests/slurm25/build_slurm.sh prints it)"
    slurm_prefix=$(realpath -- "$opt_slurm_prefix")
  fi
  slurmstepd_path=/usr/sbin/slurmstepd
  slurm_version=""
  if [[ -n "$slurm_prefix" ]]; then
    PATH="$slurm_prefix/sbin:$slurm_prefix/bin:$PATH"
    slurmstepd_path="$slurm_prefix/sbin/slurmstepd"
  fi
}

# --slurm needs a release that can run without cgroups (CgroupPlugin=disabled, Slurm 24.05):
# 25.11's slurmd initialises a cgroup plugin at start (cgroup/v1 here), and the emulated nodes
# of one machine would all claim the same cgroups. Debian's 22.05 leaves cgroups alone here.
check_slurm_version() {
  [[ -n "$slurm_prefix" ]] || return 0
  local version
  version=$("$slurm_prefix/sbin/slurmd" -V 2>/dev/null | awk '{ print $2 }') || version=""
  [[ "$version" =~ ^([0-9]+)\.([0-9]+) ]] || die "--slurm '$slurm_prefix': '$slurm_prefix/sbin/slurmd -V' does not print a Slurm version"
  local major=$((10#${BASH_REMATCH[1]})) minor=$((10#${BASH_REMATCH[2]}))
  ((major > 24 || (major == 24 && minor >= 5))) ||
    die "--slurm '$slurm_prefix' holds Slurm $version; --slurm needs 24.05 or later (for older releases use Debian's packages, without --slurm)"
  slurm_version="$version"
}

# Options persist so that a later `up` or `restart` without options keeps the same cluster.
load_options() {
  check_slurm_version
  local saved_plugstack="" saved_port_base="" saved_resv_ports="" saved_valgrind_node=""
  local saved_valgrind_suppressions="" saved_net_index="" saved_pmix_fence="" saved_profile=""
  local saved_fabric_index=""
  if [[ -f "$options_file" ]]; then
    # shellcheck disable=SC1090
    source <(grep -E '^saved_(plugstack|port_base|resv_ports|valgrind_node|valgrind_suppressions|net_index|fabric_index|pmix_fence|profile)=' "$options_file")
    # Files written before saved_port_base meant "given with --port-base" hold a derived base.
    grep -q '^# saved_port_base: given with --port-base' "$options_file" || saved_port_base=""
  fi
  profile="${opt_profile:-${saved_profile:-default}}"
  is_profile "$profile" || die "--profile '$profile' is not one of: ${profile_names[*]}"
  plugstack="${opt_plugstack:-${saved_plugstack:-$state_dir/plugstack.conf}}"
  # Only a --port-base given once is remembered; otherwise the base is derived from the state
  # directory on every up, so that a change of the derivation reaches existing state directories.
  explicit_port_base="${opt_port_base:-${saved_port_base:-}}"
  port_base="$explicit_port_base"
  resv_ports="${opt_resv_ports:-${saved_resv_ports:-}}"
  ((opt_no_resv_ports == 0)) || resv_ports=""
  pmix_fence="${opt_pmix_fence:-${saved_pmix_fence:-ring}}"
  [[ "$pmix_fence" == ring || "$pmix_fence" == slurm-default ]] ||
    die "--pmix-fence '$pmix_fence' is not ring or slurm-default"
  valgrind_node="${opt_valgrind_node:-${saved_valgrind_node:-}}"
  valgrind_suppressions="${opt_valgrind_suppressions:-${saved_valgrind_suppressions:-}}"
  if ((opt_no_valgrind)); then
    valgrind_node=""
    valgrind_suppressions=""
  fi
  if [[ -n "$valgrind_node" ]]; then
    command -v valgrind >/dev/null || die "--valgrind-stepd needs valgrind; install the Debian package valgrind"
  fi
  if [[ -n "$opt_valgrind_suppressions" ]]; then
    [[ -f "$opt_valgrind_suppressions" ]] || die "--valgrind-suppressions '$opt_valgrind_suppressions' is not a file"
    valgrind_suppressions=$(realpath -- "$opt_valgrind_suppressions")
  fi

  if [[ -z "$port_base" ]]; then
    local checksum
    checksum=$(printf '%s' "$state_dir" | cksum | cut -d' ' -f1)
    # Below the plugin's default range for derived ports (20000-32767): a slurmd listening on a
    # port a step derives would be "another process of yours" there and stop that step.
    port_base=$((10000 + (checksum % 900) * 10))
  fi
  if [[ ! "$port_base" =~ ^[1-9][0-9]{3,4}$ ]] || ((port_base < 1024 || port_base + ${#nodes[@]} > 65535)); then
    die "--port-base '$port_base' must be a number with it and the next ${#nodes[@]} ports in 1024-65535"
  fi
  if [[ -n "$resv_ports" ]]; then
    [[ "$resv_ports" =~ ^([0-9]+)-([0-9]+)$ ]] || die "--resv-ports '$resv_ports' is not a range A-B, e.g. 41000-41999"
    local low=${BASH_REMATCH[1]} high=${BASH_REMATCH[2]}
    ((low >= 1024 && low < high && high <= 65535)) ||
      die "--resv-ports '$resv_ports' needs 1024 <= A < B <= 65535"
    ((high < port_base || low > port_base + ${#nodes[@]})) ||
      die "--resv-ports '$resv_ports' overlaps the daemon ports $port_base-$((port_base + ${#nodes[@]})); move one of them"
  fi
  effective_resv_ports="$resv_ports"
  if [[ -z "$effective_resv_ports" ]] && profile_has reserved-ports; then
    effective_resv_ports=$(derived_resv_ports)
  fi
  if [[ -n "$opt_plugstack" ]]; then
    [[ -f "$opt_plugstack" ]] || die "--plugstack '$opt_plugstack' is not a file; create it or omit the option"
  fi
  if [[ "$plugstack" == /* ]]; then :; else plugstack="$PWD/$plugstack"; fi
  choose_net_index "$saved_net_index"
  fabric_index=""
  if profile_has fabric; then
    choose_fabric_index "$saved_fabric_index"
  elif [[ -n "$opt_fabric_subnet" ]]; then
    die "--fabric-subnet needs --profile fabric"
  fi
}

is_profile() {
  local name
  for name in "${profile_names[@]}"; do
    [[ "$1" == "$name" ]] && return 0
  done
  return 1
}

# profile_has FEATURE: the chosen profile turns FEATURE (a profile name other than default and
# site) on; site is every feature but debian-hosts, which would break the others' name lookups,
# and fabric, whose plugin needs suffix= in plugstack.conf.
profile_has() {
  [[ "$profile" == "$1" ]] && return 0
  [[ "$profile" == site && "$1" != debian-hosts && "$1" != fabric ]]
}

# The reserved-ports range when --resv-ports is not given: 200 ports in 29000-32599, between
# the derived daemon ports (10000-18994) and the kernel's ephemeral ports (usually from 32768),
# chosen by the port base so that two clusters get different ranges. A --port-base whose daemon
# ports reach 29000 takes the 200 ports right above its daemon ports instead.
derived_resv_ports() {
  # 200, not fewer: Slurm reserves one port per task of a step's busiest node, plus one, and
  # the plugin's 640-task check puts 160 tasks on a node.
  local low=$((29000 + (port_base / 10 % 18) * 200))
  if ((port_base + ${#nodes[@]} >= 29000)); then
    low=$((port_base + 10))
  fi
  ((low + 199 <= 65535)) || die "--port-base $port_base leaves no room for the reserved-ports range; pass --resv-ports A-B"
  echo "$low-$((low + 199))"
}

save_options() {
  {
    echo "# Written by slurm/local/cluster.sh: the options of the last up, reused by later calls."
    printf 'saved_plugstack=%q\n' "$plugstack"
    echo "# saved_port_base: given with --port-base (empty: derived from the state directory)"
    printf 'saved_port_base=%q\n' "$explicit_port_base"
    printf 'saved_resv_ports=%q\n' "$resv_ports"
    printf 'saved_valgrind_node=%q\n' "$valgrind_node"
    printf 'saved_valgrind_suppressions=%q\n' "$valgrind_suppressions"
    printf 'saved_slurm_prefix=%q\n' "$slurm_prefix"
    printf 'saved_net_index=%q\n' "$net_index"
    printf 'saved_fabric_index=%q\n' "$fabric_index"
    printf 'saved_pmix_fence=%q\n' "$pmix_fence"
    printf 'saved_profile=%q\n' "$profile"
  } >"$options_file"
}

# --- The nodes' network: one namespace per node on a bridge of this state directory ---
#
# Each cluster takes one /24 of 198.18.0.0/15 (RFC 2544's benchmark range, which no real network
# routes); its index I in 0-511 names everything it creates: the bridge dtrainI on the host, which
# holds 198.18.x.1 for slurmctld and srun, and for nodeK the namespace dtrainI-nodeK with eth0 at
# 198.18.x.1K, whose peer dtrainInK is a port of the bridge. No namespace gets a default route, and
# the host does not forward, so nothing leaves the machine. The bridge's alias records the state
# directory that owns it, so that two clusters never take the same subnet and down finds what a
# crashed up left behind even without cluster.options.
readonly net_index_count=512
readonly node_ifname=eth0

subnet_prefix() { echo "198.$((18 + $1 / 256)).$(($1 % 256))"; }
bridge_name() { echo "dtrain$1"; }
netns_name() { echo "dtrain$1-$2"; }
veth_name() { echo "dtrain$1n$(($2 + 1))"; }
node_address() { echo "$(subnet_prefix "$net_index").$((11 + $1))"; }
host_address() { echo "$(subnet_prefix "$net_index").1"; }

bridge_owner() {
  cat "/sys/class/net/$(bridge_name "$1")/ifalias" 2>/dev/null || true
}

# True when subnet index $1 is this state directory's or nobody's: no other bridge of ours owns
# it, no fabric bridge (of any cluster) uses it, and no other interface of the host holds an
# address in it.
net_index_available() {
  local index=$1 owner devices
  owner=$(bridge_owner "$index")
  if [[ -e "/sys/class/net/$(bridge_name "$index")" ]]; then
    [[ "$owner" == "$state_dir" ]]
    return
  fi
  [[ ! -e "/sys/class/net/$(fabric_bridge_name "$index")" ]] || return 1
  devices=$(ip -4 -o addr show to "$(subnet_prefix "$index").0/24" 2>/dev/null | awk '{ print $2 }')
  [[ -z "$devices" ]]
}

# Sets net_index: --subnet, else the one of the last up, else one derived from the state
# directory, moving on to the next free /24 when another cluster holds it.
choose_net_index() {
  local saved=$1 index tries
  if [[ -n "$opt_subnet" ]]; then
    index=$(subnet_index --subnet "$opt_subnet")
    net_index_available "$index" ||
      die "--subnet $opt_subnet is taken (bridge $(bridge_name "$index") of '$(bridge_owner "$index")', or another interface of this machine); pick another /24 in 198.18.0.0/15"
    net_index=$index
    return
  fi
  if [[ "$saved" =~ ^[0-9]+$ ]] && ((saved < net_index_count)) && net_index_available "$saved"; then
    net_index=$saved
    return
  fi
  index=$(($(printf '%s' "$state_dir" | cksum | cut -d' ' -f1) % net_index_count))
  for ((tries = 0; tries < net_index_count; tries++)); do
    if net_index_available "$index"; then
      net_index=$index
      return
    fi
    index=$(((index + 1) % net_index_count))
  done
  die "every /24 of 198.18.0.0/15 is taken by other clusters or interfaces; take some down first"
}

# subnet_index OPTION SUBNET: the index of SUBNET, a /24 in 198.18.0.0/15 given to OPTION.
subnet_index() {
  if [[ ! "$2" =~ ^198\.(18|19)\.([0-9]{1,3})\.0/24$ ]] || ((10#${BASH_REMATCH[2]} > 255)); then
    die "$1 '$2' is not a /24 in 198.18.0.0/15; give one like 198.18.7.0/24"
  fi
  echo $(((BASH_REMATCH[1] - 18) * 256 + 10#${BASH_REMATCH[2]}))
}

# Creates what is missing of the bridge, the namespaces and the veth pairs; keeps what exists.
net_up() {
  local bridge ns veth index
  bridge=$(bridge_name "$net_index")
  ((${#state_dir} < 256)) || die "state directory path is over 255 bytes, too long to record on bridge $bridge; use a shorter one"
  if [[ ! -e "/sys/class/net/$bridge" ]]; then
    ip link add "$bridge" type bridge 2>/dev/null ||
      die "cannot create bridge $bridge (ip link add ... type bridge): the nodes need their own network namespaces, which need root and a kernel with bridge and veth support"
  fi
  ip link set dev "$bridge" alias "$state_dir"
  ip addr replace "$(host_address)/24" dev "$bridge"
  ip link set dev "$bridge" up
  for index in "${!nodes[@]}"; do
    ns=$(netns_name "$net_index" "${nodes[index]}")
    veth=$(veth_name "$net_index" "$index")
    [[ -e "/run/netns/$ns" ]] || ip netns add "$ns" || die "cannot create network namespace $ns (ip netns add)"
    if [[ ! -e "/sys/class/net/$veth" ]]; then
      ip -n "$ns" link del "$node_ifname" 2>/dev/null || true
      ip link add "$veth" type veth peer name "$node_ifname" netns "$ns" ||
        die "cannot create the veth pair $veth/$node_ifname of $ns (ip link add ... type veth)"
    fi
    ip link set dev "$veth" master "$bridge" up
    ip -n "$ns" addr replace "$(node_address "$index")/24" dev "$node_ifname"
    ip -n "$ns" link set dev "$node_ifname" up
    ip -n "$ns" link set dev lo up
  done
  if profile_has fabric; then
    fabric_up
  else
    fabric_down
  fi
}

# The subnet indices whose bridge or namespaces belong to this state directory: the saved one
# and any bridge whose alias names this directory.
owned_net_indices() {
  local saved_net_index="" alias_file
  if [[ -f "$options_file" ]]; then
    # shellcheck disable=SC1090
    source <(grep -E '^saved_net_index=' "$options_file")
  fi
  {
    [[ -z "$saved_net_index" ]] || echo "$saved_net_index"
    for alias_file in /sys/class/net/dtrain*/ifalias; do
      [[ -f "$alias_file" && "$(cat "$alias_file" 2>/dev/null)" == "$state_dir" ]] || continue
      alias_file=${alias_file%/ifalias}
      echo "${alias_file##*/dtrain}"
    done
  } | grep -E '^[0-9]+$' | sort -un
}

# Removes the veth pairs, namespaces and bridge of every subnet this state directory owns. Run
# after stop_cluster, when no process is left inside the namespaces.
net_down() {
  local index node k
  fabric_down
  for index in $(owned_net_indices); do
    # Only a bridge that is ours, or none at all: a saved index may since belong to another cluster.
    if [[ -e "/sys/class/net/$(bridge_name "$index")" && "$(bridge_owner "$index")" != "$state_dir" ]]; then
      continue
    fi
    for k in "${!nodes[@]}"; do
      ip link del "$(veth_name "$index" "$k")" 2>/dev/null || true
      node=${nodes[k]}
      if [[ -e "/run/netns/$(netns_name "$index" "$node")" ]]; then
        ip netns del "$(netns_name "$index" "$node")" || note "warning: cannot remove network namespace $(netns_name "$index" "$node")"
      fi
    done
    ip link del "$(bridge_name "$index")" 2>/dev/null || true
  done
}

# One line per network object of this state directory, for status.
net_status() {
  local index k ns veth addr
  for index in $(owned_net_indices); do
    if [[ -e "/sys/class/net/$(bridge_name "$index")" ]]; then
      printf '%-14s bridge %s, %s.1/24\n' network "$(bridge_name "$index")" "$(subnet_prefix "$index")"
    else
      printf '%-14s bridge %s missing\n' network "$(bridge_name "$index")"
    fi
    for k in "${!nodes[@]}"; do
      ns=$(netns_name "$index" "${nodes[k]}")
      veth=$(veth_name "$index" "$k")
      if [[ -e "/run/netns/$ns" ]]; then
        addr=$(ip -n "$ns" -4 -o addr show dev "$node_ifname" 2>/dev/null | awk '{ print $4 }')
        printf '%-14s netns %s, %s %s, veth %s%s\n' "${nodes[k]}" "$ns" "$node_ifname" "${addr:-without an address}" \
          "$veth" "$([[ -e "/sys/class/net/$veth" ]] || echo ' missing')"
      else
        printf '%-14s netns %s missing\n' "${nodes[k]}" "$ns"
      fi
    done
  done
}

# --- The fabric profile: a second network, as real nodes have beside their management network ---
#
# Every node of a fabric cluster gets a second interface, fabric_ifname, at 198.18.y.1K in a /24
# of its own (index J, never the management one), whose host end dtrainfJnK is a port of a second
# bridge dtrainfJ, which holds 198.18.y.1 and records its state directory in its alias like the
# management bridge. Slurm keeps to the management addresses (slurm.conf's NodeAddr); the hosts
# files add nodeK-fab for the fabric addresses, which a plugin with suffix=-fab resolves. Faults:
# fabric-down takes the host end down, so the node's end loses its carrier as when a cable is
# pulled; blackhole drops TCP to one port of the fabric address with nftables in the node's own
# network namespace (table fabric_nft_table), which leaves the host's rules alone.
readonly fabric_nft_table=dtrain_fabric

fabric_bridge_name() { echo "dtrainf$1"; }
fabric_veth_name() { echo "dtrainf$1n$(($2 + 1))"; }
fabric_address() { echo "$(subnet_prefix "$fabric_index").$((11 + $1))"; }
fabric_host_address() { echo "$(subnet_prefix "$fabric_index").1"; }

fabric_bridge_owner() {
  cat "/sys/class/net/$(fabric_bridge_name "$1")/ifalias" 2>/dev/null || true
}

# True when subnet index $1 can carry this state directory's fabric: not its management subnet,
# no other cluster's bridge on it, and no other interface of the host with an address in it.
fabric_index_available() {
  local index=$1 devices
  [[ "$index" != "$net_index" ]] || return 1
  if [[ -e "/sys/class/net/$(fabric_bridge_name "$index")" ]]; then
    [[ "$(fabric_bridge_owner "$index")" == "$state_dir" ]]
    return
  fi
  [[ ! -e "/sys/class/net/$(bridge_name "$index")" ]] || return 1
  devices=$(ip -4 -o addr show to "$(subnet_prefix "$index").0/24" 2>/dev/null | awk '{ print $2 }')
  [[ -z "$devices" ]]
}

# Sets fabric_index: --fabric-subnet, else the one of the last up, else one derived from the
# state directory (half the range away from where the management subnet's search starts),
# moving on to the next free /24.
choose_fabric_index() {
  local saved=$1 index tries
  if [[ -n "$opt_fabric_subnet" ]]; then
    index=$(subnet_index --fabric-subnet "$opt_fabric_subnet")
    [[ "$index" != "$net_index" ]] || die "--fabric-subnet $opt_fabric_subnet is the management subnet; pick another /24 in 198.18.0.0/15"
    fabric_index_available "$index" ||
      die "--fabric-subnet $opt_fabric_subnet is taken (a bridge of another cluster, or another interface of this machine); pick another /24 in 198.18.0.0/15"
    fabric_index=$index
    return
  fi
  if [[ "$saved" =~ ^[0-9]+$ ]] && ((saved < net_index_count)) && fabric_index_available "$saved"; then
    fabric_index=$saved
    return
  fi
  index=$((($(printf '%s' "$state_dir" | cksum | cut -d' ' -f1) + net_index_count / 2) % net_index_count))
  for ((tries = 0; tries < net_index_count; tries++)); do
    if fabric_index_available "$index"; then
      fabric_index=$index
      return
    fi
    index=$(((index + 1) % net_index_count))
  done
  die "no /24 of 198.18.0.0/15 is free for the fabric; take other clusters down first"
}

# Creates what is missing of the fabric (bridge, veth pairs, addresses) and keeps what exists,
# including the state of each link: up does not undo a fabric-down (restart does).
fabric_up() {
  local bridge ns veth index
  bridge=$(fabric_bridge_name "$fabric_index")
  if [[ ! -e "/sys/class/net/$bridge" ]]; then
    ip link add "$bridge" type bridge 2>/dev/null || die "cannot create the fabric bridge $bridge (ip link add ... type bridge)"
  fi
  ip link set dev "$bridge" alias "$state_dir"
  ip addr replace "$(fabric_host_address)/24" dev "$bridge"
  ip link set dev "$bridge" up
  for index in "${!nodes[@]}"; do
    ns=$(netns_name "$net_index" "${nodes[index]}")
    veth=$(fabric_veth_name "$fabric_index" "$index")
    if [[ ! -e "/sys/class/net/$veth" ]]; then
      ip -n "$ns" link del "$fabric_ifname" 2>/dev/null || true
      ip link add "$veth" type veth peer name "$fabric_ifname" netns "$ns" ||
        die "cannot create the fabric veth pair $veth/$fabric_ifname of $ns (ip link add ... type veth)"
      ip link set dev "$veth" master "$bridge" up
    fi
    ip -n "$ns" addr replace "$(fabric_address "$index")/24" dev "$fabric_ifname"
    ip -n "$ns" link set dev "$fabric_ifname" up
  done
}

# The fabric subnet indices of this state directory: the saved one and any fabric bridge whose
# alias names this directory.
owned_fabric_indices() {
  local saved_fabric_index="" alias_file
  if [[ -f "$options_file" ]]; then
    # shellcheck disable=SC1090
    source <(grep -E '^saved_fabric_index=' "$options_file")
  fi
  {
    [[ -z "$saved_fabric_index" ]] || echo "$saved_fabric_index"
    for alias_file in /sys/class/net/dtrainf*/ifalias; do
      [[ -f "$alias_file" && "$(cat "$alias_file" 2>/dev/null)" == "$state_dir" ]] || continue
      alias_file=${alias_file%/ifalias}
      echo "${alias_file##*/dtrainf}"
    done
  } | grep -E '^[0-9]+$' | sort -un
}

# Removes the blackhole rules, the fabric veth pairs and the fabric bridge of this state
# directory, leaving the management network alone (up without --profile fabric calls it too).
fabric_down() {
  local index k ns
  if command -v nft >/dev/null; then
    for index in $(owned_net_indices); do
      for k in "${!nodes[@]}"; do
        ns=/run/netns/$(netns_name "$index" "${nodes[k]}")
        [[ -e "$ns" ]] || continue
        if nsenter "--net=$ns" nft list table inet "$fabric_nft_table" >/dev/null 2>&1; then
          nsenter "--net=$ns" nft delete table inet "$fabric_nft_table" ||
            note "warning: cannot remove the blackhole rules (nft table inet $fabric_nft_table) of ${nodes[k]}"
        fi
      done
    done
  fi
  for index in $(owned_fabric_indices); do
    if [[ -e "/sys/class/net/$(fabric_bridge_name "$index")" && "$(fabric_bridge_owner "$index")" != "$state_dir" ]]; then
      continue
    fi
    for k in "${!nodes[@]}"; do
      ip link del "$(fabric_veth_name "$index" "$k")" 2>/dev/null || true
    done
    ip link del "$(fabric_bridge_name "$index")" 2>/dev/null || true
  done
}

# "carrier C, operstate S" of fabric_ifname as the node sees them in its /sys/class/net (ip netns
# exec mounts the sysfs of the namespace named $1). Reading carrier fails (EINVAL) while the
# interface itself is administratively down: "carrier -".
fabric_link_state() {
  # shellcheck disable=SC2016 # expanded by the inner shell
  ip netns exec "$1" sh -c 'c=$(cat "/sys/class/net/$0/carrier" 2>/dev/null) || c=-
    echo "carrier $c, operstate $(cat "/sys/class/net/$0/operstate" 2>/dev/null || echo missing)"' "$fabric_ifname" 9>&-
}

# One line per fabric object of this state directory, for status: the bridge, then each node's
# interface with its address, carrier and operstate as the node sees them, and blackholed ports.
fabric_status() {
  local index k ns veth addr state ports management_index=${net_index:-}
  # status runs without load_options: the namespaces are those of the management subnet it owns.
  [[ -n "$management_index" ]] || management_index=$(owned_net_indices | sed -n 1p)
  for index in $(owned_fabric_indices); do
    if [[ -e "/sys/class/net/$(fabric_bridge_name "$index")" ]]; then
      printf '%-14s bridge %s, %s.1/24\n' fabric "$(fabric_bridge_name "$index")" "$(subnet_prefix "$index")"
    else
      printf '%-14s bridge %s missing\n' fabric "$(fabric_bridge_name "$index")"
      continue
    fi
    for k in "${!nodes[@]}"; do
      ns=/run/netns/$(netns_name "$management_index" "${nodes[k]}")
      veth=$(fabric_veth_name "$index" "$k")
      if [[ ! -e "$ns" || ! -e "/sys/class/net/$veth" ]]; then
        printf '%-14s fabric veth %s missing\n' "${nodes[k]}" "$veth"
        continue
      fi
      addr=$(nsenter "--net=$ns" ip -4 -o addr show dev "$fabric_ifname" 2>/dev/null | awk '{ print $4 }')
      state=$(fabric_link_state "${ns##*/}")
      ports=""
      if command -v nft >/dev/null; then
        ports=$({ nsenter "--net=$ns" nft list set inet "$fabric_nft_table" blackholed 2>/dev/null || true; } |
          sed -n 's/.*elements = { \(.*\) }.*/\1/p')
        if { nsenter "--net=$ns" nft list set inet "$fabric_nft_table" blackholed_ifaces 2>/dev/null || true; } |
          grep -q 'elements = '; then
          ports="${ports:+$ports, }all (every packet)"
        fi
      fi
      printf '%-14s %s %s, %s, veth %s%s\n' "${nodes[k]}" "$fabric_ifname" "${addr:-without an address}" "$state" "$veth" \
        "${ports:+, blackholed: $ports}"
    done
  done
}

# Checks that the cluster runs the fabric profile and has NODE's fabric link; sets fabric_ns
# (NODE's network namespace file), fabric_veth (the host end) and fabric_node_address.
require_fabric() {
  local node="$1" index
  profile_has fabric || die "$subcommand: the cluster of $state_dir runs profile $profile; fabric faults need a cluster started with --profile fabric"
  for index in "${!nodes[@]}"; do
    [[ "${nodes[index]}" == "$node" ]] && break
  done
  fabric_ns=/run/netns/$(netns_name "$net_index" "$node")
  fabric_veth=$(fabric_veth_name "$fabric_index" "$index")
  fabric_node_address=$(fabric_address "$index")
  [[ -e "$fabric_ns" && -e "/sys/class/net/$fabric_veth" ]] ||
    die "$subcommand: $node has no fabric link (network namespace $fabric_ns, veth $fabric_veth); start the cluster with up first"
}

# fabric-down/fabric-up NODE: the host end of the node's fabric veth goes down or up, so that the
# node's fabric_ifname loses or regains its carrier while staying administratively up; waits
# until the node sees the change and prints what it sees.
cmd_fabric_link() {
  local node="$1" direction="$2" state="" tries
  require_fabric "$node"
  ip link set dev "$fabric_veth" "$direction" || die "$subcommand: ip link set dev $fabric_veth $direction failed"
  for ((tries = 0; tries < 50; tries++)); do
    state=$(fabric_link_state "${fabric_ns##*/}")
    if [[ "$direction" == down && "$state" == "carrier 0,"* ]] || [[ "$direction" == up && "$state" == "carrier 1, operstate up" ]]; then
      note "$node's fabric link is $direction: its $fabric_ifname ($fabric_node_address) has $state (host end $fabric_veth)"
      return
    fi
    sleep 0.1
  done
  die "$subcommand: $node's $fabric_ifname still has $state 5 s after its host end $fabric_veth went $direction"
}

# blackhole/unblackhole NODE PORT: adds PORT to, or removes it from, the set of TCP ports whose
# packets to NODE's fabric address are dropped in NODE's network namespace. PORT "all" drops
# every packet in and out of NODE's fabric interface instead: a node whose link is up and which
# reaches nobody (a "black hole" node).
cmd_blackhole() {
  local node="$1" port="$2" action="$3"
  require_fabric "$node"
  command -v nft >/dev/null || die "$subcommand needs nft; install the Debian package nftables"
  local -a nft_in_node=(nsenter "--net=$fabric_ns" nft)
  local set=blackholed element="$port" what="TCP to $fabric_node_address:$port ($node$fabric_suffix)"
  if [[ "$port" == all ]]; then
    set=blackholed_ifaces
    element="\"$fabric_ifname\""
    what="every packet in and out of $node's $fabric_ifname ($fabric_node_address)"
  fi
  if [[ "$action" == add ]]; then
    # The chains hook input and output, before any socket sees a packet; the port rule names the
    # fabric address, so the same port on the management address still answers.
    "${nft_in_node[@]}" -f - <<NFT || die "$subcommand: nft refused the rules in $node's network namespace (a kernel without nf_tables?)"
table inet $fabric_nft_table {
  set blackholed {
    type inet_service
  }
  set blackholed_ifaces {
    type ifname
  }
  chain input {
    type filter hook input priority filter; policy accept;
  }
  chain output {
    type filter hook output priority filter; policy accept;
  }
}
NFT
    if ! "${nft_in_node[@]}" list chain inet "$fabric_nft_table" input | grep -q '@blackholed drop'; then
      "${nft_in_node[@]}" add rule inet "$fabric_nft_table" input ip daddr "$fabric_node_address" tcp dport @blackholed drop ||
        die "$subcommand: nft add rule failed in $node's network namespace"
    fi
    if ! "${nft_in_node[@]}" list chain inet "$fabric_nft_table" input | grep -q '@blackholed_ifaces drop'; then
      { "${nft_in_node[@]}" add rule inet "$fabric_nft_table" input iifname @blackholed_ifaces drop &&
        "${nft_in_node[@]}" add rule inet "$fabric_nft_table" output oifname @blackholed_ifaces drop; } ||
        die "$subcommand: nft add rule failed in $node's network namespace"
    fi
    "${nft_in_node[@]}" add element inet "$fabric_nft_table" "$set" "{ $element }" ||
      die "$subcommand: nft add element failed in $node's network namespace"
    note "$what is dropped in $node's network namespace"
  elif "${nft_in_node[@]}" delete element inet "$fabric_nft_table" "$set" "{ $element }" 2>/dev/null; then
    note "$what is no longer dropped"
  else
    note "$what was not blackholed"
  fi
}

# True when every running slurmd lives in its node's named network namespace; false after the
# namespaces were removed under a running cluster, which up must then restart.
daemons_in_their_netns() {
  local index pid
  for index in "${!nodes[@]}"; do
    pid=$(daemon_pid "slurmd.${nodes[index]}") || return 1
    [[ "$(file_identity "/proc/$pid/ns/net")" == "$(file_identity "/run/netns/$(netns_name "$net_index" "${nodes[index]}")")" ]] || return 1
  done
}

ensure_munge() {
  if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    return
  fi
  [[ -f /etc/munge/munge.key ]] || die "munge is not running and /etc/munge/munge.key is missing; create it with 'mungekey --create' (package munge)"
  note "starting munged"
  mkdir -p /run/munge
  chown munge:munge /run/munge
  # --force: a munged killed earlier leaves its socket behind, which would stop a plain start.
  su -s /bin/sh munge -c '/usr/sbin/munged --force </dev/null >/dev/null 2>&1' 9>&- ||
    die "munged failed to start; see /var/log/munge/munged.log"
  local tries
  for ((tries = 0; tries < 50; tries++)); do
    if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
      return
    fi
    sleep 0.2
  done
  die "munged started but does not answer; see /var/log/munge/munged.log"
}

# The node whose hosts file the debian-hosts profile writes as Debian's installer does.
readonly debian_hosts_node=node1

# Prints the hosts file of daemon $1 (slurmctld or slurmd.NODE). With debian-hosts, the node
# debian_hosts_node names itself 127.0.1.1 instead of its address, as Debian's installer writes
# /etc/hosts for a machine without a static address in DNS; every other node has the real one.
hosts_file_content() {
  local own_node=${1#slurmd.} index
  echo "# Written by slurm/local/cluster.sh: bind-mounted over /etc/hosts inside $1."
  echo "127.0.0.1 localhost"
  if profile_has debian-hosts && [[ "$own_node" == "$debian_hosts_node" ]]; then
    echo "127.0.1.1 $own_node"
  fi
  echo "::1 localhost ip6-localhost ip6-loopback"
  echo "$(host_address) $ctld_hostname"
  for index in "${!nodes[@]}"; do
    if profile_has debian-hosts && [[ "$own_node" == "$debian_hosts_node" && "${nodes[index]}" == "$own_node" ]]; then
      continue
    fi
    echo "$(node_address "$index") ${nodes[index]}"
  done
  if profile_has fabric; then
    # The fabric's names, which a plugin with suffix=$fabric_suffix resolves.
    for index in "${!nodes[@]}"; do
      echo "$(fabric_address "$index") ${nodes[index]}$fabric_suffix"
    done
  fi
}

hosts_file_of() {
  case "$1" in
    slurmctld) echo "$hosts_file" ;;
    slurmd.*) echo "$hosts_file.${1#slurmd.}" ;;
  esac
}

write_hosts_files() {
  local name file
  for name in $(daemon_names); do
    file=$(hosts_file_of "$name")
    hosts_file_content "$name" >"$file.new"
    mv "$file.new" "$file"
  done
}

# Prints slurm.conf for the current options on stdout.
#
# NoCtldInAddrAny keeps slurmctld, which runs in the host's network namespace, on the bridge
# address of its hostname. slurmd, slurmstepd and srun listen on the wildcard address, as on most
# sites: every node has a network namespace of its own, so that is its own eth0 and loopback,
# and an srun on the host is reached back through the bridge address its requests come from.
# Every node runs slurmd on the same port, as real nodes do.
#
# FirstJobId gives every cluster on this machine its own job ids (coexisting clusters have port
# bases at least 5 apart, so 5000 ids each; at most 65531000 < Slurm's MaxJobId of 67043328).
# Equal job ids across clusters would mean equal PMIx namespaces, hence equal Open MPI job ids on
# one machine, and equal fallback ports of the dtrain plugin, derived from the job id.
generate_conf() {
  cat <<EOF
# Written by slurm/local/cluster.sh; regenerated on every up. Do not edit: pass options instead.
ClusterName=dtrain
SlurmctldHost=$ctld_hostname($(host_address))
SlurmctldPort=$port_base
SlurmdPort=$((port_base + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
CommunicationParameters=NoCtldInAddrAny
StateSaveLocation=$state_dir/ctld
SlurmctldPidFile=$run_dir/slurmctld.pid
SlurmctldLogFile=$log_dir/slurmctld.log
SlurmdSpoolDir=$state_dir/spool/%n
SlurmdPidFile=$run_dir/slurmd.%n.pid
SlurmdLogFile=$log_dir/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$plugstack
SelectType=select/cons_tres
SlurmdParameters=config_overrides
MpiDefault=none
FirstJobId=$((port_base * 1000))
# Profile: $profile
EOF
  if profile_has cgroup; then
    echo "ProctrackType=proctrack/cgroup"
    echo "TaskPlugin=task/cgroup,task/affinity"
    # Every node claims 4 CPUs on a machine that may have 2. task/affinity's default binding
    # (to sockets here) then names CPUs that do not exist and the launch fails ("Unable to
    # layout tasks on given cpus"), so tasks are bound only on request (--cpu-bind); the
    # cgroup cpusets that ConstrainCores gives every step stay in force.
    echo "TaskPluginParam=None"
  else
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
  fi
  if profile_has pack; then
    echo "SelectTypeParameters=CR_Core,CR_Pack_Nodes"
  else
    echo "SelectTypeParameters=CR_CPU"
  fi
  if profile_has tmpfs; then
    # Contain: the job's namespace exists from its start (the extern step), as sites set it.
    echo "JobContainerType=job_container/tmpfs"
    echo "PrologFlags=Contain"
  fi
  if profile_has gres; then
    echo "GresTypes=gpu"
  fi
  if profile_has fabric; then
    # A requeued job may start again only once its credentials expired (slurm.conf(5),
    # cred_expire: 120 s by default); 15 s keeps the requeue tests short and is still ample for
    # a launch here.
    echo "AuthInfo=cred_expire=15"
  fi
  if [[ -n "$effective_resv_ports" ]]; then
    echo "MpiParams=ports=$effective_resv_ports"
  fi
  if [[ -n "$slurm_prefix" ]]; then
    echo "# Slurm $slurm_version of --slurm $slurm_prefix"
    echo "PluginDir=$slurm_prefix/lib/slurm"
  fi
  # Not a Slurm setting: recorded here so that up restarts the cluster when it changes.
  if [[ -n "$valgrind_node" ]]; then
    echo "# slurmstepd of $valgrind_node runs as: $(valgrind_command)"
  fi
  # Slurm's block layout gives the first node as many CPUs as the job may use there while leaving
  # one for each remaining node, so 4 CPUs per node is what makes `srun -N4 -n8` the uneven
  # 4,2,1(x2) (with 8 it would be 5,1(x3)). FORCE:2 lets two jobs share each CPU: two concurrent
  # jobs run at once on the same nodes, each with the layout it would get alone.
  cat <<EOF
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
KillWait=2
MessageTimeout=10
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=10
NodeName=DEFAULT CPUs=4 State=UNKNOWN$(profile_has gres && echo " Gres=gpu:$gres_gpus_per_node")
EOF
  local index
  for index in "${!nodes[@]}"; do
    echo "NodeName=${nodes[index]} NodeHostname=${nodes[index]} NodeAddr=$(node_address "$index")"
  done
  echo "PartitionName=main Nodes=node[1-${#nodes[@]}] Default=YES MaxTime=INFINITE OverSubscribe=FORCE:2 State=UP"
}

# Prints mpi.conf, which Slurm reads from the directory of slurm.conf.
#
# PMIxCollFence=ring: by default Slurm 22.05 runs a PMIx fence without data (the barrier at the
# end of Open MPI's MPI_Init) as a tree, and its tree maths (reverse_tree_info) gives every node
# no parent and no children when TreeWidth (default 50) exceeds the step's node count. Each node
# is then its own root and the fence waits only for that node's ranks: a rank leaves MPI_Init and
# sends to a peer still inside it, whose TCP BTL calls a receive callback that is not registered
# yet and crashes (tests/cluster, pmix-barrier). The ring fence waits for every node.
generate_mpi_conf() {
  echo "# Written by slurm/local/cluster.sh; regenerated on every up (why: generate_mpi_conf in cluster.sh)."
  if [[ "$pmix_fence" == ring ]]; then
    echo "PMIxCollFence=ring"
  else
    echo "# --pmix-fence slurm-default: Slurm chooses how fences run."
  fi
}

# Prints cgroup.conf, which Slurm reads from the directory of slurm.conf, or nothing when the
# cluster needs none. For --slurm without the cgroup profile: the emulated nodes share one
# machine, so no node may claim its cgroups (why: check_slurm_version).
generate_cgroup_conf() {
  if profile_has cgroup; then
    cat <<EOF
# Written by slurm/local/cluster.sh for --profile $profile; regenerated on every up.
CgroupPlugin=cgroup/v1
ConstrainCores=yes
EOF
  elif [[ -n "$slurm_prefix" ]]; then
    cat <<EOF
# Written by slurm/local/cluster.sh for --slurm; regenerated on every up (why: check_slurm_version).
CgroupPlugin=disabled
EOF
  fi
}

# Prints gres.conf for the gres profile, or nothing. Debian's Slurm has no NVML autodetection,
# so the devices are listed; they are character devices with the major of /dev/nvidiaN that
# start_daemon makes in every node's mount namespace, on a tmpfs over gres_dev_dir, because the
# host's /dev is one devtmpfs for all nodes and must not get fake GPUs.
generate_gres_conf() {
  profile_has gres || return 0
  cat <<EOF
# Written by slurm/local/cluster.sh for --profile $profile; regenerated on every up.
AutoDetect=off
Name=gpu File=$gres_dev_dir/nvidia[0-$((gres_gpus_per_node - 1))]
EOF
}

# Prints job_container.conf for the tmpfs profile, or nothing. Debian's Slurm is built for
# several slurmd per machine, and its tmpfs plugin then puts each node's job directories under
# BasePath/NODE, so one base path serves all nodes.
generate_job_container_conf() {
  profile_has tmpfs || return 0
  cat <<EOF
# Written by slurm/local/cluster.sh for --profile $profile; regenerated on every up.
AutoBasePath=true
BasePath=$job_container_dir
EOF
}

# The configuration files of the cluster, each with the function that prints it; an empty
# output means the file must not exist.
readonly generated_configs=(conf:generate_conf mpi_conf:generate_mpi_conf
  cgroup_conf:generate_cgroup_conf gres_conf:generate_gres_conf
  job_container_conf:generate_job_container_conf)

write_new_configs() {
  local entry file
  for entry in "${generated_configs[@]}"; do
    file=${entry%%:*}
    "${entry#*:}" >"${!file}.new"
  done
}

new_configs_unchanged() {
  local entry file
  for entry in "${generated_configs[@]}"; do
    file=${entry%%:*}
    file=${!file}
    if [[ -s "$file.new" ]]; then
      cmp -s "$file" "$file.new" || return 1
    else
      [[ ! -e "$file" ]] || return 1
    fi
  done
}

# keep: move the new files into place; drop: discard them.
settle_new_configs() {
  local entry file
  for entry in "${generated_configs[@]}"; do
    file=${entry%%:*}
    file=${!file}
    if [[ "$1" == keep && -s "$file.new" ]]; then
      mv "$file.new" "$file"
    else
      [[ "$1" == drop ]] || rm -f "$file"
      rm -f "$file.new"
    fi
  done
}

write_env_file() {
  local index
  cat >"$env_file.new" <<EOF
# Written by slurm/local/cluster.sh: source this to use the local cluster (srun, sinfo, Open MPI).
export DTRAIN_CLUSTER_DIR='$state_dir'
export DTRAIN_CLUSTER_PROFILE='$profile'
export SLURM_CONF='$conf'
# The nodes' network: the subnet, the host's (slurmctld's and srun's) address, each node's
# address, and the interface that carries it inside every node's namespace.
export DTRAIN_CLUSTER_SUBNET='$(subnet_prefix "$net_index").0/24'
export DTRAIN_CLUSTER_HOST_ADDRESS='$(host_address)'
export DTRAIN_CLUSTER_NODE_ADDRESSES='$(for index in "${!nodes[@]}"; do printf '%s=%s ' "${nodes[index]}" "$(node_address "$index")"; done | sed 's/ $//')'
export DTRAIN_CLUSTER_NODE_IFNAME='$node_ifname'
EOF
  if profile_has fabric; then
    cat >>"$env_file.new" <<EOF
# The fabric (--profile fabric): its subnet, the host's and each node's fabric address, the
# interface that carries it in every node, and the suffix of its names in the hosts files.
export DTRAIN_CLUSTER_FABRIC_SUBNET='$(subnet_prefix "$fabric_index").0/24'
export DTRAIN_CLUSTER_FABRIC_HOST_ADDRESS='$(fabric_host_address)'
export DTRAIN_CLUSTER_FABRIC_ADDRESSES='$(for index in "${!nodes[@]}"; do printf '%s=%s ' "${nodes[index]}" "$(fabric_address "$index")"; done | sed 's/ $//')'
export DTRAIN_CLUSTER_FABRIC_IFNAME='$fabric_ifname'
export DTRAIN_CLUSTER_FABRIC_SUFFIX='$fabric_suffix'
EOF
  fi
  cat >>"$env_file.new" <<EOF
# Keep Open MPI on the nodes' subnet over IPv4, and off UCX/OFI, which would probe for other
# networks.
export OMPI_MCA_btl_tcp_if_include='$(subnet_prefix "$net_index").0/24'
export OMPI_MCA_oob_tcp_if_include='$(subnet_prefix "$net_index").0/24'
export OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_tcp_disable_family=6
export OMPI_MCA_pml=ob1
export OMPI_MCA_osc='^ucx'
# Four emulated nodes share this machine's few cores: ranks that wait should yield them.
export OMPI_MCA_mpi_yield_when_idle=1
EOF
  if [[ -n "$slurm_prefix" ]]; then
    cat >>"$env_file.new" <<EOF
# This cluster runs Slurm $slurm_version of $slurm_prefix: its clients must come first, since
# Slurm talks only to its own and the two previous releases.
export PATH='$slurm_prefix/bin:$slurm_prefix/sbin':"\$PATH"
EOF
  fi
  mv "$env_file.new" "$env_file"
}

# The daemons, each with the directory bound on its /tmp. That bind is how every process of this
# cluster is recognised later (daemons, slurmstepd, tasks), even after a crash left no pid file.
daemon_names() {
  echo slurmctld "${nodes[@]/#/slurmd.}"
}

daemon_tmp_dir() {
  case "$1" in
    slurmctld) echo "$tmp_root/ctld" ;;
    slurmd.*) echo "$tmp_root/${1#slurmd.}" ;;
  esac
}

file_identity() {
  stat -L -c '%d:%i' "$1" 2>/dev/null
}

# Prints "NAME PID" for every process inside the namespaces of this state directory's daemons
# (NAME: slurmctld or nodeN): the daemons, their slurmstepd, batch scripts, sruns run there, tasks.
namespace_processes() {
  local -A names=()
  local name dir identity path
  for name in $(daemon_names); do
    dir=$(daemon_tmp_dir "$name")
    if identity=$(file_identity "$dir"); then
      names[$identity]=${name#slurmd.}
    fi
  done
  ((${#names[@]})) || return 0
  # The tasks of a job of job_container/tmpfs have the job's own /tmp; they are known by their
  # node's network namespace instead, which the job shares.
  local index saved_net_index=""
  if [[ -f "$options_file" ]]; then
    # shellcheck disable=SC1090
    source <(grep -E '^saved_net_index=' "$options_file")
  fi
  local current_net_index=${net_index:-$saved_net_index}
  if [[ -n "$current_net_index" ]]; then
    for index in "${!nodes[@]}"; do
      if identity=$(file_identity "/run/netns/$(netns_name "$current_net_index" "${nodes[index]}")"); then
        names[$identity]=${nodes[index]}
      fi
    done
  fi
  # One stat for all processes; the kernel resolves each /proc/PID/root in its own namespace.
  # It fails for processes that exit meanwhile, which are no longer of interest.
  { stat -L -c '%d:%i %n' /proc/[0-9]*/root/tmp /proc/[0-9]*/ns/net 2>/dev/null || true; } | while read -r identity path; do
    if [[ -n "${names[$identity]:-}" ]]; then
      path=${path#/proc/}
      echo "${names[$identity]} ${path%%/*}"
    fi
  done | sort -u -k2,2n
}

# Prints the pids of all processes that belong to this state directory.
cluster_pids() {
  {
    namespace_processes | cut -d' ' -f2
    # Daemons started some other way but still on this state directory's configuration.
    local pid_dir comm cmdline
    for pid_dir in /proc/[0-9]*; do
      { read -r comm <"$pid_dir/comm"; } 2>/dev/null || continue
      [[ "$comm" == slurm* ]] || continue
      cmdline=$({ tr '\0' ' ' <"$pid_dir/cmdline"; } 2>/dev/null) || continue
      if [[ " $cmdline " == *" $conf "* ]]; then
        echo "${pid_dir#/proc/}"
      fi
    done
  } | sort -un | grep -vx "$$" || true
}

stop_cluster() {
  local pids pid comm
  pids=$(cluster_pids)
  if [[ -n "$pids" ]]; then
    note "stopping $(wc -w <<<"$pids") processes of $state_dir"
    # The daemons get SIGTERM to shut down in order (slurmctld stops its own slurmscriptd); steps
    # and tasks of a stopped cluster are useless, and slurmstepd ignores SIGTERM: SIGKILL at once.
    for pid in $pids; do
      { read -r comm <"/proc/$pid/comm"; } 2>/dev/null || continue
      case "$comm" in
        slurmctld | slurmd) kill -TERM "$pid" 2>/dev/null || true ;;
        slurmscriptd) ;;
        *) kill -KILL "$pid" 2>/dev/null || true ;;
      esac
    done
    local tries
    for ((tries = 0; tries < 30; tries++)); do
      pids=$(cluster_pids)
      [[ -n "$pids" ]] || break
      sleep 0.1
    done
    if [[ -n "$pids" ]]; then
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
      for ((tries = 0; tries < 50; tries++)); do
        pids=$(cluster_pids)
        [[ -n "$pids" ]] || break
        sleep 0.1
      done
      [[ -z "$pids" ]] || die "processes $pids of $state_dir survive SIGKILL"
    fi
  fi
  rm -f "$run_dir"/*.pid
}

# Pid of a running daemon of this cluster, from its pid file; fails when it is not running.
daemon_pid() {
  local name="$1" pid
  pid=$(cat "$run_dir/$name.pid" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "${name%%.*}" ]] || return 1
  [[ "$(file_identity "/proc/$pid/root/tmp")" == "$(file_identity "$(daemon_tmp_dir "$name")")" ]] || return 1
  echo "$pid"
}

all_daemons_running() {
  local name
  for name in $(daemon_names); do
    daemon_pid "$name" >/dev/null || return 1
  done
}

port_in_use() {
  [[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]]
}

log_tails() {
  local file
  for file in "$log_dir"/*.log "$log_dir"/*.stdio; do
    [[ -s "$file" ]] || continue
    echo "----- tail of $file"
    tail -n 15 "$file"
  done
}

# slurmd execs the compiled-in path /usr/sbin/slurmstepd (PREFIX/sbin/slurmstepd of --slurm). For --valgrind-stepd, a wrapper that
# runs the real binary under memcheck is bind-mounted over that path inside one node's mount
# namespace only. The real binary is bind-mounted first onto a placeholder file (empty when seen
# from outside that namespace), because inside it the original path then names the wrapper.
# valgrind_command prints the wrapper's command line, without the program's arguments.
#
# --keep-debuginfo: Slurm unloads SPANK plugins before exit, and without it the plugin's frames
# in leak reports would be bare addresses. --error-exitcode: a stepd with errors exits 99
# (slurmd logs it); the logs are the verdict. --vgdb=no: no gdbserver FIFOs in the node's
# /tmp. %p: one log per process, forks included.
valgrind_command() {
  local suppressions=""
  [[ -z "$valgrind_suppressions" ]] || suppressions=" --suppressions=$(printf %q "$valgrind_suppressions")"
  echo "valgrind --tool=memcheck --leak-check=full --errors-for-leak-kinds=definite" \
    "--show-possibly-lost=no --keep-debuginfo=yes --error-exitcode=99 --num-callers=40" \
    "--vgdb=no$suppressions --log-file=$(printf %q "$valgrind_dir")/%p.log" \
    "$(printf %q "$valgrind_dir")/slurmstepd.real"
}

write_valgrind_wrapper() {
  mkdir -p "$valgrind_dir"
  : >"$valgrind_dir/slurmstepd.real"
  {
    echo '#!/bin/sh'
    echo "# Written by slurm/local/cluster.sh --valgrind-stepd: mounted over $slurmstepd_path on $valgrind_node."
    echo "exec $(valgrind_command) \"\$@\""
  } >"$valgrind_dir/slurmstepd.new"
  chmod 755 "$valgrind_dir/slurmstepd.new"
  mv "$valgrind_dir/slurmstepd.new" "$valgrind_dir/slurmstepd"
}

# Linux's autogroup schedules each session as one entity, and slurmstepd starts a session for
# every step on every node: on one machine each emulated node then gets the same share of the
# CPUs, whatever its task count. `srun -N4 -n8` ran node1's four tasks on an eighth of a core each
# and node3's one task on half a core, and every MPI collective went at the pace of node1. Real
# nodes give each task a CPU. Autogroup only applies to processes in the root CPU cgroup, so the
# daemons, and every step they start, go into a CPU cgroup of this state directory's own, where
# the kernel shares the CPUs task by task. Needs the cgroup v1 "cpu" hierarchy; without it (or
# outside the root CPU cgroup, as under systemd, where autogroup does not apply) nothing changes.
cpu_cgroup_dir() {
  local root
  root=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/ { print $2; exit }' /proc/mounts)
  [[ -n "$root" ]] || return 1
  echo "$root/dtrain-cluster-$(cksum <<<"$state_dir" | cut -d' ' -f1)"
}

autogroup_applies() {
  [[ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" == 1 ]] &&
    grep -Eq '^[0-9]+:([^:]*,)?cpu(,[^:]*)?:/$' /proc/self/cgroup
}

# Moves this script, and so every daemon it starts from now on, into the cluster's CPU cgroup.
enter_cpu_cgroup() {
  autogroup_applies || return 0
  local cgroup
  if cgroup=$(cpu_cgroup_dir) && mkdir -p "$cgroup" 2>/dev/null &&
    { echo $$ >"$cgroup/cgroup.procs"; } 2>/dev/null; then
    return 0
  fi
  note "warning: cannot start the daemons in a CPU cgroup of their own (no writable cgroup v1 cpu hierarchy); with the kernel's autogroup every node gets an equal CPU share, so nodes with more tasks run slower (sysctl kernel.sched_autogroup_enabled=0 avoids it)"
}

remove_cpu_cgroup() {
  local cgroup
  cgroup=$(cpu_cgroup_dir) || return 0
  [[ -d "$cgroup" ]] || return 0
  rmdir "$cgroup" 2>/dev/null || note "warning: CPU cgroup $cgroup still holds processes; left in place"
}

# Prints the CPU on which a new mount namespace gets the lowest id, or nothing when the kernel
# has no namespace ids (NS_GET_MNTNS_ID, Linux 6.9).
# Why: Linux 6.18 hands out namespace ids from per-CPU batches, so a namespace made on one CPU can
# carry a lower id than an older one made on another. nsfs refuses to bind-mount a mount
# namespace whose id is not above the caller's ("loop" check, EINVAL), and job_container/tmpfs
# does that for every job from inside its node's namespace: with the node's namespace made on
# the wrong CPU, half the jobs failed here ("_create_ns: ns base mount failed: Invalid
# argument"). A node made on the CPU whose next id is lowest is below every later namespace.
cpu_with_lowest_namespace_id() {
  python3 - <<'PY' 2>/dev/null || true
import ctypes, fcntl, os, struct
NS_GET_MNTNS_ID = 0x8008B705
CLONE_NEWNS = 0x00020000
libc = ctypes.CDLL(None, use_errno=True)
lowest = None
for cpu in sorted(os.sched_getaffinity(0)):
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.sched_setaffinity(0, {cpu})
            if libc.unshare(CLONE_NEWNS) == 0:
                fd = os.open("/proc/self/ns/mnt", os.O_RDONLY)
                reply = fcntl.ioctl(fd, NS_GET_MNTNS_ID, bytes(8))
                os.write(write_end, struct.unpack("Q", reply)[0].to_bytes(8, "little"))
        finally:
            os._exit(0)
    os.close(write_end)
    reply = os.read(read_end, 8)
    os.close(read_end)
    os.waitpid(pid, 0)
    if len(reply) == 8:
        ns_id = int.from_bytes(reply, "little")
        if lowest is None or ns_id < lowest[0]:
            lowest = (ns_id, cpu)
if lowest is not None:
    print(lowest[1])
PY
}

# Starts one daemon in fresh mount and UTS namespaces, a slurmd in its node's network namespace
# too (net_up made it); the daemon daemonizes and writes its pid file.
# setsid detaches it from the caller's session (ctest, a shell), and stdio goes to a file so that
# no caller waits on our pipes; the file keeps what a daemon says before its log file is open.
# With JOIN_PID, the daemon enters the namespaces of that process instead: a restarted slurmd
# joins the node its surviving steps live in, with the same /tmp, /dev/shm and mounts.
start_daemon() {
  local name="$1" hostname_in_ns="$2" join_pid="${3:-}" tmp_dir
  tmp_dir=$(daemon_tmp_dir "$name")
  local -a daemon_cmd net_enter=()
  local stepd_mode=native gpu_devices="" own_net_sysfs=""
  if [[ "$name" == slurmctld ]]; then
    # -c: start clean instead of looking for state files that start_cluster removed.
    daemon_cmd=(slurmctld -c -f "$conf")
  else
    daemon_cmd=(slurmd -f "$conf" -N "$hostname_in_ns")
    net_enter=(nsenter "--net=/run/netns/$(netns_name "$net_index" "$hostname_in_ns")" --)
    if [[ "$hostname_in_ns" == "$valgrind_node" ]]; then
      write_valgrind_wrapper
      stepd_mode=valgrind
    fi
    if profile_has gres; then
      mkdir -p "$gres_dev_dir"
      gpu_devices=$(seq -s ' ' 0 $((gres_gpus_per_node - 1)))
    fi
    # The host's sysfs lists the host's interfaces: a node of the fabric profile gets the
    # network directories of a sysfs mounted in its own network namespace, so that a check
    # on the node reads its own interfaces' carrier and operstate, as on a real node.
    profile_has fabric && own_net_sysfs=yes
  fi
  if [[ -n "$join_pid" ]]; then
    setsid nsenter --target "$join_pid" --mount --uts --net -- "${daemon_cmd[@]}" \
      </dev/null >>"$log_dir/$name.stdio" 2>&1 9>&-
    return
  fi
  # The namespaces are made on the CPU of cpu_with_lowest_namespace_id; the daemon gets back the
  # CPUs this script may use.
  local -a on_cpu=()
  local cpu all_cpus
  cpu=$(cpu_with_lowest_namespace_id)
  all_cpus=$(taskset -cp $$ | sed 's/.*: *//')
  [[ -z "$cpu" || -z "$all_cpus" ]] || on_cpu=(taskset -c "$cpu")
  # shellcheck disable=SC2016 # the inner script expands its own positional parameters
  setsid "${net_enter[@]}" "${on_cpu[@]}" unshare --mount --uts --propagation private -- /bin/sh -c '
    set -e
    [ -z "$9" ] || taskset -cp "$9" $$ >/dev/null
    hostname "$1"
    mount --bind "$2" /etc/hosts
    mount --bind "$3" /tmp
    mount -t tmpfs -o mode=1777,size=1g tmpfs /dev/shm
    if [ "$4" = valgrind ]; then
      mount --bind "$6" "$5/slurmstepd.real"
      mount --bind "$5/slurmstepd" "$6"
    fi
    if [ -n "$8" ]; then
      mount -t tmpfs -o mode=755,size=64k tmpfs "$7"
      for gpu in $8; do
        mknod -m 666 "$7/nvidia$gpu" c 195 "$gpu"
      done
    fi
    if [ -n "${10}" ]; then
      sysfs=$(mktemp -d -p /tmp)
      mount -t sysfs sysfs "$sysfs"
      mount --bind "$sysfs/class/net" /sys/class/net
      mount --bind "$sysfs/devices/virtual/net" /sys/devices/virtual/net
      umount -l "$sysfs"
      rmdir "$sysfs"
    fi
    shift 10
    exec "$@"' sh "$hostname_in_ns" "$(hosts_file_of "$name")" "$tmp_dir" "$stepd_mode" "$valgrind_dir" \
    "$slurmstepd_path" "$gres_dev_dir" "$gpu_devices" "$all_cpus" "$own_net_sysfs" \
    "${daemon_cmd[@]}" </dev/null >"$log_dir/$name.stdio" 2>&1 9>&-
}

# What each feature of a profile needs from the machine and its Slurm, for when it fails.
feature_needs() {
  case "$1" in
    reserved-ports) echo "MpiParams=ports needs a free port range on every node (--resv-ports A-B picks another)" ;;
    pack) echo "CR_Pack_Nodes needs select/cons_tres (or cons_res) with CR_Core" ;;
    cgroup) echo "task/cgroup and proctrack/cgroup need a writable cgroup v1 cpuset (or a cgroup v2) hierarchy, a Slurm built with --enable-multiple-slurmd so that each emulated node gets a cgroup tree of its own (slurm_<node>), and as many CPUs as CPUs= per node" ;;
    tmpfs) echo "job_container/tmpfs needs root, private mount namespaces and a BasePath on a file system that allows bind mounts" ;;
    gres) echo "gres/gpu needs the plugin gres_gpu.so and the File= devices of gres.conf in every node's mount namespace" ;;
    debian-hosts) echo "a node whose name resolves to 127.0.1.1 must still be reachable by slurmctld at its NodeAddr" ;;
    fabric) echo "a second bridge and a second veth pair per node, as the management network has; blackhole needs nft (Debian package nftables) and nf_tables in the kernel" ;;
  esac
}

# After a failed start with a profile: Slurm's own errors of this start, then what the profile's
# features need, since a profile may be one this machine cannot run.
explain_profile_failure() {
  [[ "$profile" != default ]] || return 0
  local errors feature
  # Fatal lines first: they name why a daemon stopped.
  errors=$({
    grep -h 'fatal:' "$log_dir"/*.log "$log_dir"/*.stdio 2>/dev/null
    grep -h 'error:' "$log_dir"/*.log "$log_dir"/*.stdio 2>/dev/null
  } | grep -v -E 'Could not open (job|reservation|trigger) state file|NOTE: Trying backup state save file|No (job|reservation|trigger) state file' |
    awk '!seen[$0]++' | head -n 8) || errors=""
  echo "dtrain: profile $profile did not start; Slurm says:" >&2
  local line
  while IFS= read -r line; do
    echo "dtrain:   $line" >&2
  done <<<"${errors:-(no error lines in $log_dir)}"
  echo "dtrain: what profile $profile needs here:" >&2
  for feature in reserved-ports pack cgroup tmpfs gres debian-hosts fabric; do
    profile_has "$feature" || continue
    echo "dtrain:   $feature: $(feature_needs "$feature")" >&2
  done
}

# Limits of a profile on this machine that Slurm only reports when a step runs.
warn_profile_limits() {
  local cpus
  cpus=$(nproc)
  if profile_has cgroup && ((cpus < 4)); then
    note "warning: profile $profile confines tasks to cores, but every node claims 4 CPUs and this machine has $cpus: tasks are bound only on request (TaskPluginParam=None), --cpu-bind to a CPU beyond $((cpus - 1)) fails, and jobs beyond the first $cpus on a node share CPUs"
  fi
}

wait_until_idle() {
  local deadline=$((SECONDS + wait_timeout)) states="" name
  while ((SECONDS < deadline)); do
    for name in $(daemon_names); do
      daemon_pid "$name" >/dev/null || {
        log_tails >&2
        explain_profile_failure
        die "$name of $state_dir exited during startup; see the log tails above and $log_dir"
      }
    done
    states=$(SLURM_CONF="$conf" sinfo -h -N -o '%N=%T' 2>/dev/null | sort -u | tr '\n' ' ') || states=""
    if [[ "$(grep -o '=idle' <<<"$states" | wc -l)" -eq ${#nodes[@]} ]]; then
      return
    fi
    sleep 0.3
  done
  log_tails >&2
  explain_profile_failure
  die "nodes of $state_dir not idle after ${wait_timeout}s (states: ${states:-no answer from slurmctld}); see the log tails above and $log_dir"
}

startup_failed() {
  log_tails >&2
  explain_profile_failure
  die "$1; see the log tails above and $log_dir"
}

start_cluster() {
  # Only slurmctld listens in the host's namespace; each slurmd has its node's to itself.
  if port_in_use "$port_base"; then
    die "port $port_base is already in use (another cluster or service?); choose other ports with --port-base N"
  fi
  note "starting slurmctld ($(host_address):$port_base) and ${#nodes[@]} slurmd (port $((port_base + 1)) on $(node_address 0)-$(node_address $((${#nodes[@]} - 1))))"
  # A fresh start: no job, step socket or credential from an earlier run may survive.
  rm -rf "$state_dir/ctld" "$state_dir/spool" "$tmp_root" "$job_container_dir"
  profile_has gres || rmdir "$gres_dev_dir" 2>/dev/null || true
  mkdir -p "$state_dir/ctld" "$run_dir" "$log_dir"
  # Fresh logs too, so that their tails show this start only.
  rm -f "$log_dir"/*.log "$log_dir"/*.stdio
  local name node
  for name in $(daemon_names); do
    mkdir -p "$(daemon_tmp_dir "$name")"
    chmod 1777 "$(daemon_tmp_dir "$name")"
  done
  for node in "${nodes[@]}"; do
    mkdir -p "$state_dir/spool/$node"
  done

  enter_cpu_cgroup
  # A daemon that rejects its configuration exits before it daemonizes, with its reason in its log.
  start_daemon slurmctld "$ctld_hostname" || startup_failed "slurmctld exited before it became a daemon"
  for node in "${nodes[@]}"; do
    start_daemon "slurmd.$node" "$node" || startup_failed "slurmd of $node exited before it became a daemon"
  done
  # The pid files appear once each daemon has read its configuration.
  local tries
  for ((tries = 0; tries < 100; tries++)); do
    all_daemons_running && return
    sleep 0.1
  done
  log_tails >&2
  explain_profile_failure
  die "daemons of $state_dir did not start; see the log tails above and $log_dir"
}

cmd_up() {
  local started=$SECONDS
  mkdir -p "$run_dir" "$log_dir"
  if [[ ! -e "$plugstack" ]]; then
    [[ "$plugstack" == "$state_dir/plugstack.conf" ]] || die "PlugStackConfig '$plugstack' does not exist; create it or pass --plugstack"
    : >"$plugstack"
  fi
  write_hosts_files
  write_env_file
  write_new_configs
  ensure_munge
  net_up

  if all_daemons_running && daemons_in_their_netns && new_configs_unchanged; then
    settle_new_configs drop
    note "cluster of $state_dir already running"
  else
    stop_cluster
    net_up
    settle_new_configs keep
    start_cluster
  fi
  wait_until_idle
  save_options
  warn_profile_limits
  note "cluster up in $((SECONDS - started))s; use it with: source $env_file"
}

cmd_status() {
  local name pid exit_status=0
  for name in $(daemon_names); do
    if pid=$(daemon_pid "$name"); then
      printf '%-14s running (pid %s)\n' "$name" "$pid"
    else
      printf '%-14s stopped\n' "$name"
      exit_status=1
    fi
  done
  net_status
  fabric_status
  if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    printf '%-14s running\n' munged
  else
    printf '%-14s not answering\n' munged
    exit_status=1
  fi
  if ((exit_status == 0)); then
    SLURM_CONF="$conf" sinfo || exit_status=1
  fi
  return "$exit_status"
}

# Stops one node's slurmd as `systemctl stop slurmd` would on a real node: SIGTERM to slurmd
# only, so its running steps keep their slurmstepd and tasks.
cmd_stop_node() {
  local node="$1" pid tries
  if ! pid=$(daemon_pid "slurmd.$node"); then
    note "slurmd of $node is not running"
    return
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for ((tries = 0; tries < 100; tries++)); do
    [[ -d "/proc/$pid" ]] || break
    sleep 0.1
  done
  [[ ! -d "/proc/$pid" ]] || die "slurmd of $node (pid $pid) still runs 10s after SIGTERM; see $log_dir/slurmd.$node.log"
  note "slurmd of $node stopped (pid $pid); its running steps were left alone"
}

# Starts one node's slurmd again and waits until slurmctld sees the node respond. While steps of
# the node survive, slurmd joins their namespaces, as a restarted slurmd shares its machine's.
cmd_start_node() {
  local node="$1" pid join_pid tries state=""
  [[ -f "$conf" ]] || die "no slurm.conf in $state_dir; start the cluster with up first"
  if pid=$(daemon_pid "slurmd.$node"); then
    note "slurmd of $node already runs (pid $pid)"
  else
    join_pid=$(namespace_processes | awk -v node="$node" '$1 == node { print $2; exit }')
    enter_cpu_cgroup
    start_daemon "slurmd.$node" "$node" "$join_pid"
    for ((tries = 0; tries < 100; tries++)); do
      daemon_pid "slurmd.$node" >/dev/null && break
      sleep 0.1
    done
    pid=$(daemon_pid "slurmd.$node") || {
      log_tails >&2
      die "slurmd of $node did not start; see the log tails above and $log_dir"
    }
    note "slurmd of $node started (pid $pid${join_pid:+, in the namespaces of its surviving process $join_pid})"
  fi
  # sinfo marks a node that does not answer with '*'; down and drain need ReturnToService=2.
  local deadline=$((SECONDS + wait_timeout))
  while ((SECONDS < deadline)); do
    state=$(SLURM_CONF="$conf" sinfo -h -n "$node" -N -o '%T' 2>/dev/null | head -n 1) || state=""
    [[ "$state" =~ ^(idle|mixed|allocated|completing)$ ]] && {
      note "$node is $state"
      return
    }
    sleep 0.3
  done
  die "$node not back after ${wait_timeout}s (state: ${state:-no answer from slurmctld}); see $log_dir/slurmd.$node.log and slurmctld.log"
}

# Runs exec_command in the namespaces of NODE's slurmd, or of any surviving process of the node
# while its slurmd is stopped.
cmd_exec() {
  local node="$1" pid
  pid=$(daemon_pid "slurmd.$node") ||
    pid=$(namespace_processes | awk -v node="$node" '$1 == node { print $2; exit }')
  [[ -n "$pid" ]] || die "exec: nothing of $node runs in $state_dir; start the cluster with up first"
  exec nsenter --target "$pid" --mount --uts --net -- "${exec_command[@]}" 9>&-
}

# One line per process of the cluster, "NAME PID COMMAND ARGS...", sorted by NAME and pid.
cmd_ps() {
  local name pid comm args
  namespace_processes | sort -k1,1 -k2,2n | while read -r name pid; do
    { read -r comm <"/proc/$pid/comm"; } 2>/dev/null || continue
    args=$({ tr '\0' ' ' <"/proc/$pid/cmdline" | sed 's/ *$//'; } 2>/dev/null) || continue
    echo "$name $pid ${comm// /_} $args"
  done
}

main() {
  parse_args "$@"
  setup_paths
  resolve_slurm_prefix
  case "$subcommand" in
    up)
      require_environment
      lock_state_dir
      load_options
      cmd_up
      ;;
    down)
      require_environment
      lock_state_dir
      stop_cluster
      net_down
      remove_cpu_cgroup
      note "cluster of $state_dir is down"
      ;;
    restart)
      require_environment
      lock_state_dir
      load_options
      stop_cluster
      net_down
      cmd_up
      ;;
    status) cmd_status ;;
    ps)
      require_environment
      cmd_ps
      ;;
    stop-node)
      require_environment
      lock_state_dir
      cmd_stop_node "$node_argument"
      ;;
    start-node)
      require_environment
      lock_state_dir
      load_options
      cmd_start_node "$node_argument"
      ;;
    exec)
      require_environment
      cmd_exec "$node_argument"
      ;;
    fabric-down | fabric-up)
      require_environment
      lock_state_dir
      load_options
      cmd_fabric_link "$node_argument" "${subcommand#fabric-}"
      ;;
    blackhole | unblackhole)
      require_environment
      lock_state_dir
      load_options
      cmd_blackhole "$node_argument" "$port_argument" "$([[ "$subcommand" == blackhole ]] && echo add || echo delete)"
      ;;
  esac
}

main "$@"
