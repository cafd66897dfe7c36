# SPDX-License-Identifier: Apache-2.0
"""Reads what tests/profiles/profile_checks.sh captured from the cluster of one site profile and
holds the expectations on it: profile_checks.py CHECK FILES... (see --help). Exits 1 with
`dtrain: check failed: ...` when an expectation does not hold."""
import errno
import os
import socket
import sys
import time
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
from checklib import add_check, arg, expect, expect_equal, new_parser, read_text, run_check  # noqa: E402


def cpu_set(cpu_list):
    """The CPUs of a kernel CPU list such as '0-2,5'."""
    cpus = set()
    for part in cpu_list.strip().split(","):
        low, _, high = part.partition("-")
        expect(low.isdigit() and (not high or high.isdigit()), f"'{cpu_list}' is not a CPU list")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def port_set(port_ranges):
    """The ports of a SLURM_STEP_RESV_PORTS value such as '29501-29505' or '29501,29503'."""
    return cpu_set(port_ranges)


def fields_by_key(path, key_count):
    """Lines of 'KEY... VALUE' into {KEY tuple: VALUE}; duplicate keys must agree."""
    result = {}
    for line in read_text(path).splitlines():
        words = line.split()
        if not words:
            continue
        expect(len(words) == key_count + 1, f"{path}: line '{line}' does not have {key_count + 1} fields")
        key, value = tuple(words[:key_count]), words[key_count]
        expect(result.get(key, value) == value, f"{path}: {key} has both {result.get(key)} and {value}")
        result[key] = value
    expect(result, f"{path} is empty")
    return result


def check_disjoint_cpus(args):
    """Two jobs that ran at once on one node: their allowed CPUs must not overlap, and each must be
    a proper subset of what the machine has (a real cpuset, not the whole machine)."""
    machine = cpu_set(args.machine_cpus)
    first, second = cpu_set(read_text(args.first)), cpu_set(read_text(args.second))
    expect(first and second, "a job has no allowed CPU")
    expect(first < machine, f"first job may use {sorted(first)}: not a proper subset of the machine's {sorted(machine)}")
    expect(second < machine, f"second job may use {sorted(second)}: not a proper subset of the machine's {sorted(machine)}")
    expect(not first & second, f"the two jobs share CPUs {sorted(first & second)} (first {sorted(first)}, second {sorted(second)})")
    print(f"dtrain: ok: concurrent jobs on one node run on disjoint cpusets {sorted(first)} and {sorted(second)} of {sorted(machine)}")


def cores_of(cpus):
    """Distinct (package, core) pairs of host CPUs, from sysfs."""
    def ids(cpu):
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        return tuple(read_text(f"{base}/{name}").strip() for name in ("physical_package_id", "core_id"))
    return {ids(cpu) for cpu in cpus}


def check_applied_cpus(args):
    """Tasks of concurrent jobs (lines 'CPUS_ALLOWED OMP_NUM_THREADS DTRAIN_CPU_LIST'): the plugin
    planned inside each job's cpuset, so DTRAIN_CPU_LIST is exactly the CPUs the task may run on,
    OMP_NUM_THREADS counts their cores, and the jobs' tasks do not overlap."""
    seen = {}
    for path in args.reports:
        for line in read_text(path).splitlines():
            allowed, threads, planned = line.split()
            expect_equal(f"DTRAIN_CPU_LIST of a task of {path}", cpu_set(planned), cpu_set(allowed))
            expect_equal(f"OMP_NUM_THREADS of a task of {path} (cores of {allowed})", int(threads),
                         len(cores_of(cpu_set(allowed))))
            for cpu in cpu_set(allowed):
                expect(cpu not in seen, f"CPU {cpu} is bound in {seen.get(cpu)} and in {path}")
                seen[cpu] = path
    print(f"dtrain: ok: each task's DTRAIN_CPU_LIST and OMP_NUM_THREADS are the cpuset it runs on ({sorted(seen)})")


def check_resv_ports(args):
    """One step's SLURM_STEP_RESV_PORTS (lines 'NODE RANK PORTS'): the same on every task, with
    (most tasks on one node + 1) ports inside MpiParams=ports=LOW-HIGH; a concurrent step's ports
    (lines of --other) are disjoint from them."""
    low, high = (int(port) for port in args.range.split("-"))
    values = {ports for (_node, _rank), ports in fields_by_key(args.ports, 2).items()}
    expect_equal("distinct SLURM_STEP_RESV_PORTS values of the step", len(values), 1)
    ports = port_set(values.pop())
    expect_equal("reserved ports of the step", len(ports), args.count)
    expect(all(low <= port <= high for port in ports), f"ports {sorted(ports)} leave MpiParams=ports={args.range}")
    print(f"dtrain: ok: the step holds ports {min(ports)}-{max(ports)} of {args.range}")
    if args.other:
        other_values = set(fields_by_key(args.other, 2).values())
        expect_equal("distinct SLURM_STEP_RESV_PORTS values of the concurrent step", len(other_values), 1)
        other = port_set(other_values.pop())
        expect(not ports & other, f"two concurrent steps share reserved ports {sorted(ports & other)}")
        print(f"dtrain: ok: a concurrent step holds other ports: {sorted(other)}")


def gpu_bus_ids(topology_path):
    """PCI bus ids of the GPUs (PCI devices with a cuda or nvml OS device) of an hwloc XML."""
    ids = []
    for pci in ElementTree.parse(topology_path).iter("object"):
        if pci.get("type") != "PCIDev":
            continue
        if any(child.get("type") == "OSDev" and (child.get("name") or "").startswith(("cuda", "nvml"))
               for child in pci.findall("object")):
            ids.append(pci.get("pci_busid"))
    return ids


def check_gpu_bus_ids(args):
    """Tasks of one node (lines 'RANK BUS_ID,BUS_ID...'): each task got GPUs of its own, and
    together they hold exactly the GPUs of the topology XML that the plugin reads."""
    expected = sorted(gpu_bus_ids(args.topology))
    expect_equal("GPUs in the topology XML", len(expected), args.gpus)
    by_task = {rank: value.split(",") for (rank,), value in fields_by_key(args.bus_ids, 1).items()}
    seen = []
    for rank, ids in sorted(by_task.items()):
        expect(set(ids).isdisjoint(seen), f"task {rank} shares GPUs {sorted(set(ids) & set(seen))} with another task")
        seen.extend(ids)
    expect_equal("GPUs bound by the node's tasks", sorted(seen), expected)


def check_gpu_view(args):
    """Two concurrent jobs on one node (lines 'LOCALID STEP_GPUS VISIBLE DEVICE BUS_ID'), each of
    one-GPU tasks: every task sees exactly its job's GPUs (the node view), its DTRAIN_CUDA_DEVICE
    is its local rank, and the entry there is the GPU it was bound to (DTRAIN_GPU_BUS_IDS, which
    its CPUs and NIC follow); the two jobs' GPUs are disjoint."""
    node_gpus = sorted(gpu_bus_ids(args.topology))
    held = []
    for path in (args.first, args.second):
        with open(path) as f:
            lines = [line.split() for line in f if line.strip()]
        expect(len(lines) == 2 and all(len(fields) == 5 for fields in lines),
               f"{path}: expected two task lines of 5 fields, got {lines}")
        step_gpus = sorted({fields[1] for fields in lines})
        expect(len(step_gpus) == 1, f"{path}: the tasks report different SLURM_STEP_GPUS {step_gpus}")
        own = [int(i) for i in step_gpus[0].split(",")]
        expect(len(own) == 2, f"{path}: SLURM_STEP_GPUS={step_gpus[0]} is not two GPUs")
        for local, _, visible, device, bus_id in lines:
            numbers = [int(i) for i in visible.split(",")]
            # Numbered on the whole node when Slurm lists the step's node indices, else renumbered
            # from 0 among the step's GPUs (ConstrainDevices).
            on_node = sorted(numbers) == sorted(own)
            seen = [node_gpus[n] if on_node else node_gpus[sorted(own)[n]] for n in numbers]
            expect(sorted(seen) == sorted(node_gpus[i] for i in own),
                   f"{path}: task {local} sees {seen}, not exactly its job's GPUs")
            expect(device == local, f"{path}: task {local} has DTRAIN_CUDA_DEVICE={device}")
            expect(seen[int(device)] == bus_id,
                   f"{path}: task {local}: entry {device} of CUDA_VISIBLE_DEVICES={visible} is "
                   f"{seen[int(device)]}, but it was bound to {bus_id}")
        held.append({node_gpus[i] for i in own})
    expect(held[0].isdisjoint(held[1]), f"the two jobs share GPUs {sorted(held[0] & held[1])}")
    print(f"dtrain: ok: two concurrent jobs see only their own GPUs {sorted(held[0])} and "
          f"{sorted(held[1])}; device LOCAL_RANK is each task's bound GPU")


def address_map(entries):
    """'node1=A node2=B ...' (env.sh's DTRAIN_CLUSTER_*ADDRESSES) into {node: address}."""
    return dict(entry.split("=", 1) for entry in entries.split() if "=" in entry)


def check_fabric_endpoints(args):
    """Tasks of an `srun -N4 -n4 --distributed-train` step (lines 'NODE MASTER_ADDR
    DTRAIN_MASTER_ADDR DTRAIN_ENDPOINTS'): with suffix=-fab every endpoint is on a fabric
    address, node by node in the step's order, and MASTER_ADDR is rank 0's fabric address."""
    fabric, management = address_map(args.fabric), address_map(args.management)
    expect(len(fabric) == 4 and len(management) == 4, f"--fabric {args.fabric!r} or --management {args.management!r} lacks a node")
    lines = [line.split() for line in read_text(args.tasks).splitlines() if line.strip()]
    expect(len(lines) == 4 and all(len(words) == 4 for words in lines),
           f"{args.tasks}: expected 4 lines 'NODE MASTER_ADDR DTRAIN_MASTER_ADDR DTRAIN_ENDPOINTS'")
    expect_equal("nodes of the step's tasks", sorted(words[0] for words in lines), sorted(fabric))
    expected = ",".join(f"{fabric[node]}:" for node in sorted(fabric))
    for node, master, dtrain_master, endpoints in lines:
        hosts = ",".join(endpoint.rpartition(":")[0] + ":" for endpoint in endpoints.split(","))
        expect(hosts == expected, f"DTRAIN_ENDPOINTS of {node}'s task is {endpoints}: its hosts are not "
               f"the fabric addresses {expected} (management: {sorted(management.values())})")
        expect_equal(f"MASTER_ADDR of {node}'s task (node1's fabric address)", master, fabric["node1"])
        expect_equal(f"DTRAIN_MASTER_ADDR of {node}'s task", dtrain_master, fabric["node1"])
    print(f"dtrain: ok: every task's DTRAIN_ENDPOINTS is on the fabric: {lines[0][3]}")


def check_connect(args):
    """One TCP connect, run on a node (cluster.sh exec): --expect connects (retried for up to
    --limit seconds, a liveness bound), fails (no connection within --limit seconds, by error or
    timeout) or times-out (no answer at all: no reset, no ICMP error, for --limit seconds)."""
    started = time.monotonic()
    outcome = None
    while True:
        with socket.socket() as sock:
            sock.settimeout(max(0.1, args.limit - (time.monotonic() - started)))
            try:
                sock.connect((args.address, args.port))
                outcome = "connected"
            except socket.timeout:
                outcome = "timed out"
            except OSError as error:
                outcome = errno.errorcode.get(error.errno, str(error.errno))
        took = time.monotonic() - started
        if outcome == "connected" or args.expect != "connects" or took >= args.limit:
            break
        time.sleep(0.2)
    what = f"TCP connect to {args.address}:{args.port} from {socket.gethostname()} ({args.what})"
    if args.expect == "connects":
        expect(outcome == "connected", f"{what}: {outcome} after {took:.2f} s, expected a connection")
    elif args.expect == "fails":
        expect(outcome != "connected", f"{what} connected after {took:.2f} s, expected it to fail")
    else:
        expect(outcome == "timed out", f"{what}: {outcome} after {took:.2f} s, expected no answer for {args.limit} s")
    print(f"dtrain: ok: {what}: {outcome} after {took:.2f} s")


def main():
    parser, checks = new_parser(__doc__)
    add_check(checks, "disjoint-cpus", check_disjoint_cpus, check_disjoint_cpus.__doc__,
              arg("first"), arg("second"),
              arg("--machine-cpus", required=True, help="the machine's CPU list"))
    add_check(checks, "applied-cpus", check_applied_cpus, check_applied_cpus.__doc__,
              arg("reports", nargs="+"))
    add_check(checks, "resv-ports", check_resv_ports, check_resv_ports.__doc__,
              arg("ports"), arg("--range", required=True), arg("--count", type=int, required=True),
              arg("--other"))
    add_check(checks, "gpu-bus-ids", check_gpu_bus_ids, check_gpu_bus_ids.__doc__,
              arg("bus_ids"), arg("--topology", required=True), arg("--gpus", type=int, required=True))
    add_check(checks, "gpu-view", check_gpu_view, check_gpu_view.__doc__,
              arg("first"), arg("second"), arg("--topology", required=True))
    add_check(checks, "fabric-endpoints", check_fabric_endpoints, check_fabric_endpoints.__doc__,
              arg("tasks"), arg("--fabric", required=True), arg("--management", required=True))
    add_check(checks, "connect", check_connect, check_connect.__doc__,
              arg("address"), arg("port", type=int),
              arg("--expect", required=True, choices=["connects", "fails", "times-out"]),
              arg("--limit", type=float, required=True), arg("--what", required=True))
    run_check(parser)


if __name__ == "__main__":
    main()
