#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Cluster checks of the SPANK plugin: runs real srun/sbatch steps with the plugin loaded and
checks every task's environment against what Slurm really did.

Usage: check_plugin_steps.py CHECK [srun options...]
Needs SLURM_CONF and DTRAIN_CLUSTER_DIR (source the cluster's env.sh), and DTRAIN_PLUGIN (the
built spank_dtrain.so). Checks that change plugstack.conf restore it when they finish.
"""
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPORTER = os.path.join(HERE, "report_task_env.py")
PYTHON_MODULE_DIR = os.path.join(HERE, "..", "..", "src", "python")
STATE = os.environ["DTRAIN_CLUSTER_DIR"]
PLUGSTACK = os.path.join(STATE, "plugstack.conf")
PLUGIN = os.environ["DTRAIN_PLUGIN"]
TIMEOUT = 120


class CheckFailed(Exception):
    pass


def expect(cond, message):
    if not cond:
        raise CheckFailed(message)


def run(cmd, check=True, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, **kw)
    if check and proc.returncode != 0:
        raise CheckFailed(f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def report_dir():
    return tempfile.mkdtemp(prefix="reports-", dir=os.environ.get("DTRAIN_TEST_WORKDIR", STATE))


def reports(directory):
    found = []
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name)) as f:
            found.append(json.load(f))
    shutil.rmtree(directory)
    return sorted(found, key=lambda r: int(r["SLURM_PROCID"]))


class plugstack_args:
    """Temporarily loads the plugin with other plugstack.conf arguments."""

    def __init__(self, *args, kind="required"):
        self.line = " ".join([kind, PLUGIN, *args]) + "\n"

    def __enter__(self):
        with open(PLUGSTACK) as f:
            self.saved = f.read()
        with open(PLUGSTACK, "w") as f:
            f.write(self.line)

    def __exit__(self, *exc):
        with open(PLUGSTACK, "w") as f:
            f.write(self.saved)


def endpoint_list(r):
    return r.get("DTRAIN_ENDPOINTS") or r["DTRAIN_ENDPOINTS_FILE:content"]


def check_step(tasks, expect_frameworks=("torch", "paddle", "tf")):
    """The contract: the promises of issue #3, checked task by task."""
    n = len(tasks)
    expect(n > 0, "no task reported")
    world = int(tasks[0]["DTRAIN_WORLD_SIZE"])
    expect(world == n, f"DTRAIN_WORLD_SIZE={world} but {n} tasks ran")
    ranks = sorted(int(t["DTRAIN_RANK"]) for t in tasks)
    expect(ranks == list(range(n)), f"ranks are not a permutation of 0..{n-1}: {ranks}")
    endpoints = endpoint_list(tasks[0])
    by_rank = {int(t["DTRAIN_RANK"]): t for t in tasks}
    hosts = collections.OrderedDict()
    for t in tasks:
        rank = int(t["DTRAIN_RANK"])
        expect(rank == int(t["SLURM_PROCID"]), f"DTRAIN_RANK={rank} but SLURM_PROCID={t['SLURM_PROCID']}")
        expect(endpoint_list(t) == endpoints, f"rank {rank} holds a different endpoint list")
        expect(t.get("DTRAIN_ENDPOINTS_HASH") == tasks[0].get("DTRAIN_ENDPOINTS_HASH")
               and len(t.get("DTRAIN_ENDPOINTS_HASH", "")) == 16,
               f"rank {rank}: DTRAIN_ENDPOINTS_HASH={t.get('DTRAIN_ENDPOINTS_HASH')!r}, rank 0 has "
               f"{tasks[0].get('DTRAIN_ENDPOINTS_HASH')!r}")
        expect(int(t["DTRAIN_LOCAL_RANK"]) == int(t["SLURM_LOCALID"]),
               f"rank {rank}: DTRAIN_LOCAL_RANK={t['DTRAIN_LOCAL_RANK']} SLURM_LOCALID={t['SLURM_LOCALID']}")
        expect(int(t["DTRAIN_NODE_RANK"]) == int(t["SLURM_NODEID"]),
               f"rank {rank}: DTRAIN_NODE_RANK={t['DTRAIN_NODE_RANK']} SLURM_NODEID={t['SLURM_NODEID']}")
        hosts.setdefault(int(t["SLURM_NODEID"]), []).append(t)
        if "torch" in expect_frameworks:
            expect(t["RANK"] == t["DTRAIN_RANK"] and t["WORLD_SIZE"] == str(n), f"rank {rank}: torch names wrong")
            expect(t["LOCAL_RANK"] == t["DTRAIN_LOCAL_RANK"], f"rank {rank}: LOCAL_RANK wrong")
            expect(t["GROUP_RANK"] == t["DTRAIN_NODE_RANK"], f"rank {rank}: GROUP_RANK wrong")
            expect(t["MASTER_ADDR"] == tasks[0]["MASTER_ADDR"], f"rank {rank}: MASTER_ADDR differs")
        if "paddle" in expect_frameworks:
            expect(t["PADDLE_TRAINER_ID"] == t["DTRAIN_RANK"], f"rank {rank}: PADDLE_TRAINER_ID wrong")
            expect(t["PADDLE_CURRENT_ENDPOINT"] == t["DTRAIN_CURRENT_ENDPOINT"], f"rank {rank}: paddle endpoint")
        if "tf" in expect_frameworks and "TF_CONFIG" in t:
            tf = json.loads(t["TF_CONFIG"])
            expect(tf["task"] == {"type": "worker", "index": rank}, f"rank {rank}: TF_CONFIG task {tf['task']}")
            expect(",".join(tf["cluster"]["worker"]) == endpoints, f"rank {rank}: TF_CONFIG workers differ")
    # Endpoint r names the host that really ran rank r, and local ranks index the ports.
    entries = endpoints.split(",")
    expect(len(entries) == n, f"{len(entries)} endpoints for {n} ranks")
    for rank, entry in enumerate(entries):
        addr, port = entry.rsplit(":", 1)
        t = by_rank[rank]
        expect(addr in (t["host_addr"], t["host"]),
               f"endpoint {rank} is {entry} but rank {rank} ran on {t['host']} ({t['host_addr']})")
        expect(t["DTRAIN_CURRENT_ENDPOINT"] == entry, f"rank {rank}: current endpoint {t['DTRAIN_CURRENT_ENDPOINT']} != {entry}")
    for node, node_tasks in hosts.items():
        locals_ = sorted(int(t["DTRAIN_LOCAL_RANK"]) for t in node_tasks)
        expect(locals_ == list(range(len(node_tasks))), f"node {node}: local ranks {locals_}")
        for t in node_tasks:
            expect(int(t["DTRAIN_LOCAL_WORLD_SIZE"]) == len(node_tasks), f"node {node}: local world size")
            expect(len({x["host"] for x in node_tasks}) == 1, f"node {node} ran on several hosts")
    master_port = int(tasks[0]["DTRAIN_MASTER_PORT"])
    ports = {int(e.rsplit(":", 1)[1]) for e in entries}
    expect(master_port not in ports, f"master port {master_port} is also an endpoint port")
    expect(tasks[0]["DTRAIN_MASTER_ADDR"] == entries[0].rsplit(":", 1)[0], "master is not on rank 0's node")
    return entries


def srun_step(args, option="--distributed-train"):
    out = report_dir()
    proc = run(["srun", *([option] if option else []), *args, "/usr/bin/python3", REPORTER, out])
    return reports(out), proc


def check_layout(args):
    tasks, _ = srun_step(args)
    entries = check_step(tasks)
    print(f"dtrain: ok: srun {' '.join(args)}: {len(tasks)} ranks, endpoints {','.join(entries)}")


def check_frameworks():
    only, _ = srun_step(["-N2", "-n2"], option="--distributed-train=paddle")
    check_step(only, expect_frameworks=("paddle",))
    for t in only:
        expect("RANK" not in t and "TF_CONFIG" not in t, "torch/tf names exported for paddle only")
        expect("PADDLE_TRAINER_ID" in t and "DTRAIN_RANK" in t, "paddle names missing")
    plain, _ = srun_step(["-N2", "-n2"], option=None)
    expect(len(plain) == 2, "the plain step did not run")
    for t in plain:
        expect(not any(k.startswith("DTRAIN_") for k in t), "variables exported without the option")
    print("dtrain: ok: framework selection and no-option steps")


def check_sbatch():
    with tempfile.TemporaryDirectory(dir=os.environ.get("DTRAIN_TEST_WORKDIR", STATE)) as tmp:
        script = os.path.join(tmp, "job.sh")
        out = os.path.join(tmp, "job.out")
        out_dir = report_dir()
        with open(script, "w") as f:
            f.write("#!/bin/bash\n#SBATCH -N4 -n8\n#SBATCH --distributed-train\n"
                    f"srun /usr/bin/python3 {REPORTER} {out_dir}\n"
                    f"srun -n4 -m cyclic /usr/bin/python3 {REPORTER} {out_dir}\n")
        run(["sbatch", "--wait", "-o", out, script])
        with open(out) as f:
            lines = f.read()
        all_tasks = reports(out_dir)
        by_step = collections.defaultdict(list)
        for t in all_tasks:
            by_step[t["SLURM_STEP_ID"]].append(t)
        expect(len(by_step) == 2, f"expected 2 steps in the batch job, got {sorted(by_step)}:\n{lines}")
        for step, tasks in sorted(by_step.items()):
            check_step(sorted(tasks, key=lambda r: int(r["SLURM_PROCID"])))
    print("dtrain: ok: #SBATCH --distributed-train reaches plain srun steps")


def check_concurrent():
    dirs = [report_dir(), report_dir()]
    cmd = lambda d: ["srun", "--distributed-train", "-N4", "-n8", "--oversubscribe", "/usr/bin/python3", "-c",
                     f"import subprocess,time; subprocess.run(['/usr/bin/python3','{REPORTER}','{d}']); time.sleep(3)"]
    first = subprocess.Popen(cmd(dirs[0]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = subprocess.Popen(cmd(dirs[1]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out1, err1 = first.communicate(timeout=TIMEOUT)
    out2, err2 = second.communicate(timeout=TIMEOUT)
    expect(first.returncode == 0 and second.returncode == 0, f"a job failed:\n{err1}\n{err2}")
    a, b = reports(dirs[0]), reports(dirs[1])
    expect(a[0]["SLURM_JOB_ID"] != b[0]["SLURM_JOB_ID"], "the two steps ran in one job")
    used = lambda tasks: {(e.rsplit(":", 1)[0], int(e.rsplit(":", 1)[1])) for e in endpoint_list(tasks[0]).split(",")} | \
        {(tasks[0]["DTRAIN_MASTER_ADDR"], int(tasks[0]["DTRAIN_MASTER_PORT"]))}
    overlap = used(a) & used(b)
    expect(not overlap, f"jobs {a[0]['SLURM_JOB_ID']} and {b[0]['SLURM_JOB_ID']} share ports {sorted(overlap)}")
    print(f"dtrain: ok: concurrent jobs {a[0]['SLURM_JOB_ID']} and {b[0]['SLURM_JOB_ID']} use disjoint ports")


def check_concurrent_steps():
    # The reported collision: a batch job running steps side by side, where steps s and s + 4
    # used to get the same ports. Eight steps on one node each listen on their endpoint and
    # master ports while all eight run, so a shared port fails the step with EADDRINUSE.
    holder = ("import os,socket,subprocess,sys,time\n"
              "socks=[]\n"
              "for p in (os.environ['DTRAIN_CURRENT_ENDPOINT'].rsplit(':',1)[1], os.environ['DTRAIN_MASTER_PORT']):\n"
              "    s=socket.socket(); s.bind(('', int(p))); s.listen(); socks.append(s)\n"
              "subprocess.run(['/usr/bin/python3', sys.argv[1], sys.argv[2]], check=True)\n"
              "time.sleep(4)\n")
    steps = 8
    with tempfile.TemporaryDirectory(dir=os.environ.get("DTRAIN_TEST_WORKDIR", STATE)) as tmp:
        script, out, holder_py = (os.path.join(tmp, n) for n in ("job.sh", "job.out", "holder.py"))
        out_dir = report_dir()
        with open(holder_py, "w") as f:
            f.write(holder)
        with open(script, "w") as f:
            f.write("#!/bin/bash\n#SBATCH -N1 -n1\n"
                    f"for i in $(seq {steps}); do\n"
                    f"  srun --overlap -N1 -n1 --distributed-train /usr/bin/python3 {holder_py} {REPORTER} {out_dir} &\n"
                    "done\n"
                    "failed=0; for p in $(jobs -p); do wait $p || failed=1; done; exit $failed\n")
        proc = run(["sbatch", "--wait", "-o", out, script], check=False)
        with open(out) as f:
            log = f.read()
    expect(proc.returncode == 0, f"a concurrent step failed:\n{log[-3000:]}")
    tasks = reports(out_dir)
    by_step = {t["SLURM_STEP_ID"]: t for t in tasks}
    expect(len(by_step) == steps, f"expected {steps} steps, got {sorted(by_step)}:\n{log[-2000:]}")
    seen = {}
    for step, t in sorted(by_step.items(), key=lambda kv: int(kv[0])):
        for port in (int(t["DTRAIN_CURRENT_ENDPOINT"].rsplit(":", 1)[1]), int(t["DTRAIN_MASTER_PORT"])):
            expect(port not in seen, f"steps {seen.get(port)} and {step} share port {port}")
            seen[port] = step
    print(f"dtrain: ok: {steps} concurrent steps of job {tasks[0]['SLURM_JOB_ID']} (steps 0-{steps - 1}) "
          f"listened on {len(seen)} distinct ports at once")


def check_bad_option():
    proc = run(["srun", "--distributed-train=torch,mxnet", "-N1", "-n1", "true"], check=False)
    expect(proc.returncode != 0, "a bad option value was accepted")
    expect("dtrain: --distributed-train: unknown framework 'mxnet'" in proc.stderr, proc.stderr)
    expect("valid values: torch, paddle, tf" in proc.stderr, proc.stderr)
    expect("srun: Required node not available" not in proc.stderr and "launch" not in proc.stdout, proc.stderr)
    print("dtrain: ok: a bad option value fails in srun, listing the valid values")


def check_bad_plugstack():
    for args, needle in ((["colour=red"], "unknown plugstack argument 'colour'"),
                         (["ports=9-1"], "'ports'")):
        with plugstack_args(*args):
            proc = run(["srun", "-N1", "-n1", "true"], check=False)
        expect(proc.returncode != 0, f"plugstack {args} was accepted")
        expect(needle in proc.stderr, f"expected {needle!r} in:\n{proc.stderr}")
    print("dtrain: ok: bad plugstack.conf arguments fail at plugin load, naming the key")


def check_unresolvable_suffix():
    # Under `optional` Slurm ignores the plugin's error; the task must still stop before the
    # program runs, or it would start without dtrain's variables (or with an outer launcher's
    # RANK, which the step inherits here).
    for kind in ("required", "optional"):
        with plugstack_args("suffix=-no-such-net", kind=kind):
            out = report_dir()
            env = dict(os.environ, RANK="5", MASTER_ADDR="elsewhere")
            proc = run(["srun", "--distributed-train", "-N2", "-n2", "/usr/bin/python3", REPORTER, out],
                       check=False, env=env)
        expect(proc.returncode != 0, f"{kind}: a step with unresolvable names ran")
        expect(re.search(r"cannot resolve host name 'node\d-no-such-net'", proc.stderr), f"{kind}:\n{proc.stderr}")
        expect("dtrain: error: the task stops before its program starts" in proc.stderr, f"{kind}:\n{proc.stderr}")
        expect(not reports(out), f"{kind}: a task started although its endpoints could not be resolved")
    # Without the option nothing is planned, so nothing can fail.
    with plugstack_args("suffix=-no-such-net", kind="optional"):
        out = report_dir()
        run(["srun", "-N2", "-n2", "/usr/bin/python3", REPORTER, out])
    expect(len(reports(out)) == 2, "a step without --distributed-train did not run")
    print("dtrain: ok: an unresolvable host-name suffix stops every task before the program starts, naming "
          "the host, under required and under optional")


def port_set(text):
    ports = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        ports.update(range(int(first), int(last or first) + 1))
    return ports


def check_het_ports(tasks):
    """With Slurm's reserved ports (the `site` profile), srun hands every component's nodes one
    merged list, and the het step's ports come from it."""
    reserved = {t.get("SLURM_STEP_RESV_PORTS") for t in tasks}
    if reserved == {None}:
        return "derived ports"
    expect(len(reserved) == 1, f"the components' nodes got different reserved ports: {sorted(map(str, reserved))}")
    allowed = port_set(reserved.pop())
    used = {int(e.rsplit(":", 1)[1]) for e in endpoint_list(tasks[0]).split(",")}
    used.add(int(tasks[0]["DTRAIN_MASTER_PORT"]))
    expect(used <= allowed, f"ports {sorted(used - allowed)} are outside the reserved {tasks[0]['SLURM_STEP_RESV_PORTS']}")
    return f"Slurm's reserved ports {tasks[0]['SLURM_STEP_RESV_PORTS']}"


def run_het(command, components, expected_tasks):
    out = report_dir()
    proc = run(command + [a for k, args in enumerate(components)
                          for a in ([":"] if k else []) + ["--distributed-train", *args, "/usr/bin/python3", REPORTER, out]],
               check=False)
    expect(proc.returncode == 0, f"het step {components} failed:\n{proc.stderr[-3000:]}")
    tasks = reports(out)
    expect(len(tasks) == expected_tasks, f"{len(tasks)} of {expected_tasks} tasks reported")
    check_step(tasks)
    for t in tasks:
        expect(t["RANK"] == t["SLURM_PROCID"], f"RANK={t['RANK']} but SLURM_PROCID={t['SLURM_PROCID']}")
    return tasks


def check_het():
    # Heterogeneous steps: one world across the components, RANK == SLURM_PROCID and
    # DTRAIN_NODE_RANK == SLURM_NODEID (both counted in component order), each component laid out
    # with its own distribution, one endpoint list on every node. Slurm sorts the step's node
    # list, so components listed against node order are the case to cover.
    cases = [
        [["-w", "node1", "-N1", "-n2", "-m", "cyclic"], ["-w", "node2,node3", "-N2", "-n3", "-m", "block"]],
        [["-w", "node3,node4", "-N2", "-n3", "-m", "cyclic"], ["-w", "node1", "-N1", "-n2"]],
        [["-w", "node4", "-N1", "-n1"], ["-w", "node2,node3", "-N2", "-n3", "-m", "cyclic"],
         ["-w", "node1", "-N1", "-n2"]],
    ]
    for components in cases:
        total = sum(int(next(x[2:] for x in a if x.startswith("-n") and x[2:].isdigit())) for a in components)
        tasks = run_het(["srun"], components, total)
        ports = check_het_ports(tasks)
        hosts = {int(t["DTRAIN_RANK"]): t["host"] for t in tasks}
        nodes_in_order = list(dict.fromkeys(hosts[r] for r in sorted(hosts)))
        print(f"dtrain: ok: het step {' : '.join(' '.join(a) for a in components)}: {total} ranks on "
              f"{','.join(nodes_in_order)}, RANK == SLURM_PROCID, one endpoint list, {ports}")

    # A het job of three components whose step leaves component 0 out (--het-group=1,2): the
    # world is components 1 and 2, ranks from 0 as SLURM_PROCID counts them.
    with tempfile.TemporaryDirectory(dir=os.environ.get("DTRAIN_TEST_WORKDIR", STATE)) as tmp:
        out_dir = report_dir()
        script = os.path.join(tmp, "het.sh")
        with open(script, "w") as f:
            f.write("#!/bin/bash\n"
                    f"srun --het-group=1,2 --distributed-train /usr/bin/python3 {REPORTER} {out_dir}\n")
        log = os.path.join(tmp, "het.out")
        proc = run(["sbatch", "--wait", "-o", log, "-w", "node4", "-N1", "-n1", ":", "-w", "node3", "-N1", "-n2",
                    ":", "-w", "node1,node2", "-N2", "-n2", script], check=False)
        with open(log) as f:
            printed = f.read()
        expect(proc.returncode == 0, f"the het job failed ({proc.returncode}):\n{proc.stderr}\n{printed[-3000:]}")
        tasks = reports(out_dir)
        expect(len(tasks) == 4, f"{len(tasks)} of 4 tasks of components 1 and 2 reported:\n{printed[-2000:]}")
        check_step(tasks)
        expect({t["host"] for t in tasks} == {"node1", "node2", "node3"}, "component 0's node4 ran a task")
        print(f"dtrain: ok: srun --het-group=1,2 in a 3-component het job: component 0 left out, "
              f"4 ranks on node3,node1,node2, {check_het_ports(tasks)}")

    # srun A : B inside an ordinary allocation: one message that names het steps.
    with tempfile.TemporaryDirectory(dir=os.environ.get("DTRAIN_TEST_WORKDIR", STATE)) as tmp:
        log = os.path.join(tmp, "local-het.out")
        script = os.path.join(tmp, "local-het.sh")
        with open(script, "w") as f:
            f.write("#!/bin/bash\n"
                    "srun --distributed-train -w node2 -N1 -n1 /bin/echo program-ran : "
                    "--distributed-train -w node1 -N1 -n1 /bin/echo program-ran\n"
                    "echo srun-exit=$?\n")
        run(["sbatch", "--wait", "-o", log, "-N2", "-w", "node[1-2]", script], check=False)
        with open(log) as f:
            printed = f.read()
        expect("inside an allocation that is not heterogeneous" in printed,
               f"srun A : B inside an ordinary allocation was not refused by name:\n{printed[-2000:]}")
        expect("program-ran" not in printed, f"a task ran its program after the refusal:\n{printed}")
        print("dtrain: ok: srun A : B inside an ordinary allocation is refused, naming het steps")

    # Two components on one node cannot share one endpoint list per node: refused by name.
    proc = run(["srun", "--distributed-train", "-w", "node1", "-N1", "-n1", "--overlap", "true", ":",
                "--distributed-train", "-w", "node1", "-N1", "-n1", "--overlap", "true"], check=False)
    if proc.returncode != 0 and "runs tasks of two components" in proc.stderr:
        print("dtrain: ok: components sharing a node are refused, naming het steps")
    else:
        expect("runs tasks of two components" not in proc.stdout,
               f"components on one node: {proc.returncode}\n{proc.stderr[-2000:]}")
        print(f"dtrain: ok: Slurm itself does not run two components on one node here "
              f"(exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''})")


CLUSTER_SH = os.path.join(HERE, "..", "..", "slurm", "local", "cluster.sh")


class held_ports:
    """Listeners on PORTS (all addresses) inside NODE's network namespace, as UID: a whole row of
    derived ports holds the port of that row for every job and step."""

    def __init__(self, node, ports, uid):
        self.node, self.ports, self.uid = node, list(ports), uid

    def __enter__(self):
        listen = ("import socket,sys,time\n"
                  "held=[]\n"
                  "for p in map(int, sys.argv[1:]):\n"
                  "    s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                  "    s.bind(('0.0.0.0', p)); s.listen(); held.append(s)\n"
                  "time.sleep(120)\n")
        as_user = [] if self.uid == 0 else ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}",
                                            "--clear-groups"]
        self.proc = subprocess.Popen([CLUSTER_SH, "--state-dir", STATE, "exec", self.node, "--", *as_user,
                                      "/usr/bin/python3", "-c", listen, *map(str, self.ports)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        needle = f":{self.ports[-1]:04X} 00000000:0000 0A"
        for _ in range(100):
            tcp = run([CLUSTER_SH, "--state-dir", STATE, "exec", self.node, "--", "cat", "/proc/net/tcp"],
                      check=False).stdout
            if needle in tcp:
                return self
            time.sleep(0.1)
        self.__exit__()
        raise CheckFailed(f"could not hold ports {self.ports[0]}-{self.ports[-1]} on {self.node} as uid {self.uid}")

    def __exit__(self, *exc):
        # cluster.sh exec execs nsenter, which execs the command: the listener is self.proc itself.
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)


def pinned_port_rows(base):
    """plugstack.conf arguments for derived ports in 32 rows of 65 ports from BASE (65 colours):
    row r holds the ports BASE + 65 r .. BASE + 65 r + 64, and local rank l of any step of any job
    gets its port in row l, the master in the row after the busiest node's tasks."""
    return ((f"ports={base}-{base + 65 * 32 - 1}", "port_block=32"),
            lambda row: range(base + 65 * row, base + 65 * row + 65))


def check_foreign_port():
    # Another user's process on a port of the step: the step fails before the program starts,
    # naming the node, the port and the uid. Pinned rows of 65 ports (one task per node: local
    # rank 0 in row 0, the master in row 1) let the holder take the port whatever the job id.
    base = 23000 + 2112 * (os.getpid() % 4)
    pin, row = pinned_port_rows(base)
    step = ["srun", "--distributed-train", "--kill-on-bad-exit=1", "-N2", "-n2", "-w", "node1,node2",
            "/usr/bin/python3", REPORTER]
    nobody = 65534
    for node, held, what in (("node1", row(1), "the master port"), ("node2", row(0), "the endpoint of local rank 0")):
        out = report_dir()
        with plugstack_args(*pin), held_ports(node, held, nobody):
            proc = run([*step, out], check=False)
        expect(proc.returncode != 0, f"a step ran with {what} on {node} held by uid {nobody}")
        named = re.search(rf"port (\d+) on {node} \([^)]*\), {what}.*, is held by a process of another user "
                          rf"\(uid {nobody}\)", proc.stderr)
        expect(named and int(named.group(1)) in held, proc.stderr[-2000:])
        # The held node's tasks never start; the others' may, and Slurm then ends the step.
        started = [t["host"] for t in reports(out)]
        expect(node not in started, f"a task on {node} started while uid {nobody} held {what}")
    # The user's own process on an endpoint port of a step that exports only PyTorch's names,
    # which never bind endpoint ports: a warning, and the step runs (tests/plugin/check_refusal.py
    # has the cases that stop).
    out = report_dir()
    with plugstack_args(*pin), held_ports("node2", row(0), 0):
        proc = run([step[0], "--distributed-train=torch", *step[2:], out], check=False)
    expect(proc.returncode == 0 and len(reports(out)) == 2, f"the user's own holder failed the step:\n{proc.stderr}")
    expect("is already in use by another process of yours" in proc.stderr, proc.stderr[-2000:])
    print(f"dtrain: ok: uid {nobody} holding the master port or an endpoint port stops the step, naming "
          "node, port and uid; the user's own holder of a port no exported framework binds is a warning")


def dtrain_files_in_node_tmp():
    """Entries named dtrain-* in each node's /tmp, as the node itself sees it."""
    cluster_sh = os.path.join(HERE, "..", "..", "slurm", "local", "cluster.sh")
    found = {}
    for node in ("node1", "node2", "node3", "node4"):
        proc = run([cluster_sh, "--state-dir", STATE, "exec", node, "--", "find", "/tmp", "-maxdepth", "2",
                    "-name", "dtrain-*"], check=False)
        found[node] = sorted(proc.stdout.split())
    return found


# The spill directory of earlier releases was /tmp/dtrain-<uid>-<job>.<step>: another user who
# created that name first, as a directory or a symlink, stopped the step (issue 27).
SQUAT_JOBS = 4


def squat_old_spill_names():
    """As nobody, create every old-scheme spill name of the next few jobs in each node's /tmp;
    returns the job ids covered. unsquat_old_spill_names() removes them."""
    probe = run(["srun", "-N1", "-n1", "printenv", "SLURM_JOB_ID"])
    first = int(probe.stdout.strip()) + 1
    jobs = list(range(first, first + SQUAT_JOBS))
    names = [f"/tmp/dtrain-{os.getuid()}-{job}.{step}" for job in jobs for step in (0, 1)]
    # Step 0's name as a directory open to all, step 1's as a symlink to one: both were refused.
    script = ('mkdir -m 0777 /tmp/dtrain-squat; for n in "$@"; do case $n in '
              '*.0) mkdir -m 0777 "$n" ;; *) ln -s /tmp/dtrain-squat "$n" ;; esac; done')
    for node in ("node1", "node2", "node3", "node4"):
        run([CLUSTER_SH, "--state-dir", STATE, "exec", node, "--", "setpriv", "--reuid=65534", "--regid=65534",
             "--clear-groups", "/bin/sh", "-c", script, "squat", *names])
    return jobs


def unsquat_old_spill_names():
    for node in ("node1", "node2", "node3", "node4"):
        run([CLUSTER_SH, "--state-dir", STATE, "exec", node, "--", "/bin/sh", "-c",
             f"rm -rf /tmp/dtrain-squat /tmp/dtrain-{os.getuid()}-*"])


def check_oversized():
    # 600 ranks with a 200-byte suffix: each endpoint is ~210 bytes, the list ~126 KiB, and
    # TF_CONFIG's quoted list ~128 KiB: past Linux's 131072-byte limit for one string.
    suffix = "-" + "x" * 199
    # 160 tasks on a node need 161 ports, more than the default port_block=32 gives; where Slurm
    # reserves ports (MpiParams=ports) it reserves 161 and derived ports are not used.
    reserved = os.environ.get("DTRAIN_CLUSTER_PROFILE") in ("reserved-ports", "site")
    if not reserved:
        with plugstack_args("check_ports=off"):
            refused = run(["srun", "--distributed-train", "-N4", "-n640", "--overcommit", "/bin/true"],
                          check=False)
        expect(refused.returncode != 0, "a step with 160 tasks per node got derived ports from 32-port blocks")
        expect("srun --resv-ports=161" in refused.stderr and "port_block=" in refused.stderr,
               refused.stderr[-2000:])
    squatted = squat_old_spill_names()
    try:
        before = dtrain_files_in_node_tmp()
        # What a batch script may have exported: the step's memory files must replace them.
        inherited = dict(os.environ, TF_CONFIG='{"cluster":{"worker":["batch:1"]}}',
                         PADDLE_TRAINER_ENDPOINTS="batch:1", PYTHONPATH=PYTHON_MODULE_DIR)
        with plugstack_args("address=name", f"suffix={suffix}", "check_ports=off", "port_block=161"):
            proc = run(["srun", "--distributed-train", "-N4", "-n640", "--overcommit", "/usr/bin/python3", "-c",
                        "import glob,os,sys,dtrain_env; p=os.environ['DTRAIN_ENDPOINTS_FILE']; "
                        "assert not {'DTRAIN_ENDPOINTS','PADDLE_TRAINER_ENDPOINTS','TF_CONFIG'} & set(os.environ); "
                        "assert p.startswith('/proc/self/fd/'), p; "
                        "j,s,r=(os.environ[v] for v in ('SLURM_JOB_ID','SLURM_STEP_ID','SLURM_PROCID')); "
                        "label=os.readlink(p); "
                        "assert label==f'/memfd:dtrain:{j}.{s}:rank{r}:DTRAIN_ENDPOINTS,PADDLE_TRAINER_ENDPOINTS (deleted)', label; "
                        "assert os.readlink(os.environ['TF_CONFIG_FILE'])==f'/memfd:dtrain:{j}.{s}:rank{r}:TF_CONFIG (deleted)'; "
                        "st=os.stat(p); assert st.st_uid==os.getuid() and st.st_mode&0o777==0o400, oct(st.st_mode); "
                        "assert all(os.lstat(q).st_uid==65534 for q in glob.glob('/tmp/dtrain-*')), "
                        "glob.glob('/tmp/dtrain-*'); "
                        "loaded=dtrain_env.load(); e=os.environ['DTRAIN_ENDPOINTS']; "
                        "assert e.split(',')[int(os.environ['DTRAIN_RANK'])]==os.environ['DTRAIN_CURRENT_ENDPOINT']; "
                        "assert '\"index\":'+r+'}' in os.environ['TF_CONFIG']; "
                        "print('STARTED', os.environ['DTRAIN_RANK'], len(e), j, ','.join(loaded))"],
                       check=False, env=inherited)
        after = dtrain_files_in_node_tmp()
    finally:
        unsquat_old_spill_names()
    started = [l for l in proc.stdout.splitlines() if l.startswith("STARTED")]
    expect(proc.returncode == 0, f"oversized step failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    expect(len(started) == 640, f"{len(started)} of 640 tasks started")
    size = int(started[0].split()[2])
    job = int(started[0].split()[3])
    expect(job in squatted, f"the step ran as job {job}, not one of the squatted jobs {squatted}")
    held = {f"/tmp/dtrain-{os.getuid()}-{job}.{step}" for step in (0, 1)}
    expect(all(held <= set(names) for names in before.values()), f"not every node held {held}: {before}")
    expect(size > 131072, f"endpoint list only {size} bytes")
    loaded = {line.split()[4] for line in started}
    expect(loaded == {"DTRAIN_ENDPOINTS,PADDLE_TRAINER_ENDPOINTS,TF_CONFIG"},
           f"dtrain_env.load() loaded {loaded}")
    warnings = proc.stderr.count("exceed Linux's 131072-byte limit")
    expect(warnings == 1, f"expected one warning per step, got {warnings}:\n{proc.stderr[-2000:]}")
    expect(after == before, f"the step left files in the nodes' /tmp: before {before}, after {after}")
    print(("" if reserved else "dtrain: ok: 160 tasks per node refused with port_block=32, naming the fix\n") +
          f"dtrain: ok: a "
          f"{size}-byte endpoint list went to a memory file (DTRAIN_ENDPOINTS_FILE), all 640 tasks started, "
          "one warning, nothing added to any node's /tmp\n"
          f"dtrain: ok: another user held every old-scheme spill name of job {job} "
          "(directory for step 0, symlink for step 1) on every node; the step "
          "started anyway and its memory files are mode 0400, owned by the step's user\n"
          "dtrain: ok: every task's memory files are /proc/self/fd/N labelled with its job, step, rank "
          "and values; the TF_CONFIG and PADDLE_TRAINER_ENDPOINTS inherited from srun's environment "
          "reached no task; dtrain_env.load() checked and loaded all three values in all 640 tasks")


CHECKS = {
    "layout": check_layout,
    "frameworks": check_frameworks,
    "sbatch": check_sbatch,
    "concurrent": check_concurrent,
    "concurrent-steps": check_concurrent_steps,
    "bad-option": check_bad_option,
    "bad-plugstack": check_bad_plugstack,
    "unresolvable-suffix": check_unresolvable_suffix,
    "oversized": check_oversized,
    "het": check_het,
    "foreign-port": check_foreign_port,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in CHECKS:
        print(f"usage: {sys.argv[0]} {{{'|'.join(CHECKS)}}} [srun args]", file=sys.stderr)
        sys.exit(2)
    try:
        fn = CHECKS[sys.argv[1]]
        fn(sys.argv[2:]) if sys.argv[1] == "layout" else fn()
    except CheckFailed as e:
        print(f"dtrain: check failed: {e}", file=sys.stderr)
        sys.exit(1)
