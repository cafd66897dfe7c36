#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Cluster checks of the plugin's GPU/NIC/CPU binding: real srun steps with spank_dtrain.so loaded
with topology= a fixture XML, checking every task's environment and the CPU affinity in force.

Usage: check_binding_steps.py CHECK
Needs what tests/plugin/check_plugin_steps.py needs (SLURM_CONF and DTRAIN_CLUSTER_DIR from the
cluster's env.sh, DTRAIN_PLUGIN); each check loads the plugin with its own plugstack.conf arguments
and restores the file afterwards. Exits 77 (skipped) when this host lacks the CPUs a check needs.

The CPUs Slurm allows a task are measured, not assumed: a step of the same shape without
--distributed-train reports each task's Cpus_allowed_list. With the option, the applied affinity
must be the plan (DTRAIN_CPU_LIST) intersected with that, or unchanged when the intersection is
empty.
"""
import os
import shlex
import sys
import tempfile
from xml.etree import ElementTree

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # keep the source tree clean of __pycache__
sys.path.insert(0, os.path.join(HERE, "..", "plugin"))
from check_plugin_steps import (CheckFailed, check_step, expect, plugstack_args, report_dir,  # noqa: E402
                                reports, run, PLUGSTACK, REPORTER, STATE)

FIXTURES = os.path.realpath(os.path.join(HERE, "..", "fixtures", "topologies"))
DGX = os.path.join(FIXTURES, "dgx-h100.xml")
TWO_CPU = os.path.join(FIXTURES, "two-cpu-two-gpu.xml")
SKIPPED = 77

BINDING_NAMES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NCCL_IB_HCA", "UCX_NET_DEVICES",
                 "NCCL_SOCKET_IFNAME", "DTRAIN_NIC", "OMP_NUM_THREADS", "DTRAIN_CPU_LIST",
                 "DTRAIN_GPU_BUS_IDS", "DTRAIN_CUDA_DEVICE")
# NCCL_IB_HCA on a DGX H100: one value for every task, the eight compute HCAs, not the storage pair.
DGX_FABRIC = "=" + ",".join(f"mlx5_{i}:1" for i in range(8))
# Inputs of the binding that must come only from what a check sets.
SCRUBBED = BINDING_NAMES + ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS")
# The checks count warnings; a busy-port warning caused by an unrelated process would be noise.
QUIET_PORTS = "check_ports=off"
UNCHANGED = "CPU affinity left unchanged"


class Skipped(Exception):
    pass


def cpu_set(text):
    """Linux CPU list syntax ("0-13,112-125") to a set."""
    cpus = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def step_environment(**extra):
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env.update(extra)
    return env


def srun(args, env, option=True, hosts=None):
    out = report_dir()
    cmd = ["srun", *(["--distributed-train"] if option else []), *args,
           *([f"--nodelist={','.join(sorted(hosts))}"] if hosts else []), "/usr/bin/python3",
           REPORTER, out]
    proc = run(cmd, env=env)
    return reports(out), proc.stderr


def warnings_in(stderr):
    return [line for line in stderr.splitlines() if "dtrain:" in line]


class Allowed(dict):
    """What Slurm lets each task of a step shape run on, keyed by (host, local id)."""

    def hosts(self):
        return {host for host, _ in self}

    def of(self, task):
        key = (task["host"], task["SLURM_LOCALID"])
        expect(key in self, f"rank {task['SLURM_PROCID']} ran as local task {key[1]} on {key[0]}, "
                            f"which the step without the option did not use: {sorted(self)}")
        return self[key]


def allowed_cpus(args, env):
    tasks, _ = srun(args, env, option=False)
    return Allowed({(t["host"], t["SLURM_LOCALID"]): cpu_set(t["cpus_allowed"]) for t in tasks})


def bound_step(args, env, allowed):
    """The step with --distributed-train, on the nodes where `allowed` was measured."""
    return srun(args, env, hosts=allowed.hosts())


def check_affinity(tasks, allowed, stderr):
    """Applied = plan ∩ allowed; an empty intersection leaves it unchanged, with a warning."""
    any_unchanged = False
    for t in tasks:
        where = f"rank {t['SLURM_PROCID']} on {t['host']}"
        slurm_allowed = allowed.of(t)
        planned = cpu_set(t["DTRAIN_CPU_LIST"])
        applied = cpu_set(t["cpus_allowed"])
        expect(applied <= slurm_allowed,
               f"{where}: affinity {t['cpus_allowed']} is not within the CPUs Slurm allowed "
               f"{sorted(slurm_allowed)}")
        expected = planned & slurm_allowed or slurm_allowed
        any_unchanged = any_unchanged or not planned & slurm_allowed
        expect(applied == expected,
               f"{where}: affinity {t['cpus_allowed']}, expected {sorted(expected)} "
               f"(plan {t['DTRAIN_CPU_LIST']} ∩ allowed {sorted(slurm_allowed)})")
    said = any(UNCHANGED in w for w in warnings_in(stderr))
    expect(said == any_unchanged,
           f"tasks whose plan has none of their allowed CPUs: {any_unchanged}; "
           f"'{UNCHANGED}' warned: {said}. srun's stderr:\n{stderr or '(empty)'}")


def check_nothing_else_warned(stderr, allow=(UNCHANGED,)):
    others = [w for w in warnings_in(stderr) if not any(a in w for a in allow)]
    expect(not others, "unexpected warnings:\n" + "\n".join(others))


def by_node(tasks):
    nodes = {}
    for t in tasks:
        nodes.setdefault(t["host"], []).append(t)
    return nodes


# The compute NICs' netdevs in GPU order (tests/topology/test_fixture_bindings.cpp, kDgxNetdevs).
DGX_NETDEVS = ["ibp24s0", "ibp64s0", "ibp79s0", "ibp94s0", "ibp154s0", "ibp192s0", "ibp206s0",
               "ibp220s0"]


def check_dgx_eight():
    # Slurm refuses --ntasks-per-node above the node's CPUs even with --overcommit; -n16 -O lays
    # out 8(x2) all the same, which the check confirms.
    args = ["-N2", "-n16", "--overcommit"]
    env = step_environment()
    with plugstack_args(f"topology={DGX}", QUIET_PORTS):
        allowed = allowed_cpus(args, env)
        tasks, stderr = bound_step(args, env, allowed)
    check_step(tasks)
    nodes = by_node(tasks)
    expect(len(nodes) == 2 and all(len(n) == 8 for n in nodes.values()),
           f"expected 8 tasks on each of 2 nodes, got { {h: len(n) for h, n in nodes.items()} }")
    # Where the step's cpuset is smaller than this machine (cgroup profiles), the plugin plans
    # inside it: the DGX's 14-core shares then cannot be, and each task's CPUs must lie in it.
    with open("/sys/devices/system/cpu/online") as f:
        machine = cpu_set(f.read().strip())
    for t in tasks:
        local = int(t["SLURM_LOCALID"])
        first = 14 * local
        # The node view: every task sees the 8 GPUs, device LOCAL_RANK its own.
        want = {
            "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
            "DTRAIN_CUDA_DEVICE": str(local),
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "NCCL_IB_HCA": DGX_FABRIC,
            "DTRAIN_NIC": f"mlx5_{local}:1",
            "UCX_NET_DEVICES": f"mlx5_{local}:1",
            "NCCL_SOCKET_IFNAME": "=" + DGX_NETDEVS[local],
        }
        if allowed.of(t) == machine:
            want["OMP_NUM_THREADS"] = "14"
            want["DTRAIN_CPU_LIST"] = f"{first}-{first + 13},{112 + first}-{125 + first}"
        else:
            expect(cpu_set(t["DTRAIN_CPU_LIST"]) <= allowed.of(t),
                   f"rank {t['SLURM_PROCID']}: DTRAIN_CPU_LIST={t['DTRAIN_CPU_LIST']} leaves the step's "
                   f"cpuset {sorted(allowed.of(t))}")
        for name, value in want.items():
            expect(t.get(name) == value, f"rank {t['SLURM_PROCID']} (local {local}) on {t['host']}: "
                                         f"{name}={t.get(name)!r}, expected {value!r}")
    check_affinity(tasks, allowed, stderr)
    confined = any(allowed.of(t) != machine for t in tasks)
    # Confined to fewer CPUs than the DGX's domains, the plan says so: the shares are cut from the
    # step's CPUs and tasks share them.
    check_nothing_else_warned(stderr, allow=(UNCHANGED, "has none of the CPUs the step may use",
                                             "some tasks get the same CPU") if confined else (UNCHANGED,))
    # The same step with per-task isolation chosen for it: device 0 is each task's own GPU.
    with plugstack_args(f"topology={DGX}", QUIET_PORTS):
        isolated, _ = bound_step(args + ["--distributed-train-gpu-view=task"], env, allowed)
    check_step(isolated)
    for t in isolated:
        local = int(t["SLURM_LOCALID"])
        for name, value in (("CUDA_VISIBLE_DEVICES", str(local)), ("DTRAIN_CUDA_DEVICE", "0"),
                            ("DTRAIN_NIC", f"mlx5_{local}:1")):
            expect(t.get(name) == value, f"--distributed-train-gpu-view=task: rank {t['SLURM_PROCID']} "
                                         f"(local {local}): {name}={t.get(name)!r}, expected {value!r}")
    print("dtrain: ok: DGX XML, 2x8 tasks: all 8 GPUs visible, device t = GPU t (t = LOCAL_RANK), "
          "DTRAIN_NIC mlx5_t, NCCL_IB_HCA mlx5_0-7 on every task; with "
          "--distributed-train-gpu-view=task, GPU t alone as device 0; " +
          ("CPUs inside the step's cpuset" if confined else "cores 14t.. and 112+14t..") +
          ", affinity = plan ∩ allowed CPUs")


# The GPUs at PCI positions 2, 3 and 6 of the DGX, one per task: HCA, CPU share and OMP threads.
RESTRICTED = [("mlx5_2", "0-27,112-139", "28"), ("mlx5_3", "28-55,140-167", "28"),
              ("mlx5_6", "56-111,168-223", "56")]


def check_restricted_gpus():
    args = ["-N2", "--ntasks-per-node=3"]
    # Slurm's gres sets SLURM_STEP_GPUS to node indices; with ConstrainDevices the task sees only
    # those GPUs and CUDA_VISIBLE_DEVICES is renumbered from 0.
    # One GPU per task: every task sees the step's three (node view), device LOCAL_RANK its own.
    cases = {"constrained": ("0,1,2", "0,1,2"), "unconstrained": ("2,3,6", "2,3,6")}
    with plugstack_args(f"topology={DGX}", QUIET_PORTS):
        allowed = allowed_cpus(args, step_environment())
        for case, (visible, expected) in cases.items():
            env = step_environment(SLURM_STEP_GPUS="2,3,6", CUDA_VISIBLE_DEVICES=visible)
            tasks, stderr = bound_step(args, env, allowed)
            check_step(tasks)
            for t in tasks:
                local = int(t["SLURM_LOCALID"])
                hca, cpus, threads = RESTRICTED[local]
                want = {"CUDA_VISIBLE_DEVICES": expected, "DTRAIN_CUDA_DEVICE": str(local),
                        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                        "NCCL_IB_HCA": DGX_FABRIC, "DTRAIN_NIC": f"{hca}:1", "DTRAIN_CPU_LIST": cpus,
                        "OMP_NUM_THREADS": threads}
                for name, value in want.items():
                    expect(t.get(name) == value,
                           f"{case} (CUDA_VISIBLE_DEVICES={visible}): rank {t['SLURM_PROCID']} "
                           f"(local {local}): {name}={t.get(name)!r}, expected {value!r}")
            check_affinity(tasks, allowed, stderr)
            check_nothing_else_warned(stderr)
    print("dtrain: ok: SLURM_STEP_GPUS=2,3,6 gives every task GPUs 0,1,2 when constrained and 2,3,6 "
          "when not, device LOCAL_RANK its own (HCA and CPUs of that GPU)")


def check_xml_affinity_applied():
    args = ["-N2", "--ntasks-per-node=2"]
    env = step_environment()
    with plugstack_args(f"topology={TWO_CPU}", QUIET_PORTS):
        allowed = allowed_cpus(args, env)
        if not all({0, 1} <= cpus for cpus in allowed.values()):
            raise Skipped(f"tasks here may not run on both CPUs 0 and 1 (allowed: {allowed}); "
                          "the two-CPU fixture cannot show its affinity being applied")
        tasks, stderr = bound_step(args, env, allowed)
    check_step(tasks)
    for t in tasks:
        local = int(t["SLURM_LOCALID"])
        want = {"CUDA_VISIBLE_DEVICES": "0,1", "DTRAIN_CUDA_DEVICE": str(local),
                "NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1",
                "DTRAIN_NIC": f"mlx5_{local}:1",
                "NCCL_SOCKET_IFNAME": f"=ib{local}", "DTRAIN_CPU_LIST": str(local),
                "OMP_NUM_THREADS": "1", "cpus_allowed": str(local)}
        for name, value in want.items():
            expect(t.get(name) == value, f"rank {t['SLURM_PROCID']} (local {local}) on {t['host']}: "
                                         f"{name}={t.get(name)!r}, expected {value!r}")
    check_affinity(tasks, allowed, stderr)
    check_nothing_else_warned(stderr, allow=())
    print("dtrain: ok: two-CPU XML: local task t runs on CPU t only (affinity applied from the XML)")


def check_broken_topology():
    args = ["-N2", "--ntasks-per-node=2"]
    env = step_environment()
    corrupt = os.path.join(os.environ.get("DTRAIN_TEST_WORKDIR", HERE), "corrupt-topology.xml")
    with open(corrupt, "w") as f:
        f.write('<?xml version="1.0"?>\n<topology version="2.0">\n  <object type="Machine"\n')
    # hwloc 2.9 asserts on a bitmap that starts with a comma: without the guard in
    # load_topology, slurmstepd would abort here instead of warning.
    aborts_hwloc = os.path.join(os.path.dirname(corrupt), "aborts-hwloc-topology.xml")
    sets = 'complete_cpuset="0x1" nodeset="0x1" complete_nodeset="0x1"'
    with open(aborts_hwloc, "w") as f:
        f.write('<?xml version="1.0"?>\n<topology version="2.0">\n'
                f'  <object type="Machine" cpuset=",x1" {sets}/>\n</topology>\n')
    missing = os.path.join(os.path.dirname(corrupt), "no-such-topology.xml")
    cases = {missing: "cannot read topology XML", corrupt: "is not a valid hwloc topology",
             aborts_hwloc: "is not a valid hwloc topology: line 3: <object> has cpuset=',x1'"}
    try:
        for path, reason in cases.items():
            with plugstack_args(f"topology={path}", QUIET_PORTS):
                allowed = allowed_cpus(args, env)
                tasks, stderr = bound_step(args, env, allowed)
            check_step(tasks)
            said = warnings_in(stderr)
            expect(len(said) == 1, f"topology={path}: expected exactly one warning, got {len(said)}:\n{stderr}")
            expect(reason in said[0] and path in said[0] and "this machine's own topology" in said[0],
                   f"topology={path}: the warning does not say '{reason}', name the file and the "
                   f"fallback:\n{said[0]}")
            for t in tasks:
                where = f"topology={path}: rank {t['SLURM_PROCID']}"
                for name in ("CUDA_VISIBLE_DEVICES", "NCCL_IB_HCA", "UCX_NET_DEVICES", "DTRAIN_NIC",
                             "DTRAIN_GPU_BUS_IDS"):
                    expect(name not in t, f"{where}: {name}={t.get(name)} set from a GPU-less machine")
                expect("DTRAIN_CPU_LIST" in t, f"{where}: no CPU binding from this machine's topology")
                expect(cpu_set(t["DTRAIN_CPU_LIST"]) <= allowed.of(t),
                       f"{where}: live plan {t['DTRAIN_CPU_LIST']} names CPUs this machine lacks")
                expect(0 < int(t["OMP_NUM_THREADS"]) <= len(cpu_set(t["DTRAIN_CPU_LIST"])),
                       f"{where}: OMP_NUM_THREADS={t['OMP_NUM_THREADS']} for CPUs {t['DTRAIN_CPU_LIST']}")
            check_affinity(tasks, allowed, stderr)
    finally:
        os.unlink(corrupt)
        os.unlink(aborts_hwloc)
    print("dtrain: ok: a missing, corrupt or hwloc-crashing topology XML gives one warning and a "
          "CPU-only binding from this machine")


GPU_NAMES = ("CUDA_VISIBLE_DEVICES", "DTRAIN_GPU_BUS_IDS", "NCCL_IB_HCA", "DTRAIN_NIC", "UCX_NET_DEVICES")
GRES_PROFILES = ("gres", "site")
MIG = "MIG-4f2a8c1e-1a2b-5c3d-9e8f-0123456789ab"


def gpu_bus_ids(topology_path):
    """PCI bus ids of an hwloc XML's GPUs (PCI devices with a cuda or nvml OS device), PCI order."""
    ids = []
    for pci in ElementTree.parse(topology_path).iter("object"):
        if pci.get("type") == "PCIDev" and any(
                child.get("type") == "OSDev" and (child.get("name") or "").startswith(("cuda", "nvml"))
                for child in pci.findall("object")):
            ids.append(pci.get("pci_busid"))
    return sorted(ids)


def cluster_plugstack_args():
    """The arguments the cluster's own plugstack.conf line loads the plugin with."""
    with open(PLUGSTACK) as f:
        return shlex.split(f.read())[2:]


def expect_no_gpu(tasks, what):
    for t in tasks:
        for name in GPU_NAMES:
            expect(name not in t, f"{what}: rank {t['SLURM_PROCID']} got {name}={t.get(name)!r}")
        expect("DTRAIN_CPU_LIST" in t, f"{what}: rank {t['SLURM_PROCID']} has no CPU binding")


def batch_steps(job_args, steps):
    """Runs `steps` (srun argument lists, each reporting into its own directory) in one batch job."""
    dirs = [report_dir() for _ in steps]
    with tempfile.TemporaryDirectory(dir=os.environ.get("DTRAIN_TEST_WORKDIR", STATE)) as tmp:
        script, out = os.path.join(tmp, "job.sh"), os.path.join(tmp, "job.out")
        with open(script, "w") as f:
            f.write("#!/bin/bash\n")
            for args, d in zip(steps, dirs):
                f.write(shlex.join(["srun", "--distributed-train", *args, "/usr/bin/python3", REPORTER, d]) + "\n")
        proc = run(["sbatch", "--wait", "-o", out, *job_args, script], check=False)
        with open(out) as f:
            log = f.read()
    expect(proc.returncode == 0, f"the batch job failed:\n{log[-3000:]}")
    return [reports(d) for d in dirs]


def check_step_gpus_gres():
    # Slurm's gres hands out the GPUs: a step holds what SLURM_STEP_GPUS names, and a step with
    # --gres=none inside the GPU job holds none (Slurm leaves only SLURM_JOB_GPUS).
    topology = next(a.split("=", 1)[1] for a in cluster_plugstack_args() if a.startswith("topology="))
    bus_ids = gpu_bus_ids(topology)
    with plugstack_args(*cluster_plugstack_args(), QUIET_PORTS):
        with_gpus, without = batch_steps(["-w", "node1", "-N1", "-n2", "--gres=gpu:2"],
                                         [["-n2"], ["-n1", "--gres=none"]])
    check_step(with_gpus)
    step_gpus = with_gpus[0].get("SLURM_STEP_GPUS", "")
    expect(len(step_gpus.split(",")) == 2, f"Slurm gave the step GPUs {step_gpus!r}, not two")
    want = sorted(bus_ids[int(i)] for i in step_gpus.split(","))
    got = sorted(t.get("DTRAIN_GPU_BUS_IDS", "") for t in with_gpus)
    expect(got == want, f"SLURM_STEP_GPUS={step_gpus}: the tasks were bound to {got}, not {want}")
    # The node view of a real gres allocation: each task sees the step's two GPUs (numbered on
    # the node, or from 0 where Slurm's cgroup hides the rest) and device LOCAL_RANK is its own.
    own = sorted(int(i) for i in step_gpus.split(","))
    for t in with_gpus:
        numbers = [int(i) for i in t.get("CUDA_VISIBLE_DEVICES", "").split(",") if i]
        seen = [bus_ids[n] if sorted(numbers) == own else bus_ids[own[n]] for n in numbers]
        device = int(t.get("DTRAIN_CUDA_DEVICE", "-1"))
        expect(sorted(seen) == want and device == int(t["SLURM_LOCALID"]) and
               seen[device] == t.get("DTRAIN_GPU_BUS_IDS"),
               f"rank {t['SLURM_PROCID']}: CUDA_VISIBLE_DEVICES={t.get('CUDA_VISIBLE_DEVICES')!r} "
               f"DTRAIN_CUDA_DEVICE={device} does not name its GPU {t.get('DTRAIN_GPU_BUS_IDS')} "
               f"among the step's {want}")
    expect_no_gpu(without, "srun --gres=none in a GPU job")
    # gpus=slurm: a job that asked for no GPU gets none, although the node has four.
    with plugstack_args(*cluster_plugstack_args(), QUIET_PORTS, "gpus=slurm"):
        (plain,) = batch_steps(["-w", "node1", "-N1", "-n2"], [["-n2"]])
    expect_no_gpu(plain, "gpus=slurm, a job without GPUs")
    print(f"dtrain: ok: gres: SLURM_STEP_GPUS={step_gpus} bound {want}, both visible to each task, "
          "device LOCAL_RANK its own; srun --gres=none and, with "
          "gpus=slurm, a job without GPUs got no GPU, NIC or CUDA variable")


def check_step_gpus_emulated():
    # Without gres here, Slurm's variables are given to the step as gres would set them.
    args = ["-N1", "-n2"]
    with plugstack_args(f"topology={DGX}", QUIET_PORTS):
        tasks, _ = srun(args, step_environment(SLURM_JOB_GPUS="0,1"))
        expect_no_gpu(tasks, "SLURM_JOB_GPUS without SLURM_STEP_GPUS")
        tasks, _ = srun(args, step_environment(SLURM_JOB_GPUS="0,1", SLURM_STEP_GPUS="0,1",
                                               CUDA_VISIBLE_DEVICES=MIG))
    for t in tasks:
        expect(t.get("CUDA_VISIBLE_DEVICES") == MIG,
               f"rank {t['SLURM_PROCID']}: Slurm's MIG value became {t.get('CUDA_VISIBLE_DEVICES')!r}")
        for name in GPU_NAMES[1:]:
            expect(name not in t, f"MIG: rank {t['SLURM_PROCID']} got {name}={t.get(name)!r}")
        expect("PADDLE_DISTRI_BACKEND" not in t, f"MIG: rank {t['SLURM_PROCID']} was treated as a CPU task")
    print("dtrain: ok: SLURM_JOB_GPUS alone binds no GPU; a MIG CUDA_VISIBLE_DEVICES is kept, CPUs bound only")


def check_step_gpus():
    if os.environ.get("DTRAIN_CLUSTER_PROFILE") in GRES_PROFILES:
        check_step_gpus_gres()
    else:
        check_step_gpus_emulated()


def check_no_binding():
    args = ["-N2", "--ntasks-per-node=2"]
    env = step_environment()
    for plugstack in (["topology=none"], [f"topology={DGX}", "bind=off"]):
        with plugstack_args(*plugstack, QUIET_PORTS):
            allowed = allowed_cpus(args, env)
            tasks, stderr = bound_step(args, env, allowed)
        check_step(tasks)
        for t in tasks:
            found = {name: t[name] for name in BINDING_NAMES if name in t}
            expect(not found, f"{' '.join(plugstack)}: rank {t['SLURM_PROCID']} got binding variables {found}")
            expect(cpu_set(t["cpus_allowed"]) == allowed.of(t),
                   f"{' '.join(plugstack)}: rank {t['SLURM_PROCID']}: affinity changed to {t['cpus_allowed']}")
        expect(not warnings_in(stderr), f"{' '.join(plugstack)}: unexpected warnings:\n{stderr}")
    print("dtrain: ok: topology=none and bind=off export no binding variables and keep the affinity")


def check_user_values():
    args = ["-N2", "--ntasks-per-node=3"]
    user = {"OMP_NUM_THREADS": "3", "NCCL_IB_HCA": "=mlx5_9:1"}
    # Slurm's gres/gpu itself removes CUDA_VISIBLE_DEVICES from a step that holds no GPU.
    if os.environ.get("DTRAIN_CLUSTER_PROFILE") not in GRES_PROFILES:
        user["CUDA_VISIBLE_DEVICES"] = "5"
    env = step_environment(**user)
    with plugstack_args(f"topology={DGX}", QUIET_PORTS):
        tasks, _ = srun(args, env)
    check_step(tasks)
    for t in tasks:
        for name, value in user.items():
            expect(t.get(name) == value,
                   f"rank {t['SLURM_PROCID']}: the user's {name}={value} became {t.get(name)!r}")
        # The rest of the binding is still exported: the user chose only these two.
        expect("DTRAIN_CPU_LIST" in t and t.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID",
               f"rank {t['SLURM_PROCID']}: binding not exported next to the user's values")
    print(f"dtrain: ok: the user's {', '.join(sorted(user))} are kept")


CHECKS = {
    "dgx-eight": check_dgx_eight,
    "restricted-gpus": check_restricted_gpus,
    "xml-affinity-applied": check_xml_affinity_applied,
    "broken-topology": check_broken_topology,
    "no-binding": check_no_binding,
    "user-values": check_user_values,
    "step-gpus": check_step_gpus,
}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CHECKS:
        print(f"usage: {sys.argv[0]} {{{'|'.join(CHECKS)}}}", file=sys.stderr)
        sys.exit(2)
    try:
        CHECKS[sys.argv[1]]()
    except Skipped as e:
        print(f"dtrain: skipped: {e}")
        sys.exit(SKIPPED)
    except CheckFailed as e:
        print(f"dtrain: check failed: {e}", file=sys.stderr)
        sys.exit(1)
