#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Checks of the local Slurm cluster itself, on what tests/cluster/cluster_checks.sh captured:
the bash script drives srun, sbatch and the cluster's daemons; this reads their output by name,
prints what held as `dtrain: ok: ...` and fails with `dtrain: check failed: ...` naming the
difference. Run cluster_checks.py CHECK --help for one check's input.
"""
import collections
import os
import re
import subprocess
import time

from checklib import (add_check, arg, expect, expect_equal, new_parser, node_address, read_text,
                      run_check)

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER_SH = os.path.join(HERE, "..", "..", "slurm", "local", "cluster.sh")

# One line per task of cluster_checks.sh's run_step, in this order.
TaskFacts = collections.namedtuple(
    "TaskFacts", "rank node hostname step_tasks_per_node step_nodelist tmp_identity shm_device "
    "own_address node3_address")


def parse_lines(text, fields, what):
    """The whitespace-separated lines of text as fields(...) tuples; a line with another number
    of words is an error, not a shifted column."""
    rows = []
    for line in text.splitlines():
        words = line.split(None, len(fields._fields) - 1)
        expect(len(words) == len(fields._fields),
               f"{what}: {len(words)} words in {line!r}, expected {' '.join(fields._fields)}")
        rows.append(fields(*words))
    return rows


def hostnames(nodelist):
    return subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                          text=True, check=True).stdout.split()


def distinct(rows, field):
    return len({getattr(row, field) for row in rows})


def ranks_on(tasks, node):
    return ",".join(t.rank for t in tasks if t.node == node)


def check_node_isolation(tasks, nodes):
    """The nodes must look like separate machines: own hostname, /tmp, /dev/shm and address."""
    addresses = {node: node_address(node) for node in ("node1", "node2", "node3", "node4")}
    listing = "\n".join(" ".join(t) for t in tasks)
    expect(all(t.hostname == t.node for t in tasks),
           f"a task's hostname differs from SLURMD_NODENAME:\n{listing}")
    expect_equal("distinct hostnames", distinct(tasks, "hostname"), nodes)
    expect_equal("distinct /tmp directories", distinct(tasks, "tmp_identity"), nodes)
    expect_equal("distinct /dev/shm mounts", distinct(tasks, "shm_device"), nodes)
    expect(all(t.own_address == addresses[t.node] for t in tasks),
           f"a node's own name does not resolve to its address {addresses} inside it:\n{listing}")
    expect(all(t.node3_address == addresses["node3"] for t in tasks),
           f"node3 does not resolve to {addresses['node3']} on every node:\n{listing}")
    print(f"dtrain: ok: every node has its own hostname, /tmp, /dev/shm and address ({addresses})")


def check_step_layout(args):
    tasks = sorted(parse_lines(read_text(args.tasks_file), TaskFacts, args.tasks_file),
                   key=lambda t: int(t.rank))
    expect_equal("task count", len(tasks), args.tasks)
    check_node_isolation(tasks, args.nodes)
    expect_equal("SLURM_STEP_TASKS_PER_NODE (all tasks)",
                 " ".join(sorted({t.step_tasks_per_node for t in tasks})), args.tasks_per_node)
    step_nodes = hostnames(tasks[0].step_nodelist)
    if args.first_node_ranks:
        expect_equal(f"ranks on the first node ({step_nodes[0]})", ranks_on(tasks, step_nodes[0]),
                     args.first_node_ranks)
    expect_equal("ranks per node", " ".join(f"{node}:{ranks_on(tasks, node)}" for node in step_nodes),
                 args.ranks_by_node)


JobTask = collections.namedtuple("JobTask", "job rank host job_id job_nodelist")


def check_concurrent_jobs(args):
    tasks = [t for path in args.outputs for t in parse_lines(read_text(path), JobTask, path)]
    expect_equal("distinct jobs", distinct(tasks, "job_id"), 2)
    expect_equal("node lists of both jobs", " ".join(sorted({t.job_nodelist for t in tasks})),
                 "node[1-4]")
    expect_equal("hosts of both jobs", ",".join(sorted({t.host for t in tasks})),
                 "node1,node2,node3,node4")


def running_daemons(status):
    """{daemon: pid} from `cluster.sh status` ("slurmd.node1   running (pid 123)")."""
    return dict(re.findall(r"^(\S+) +running \(pid (\d+)\)$", status, re.MULTILINE))


def daemon_list(daemons):
    return " ".join(f"{name}:{pid}" for name, pid in daemons.items())


def check_daemons(args):
    daemons = running_daemons(args.status)
    expect_equal(f"daemons running{args.when}", len(daemons), args.running)
    if args.unchanged_from is not None:
        expect_equal("daemon pids after two more up calls", daemon_list(daemons),
                     daemon_list(running_daemons(args.unchanged_from)))


def print_daemon_pids(args):
    print("\n".join(running_daemons(args.status).values()))


PlainTask = collections.namedtuple("PlainTask", "step_id rank host")


def check_sbatch_steps(args):
    out = read_text(args.output)
    lines = out.splitlines()
    expect_equal("first line", lines[0] if lines else "", "batch start on node1")
    expect_equal("last line", lines[-1] if lines else "", "batch done")
    plain = sorted((PlainTask(*m) for m in re.findall(r"^plain step (\S+) rank (\d+) on (\S+)$", out,
                                                      re.MULTILINE)),
                   key=lambda t: int(t.rank))
    expect(len(plain) == sum(line.startswith("plain step ") for line in lines),
           f"a 'plain step' line is not 'plain step ID rank R on HOST':\n{out}")
    expect_equal("plain step tasks", len(plain), 8)
    expect_equal("plain step id", " ".join(sorted({t.step_id for t in plain})), "0")
    expect_equal("plain step hosts by rank", ",".join(t.host for t in plain),
                 "node1,node1,node1,node1,node2,node2,node3,node4")
    expect_equal("MPI step", "\n".join(line for line in lines if line.startswith("allreduce ")),
                 "allreduce sum 36 over 8 ranks on 4 hosts: node1,node2,node3,node4")
    # srun may say that it waits for the previous step's resources: information, not an error.
    expect_equal("output lines with 'error'", sum("error" in line.lower() for line in lines), 0)


# One line per process of `cluster.sh ps`; args is the command line, argv[0] first.
Process = collections.namedtuple("Process", "node pid comm args")


def job_processes():
    """The processes of jobs on the nodes: steps, tasks and batch scripts (not the daemons), as
    check_lib.sh's job_processes lists them."""
    listing = subprocess.run([CLUSTER_SH, "ps", "--state-dir", os.environ["DTRAIN_CLUSTER_DIR"]],
                             capture_output=True, text=True, check=True).stdout
    # A process that exited meanwhile may be listed with no arguments.
    processes = [Process(*(line.split(None, 3) + [""])[:4]) for line in listing.splitlines()]
    return [p for p in processes if p.node != "slurmctld" and p.comm != "slurmd"]


def count_by_node(processes):
    return " ".join(f"{node}:{count}"
                    for node, count in sorted(collections.Counter(p.node for p in processes).items()))


def check_scancel_job_started(args):
    """The batch job of cluster_checks.sh scancel-cleans-up runs everything it was given."""
    def tasks(processes):
        return count_by_node(p for p in processes if p.args.startswith(f"{args.probe}-task"))

    # 8 + 4 tasks laid out 4,2,1,1 and 1,1,1,1 over the nodes. They start within seconds; the
    # bound of 60 s is for a loaded machine.
    expected = "node1:5 node2:3 node3:2 node4:2"
    deadline = time.monotonic() + 60
    processes = job_processes()
    while tasks(processes) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
        processes = job_processes()
    print("\n".join(" ".join(p) for p in processes))
    expect_equal(f"tasks by node of job {args.job_id}", tasks(processes), expected)
    expect_equal("batch script probe on node1",
                 " ".join(p.node for p in processes if p.args.partition(" ")[0] == f"{args.probe}-batch"),
                 "node1")
    step_prefix = f"slurmstepd: [{args.job_id}."
    expect_equal("slurmstepd of the two steps on each node",
                 count_by_node(p for p in processes if p.comm == "slurmstepd"
                               and p.args.startswith(step_prefix) and p.args != f"{step_prefix}batch]"),
                 "node1:2 node2:2 node3:2 node4:2")


CgroupTask = collections.namedtuple("CgroupTask", "rank node cpu_cgroup cpu_seconds")


def check_cpu_share(args):
    tasks = sorted(parse_lines(read_text(args.tasks_file), CgroupTask, args.tasks_file),
                   key=lambda t: int(t.rank))
    expect_equal("distinct CPU cgroups of the step's tasks", distinct(tasks, "cpu_cgroup"), 1)
    expect(tasks[0].cpu_cgroup != "/",
           "the tasks run in the root CPU cgroup, where autogroup gives each node an equal CPU "
           "share; cluster.sh up should have started the daemons in a cgroup of their own")
    print("dtrain: ok: all tasks share one CPU cgroup, not the root one")


def main():
    parser, checks = new_parser(__doc__)
    add_check(checks, "step-layout", check_step_layout,
              "run_step's lines: the step's layout, and nodes that look like separate machines",
              arg("tasks_file"), arg("--tasks", type=int, required=True),
              arg("--nodes", type=int, required=True),
              arg("--tasks-per-node", required=True, help="SLURM_STEP_TASKS_PER_NODE"),
              arg("--ranks-by-node", required=True, help='"node1:0,1 node2:2 ..."'),
              arg("--first-node-ranks", help="ranks on the step's first node, 0,3,4"))
    add_check(checks, "concurrent-jobs", check_concurrent_jobs,
              "the lines of both jobs' tasks: two jobs on all four nodes", arg("outputs", nargs="+"))
    status = arg("status", help="the text of cluster.sh status")
    add_check(checks, "daemons", check_daemons, "cluster.sh status: how many daemons run", status,
              arg("--running", type=int, required=True),
              arg("--when", default="", help="said after 'daemons running'"),
              arg("--unchanged-from", help="an earlier status text with the same pids"))
    add_check(checks, "daemon-pids", print_daemon_pids, "prints the pids of the running daemons", status)
    add_check(checks, "sbatch-steps", check_sbatch_steps,
              "the output of the batch job: a plain step and an MPI step", arg("output"))
    add_check(checks, "scancel-job-started", check_scancel_job_started,
              "waits until the job's tasks run, then checks them and its steps", arg("job_id"),
              arg("probe", help="the names the job's processes start with"))
    add_check(checks, "cpu-share", check_cpu_share,
              "'rank node cpu_cgroup cpu_seconds' lines: one CPU cgroup, not the root one",
              arg("tasks_file"))
    run_check(parser)


if __name__ == "__main__":
    main()
