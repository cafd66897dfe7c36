#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Cluster test: a launcher or trainer from PyPI's torch 2.x stack as an
'srun --distributed-train=torch' step, with nothing but the plugin's environment:

  torchrun    srun --distributed-train=torch -N NODES --ntasks-per-node=1 \\
                  VENV/bin/python -m torch.distributed.run --nproc-per-node=P torchrun_worker.py
              (no --nnodes, --node-rank, --master-addr, --master-port or --rdzv-* arguments:
              torchrun reads them from the plugin's PET_* variables; with --gpus-per-node G,
              srun --gres=gpu:G and no --nproc-per-node either: PET_NPROC_PER_NODE)
  lightning   srun --distributed-train=torch -N NODES --ntasks-per-node=T VENV/bin/python
                  lightning_client.py T NODES  (a Trainer with strategy="ddp" on the CPU, one epoch)
  accelerate  srun --distributed-train=torch -N NODES --ntasks-per-node=T VENV/bin/python
                  accelerate_client.py  (Accelerator() and a training loop, one epoch)
  jax         srun --distributed-train=jax -N NODES --ntasks-per-node=T VENV/bin/python
                  jax_client.py  (jax.distributed.initialize() with no arguments, an all-gather);
              or -n TASKS -m cyclic for an uneven cyclic layout (--ntasks, --distribution)

With --concurrent K, K such steps run at the same time in one batch job on the same nodes (srun
--overlap ... & in the batch script), as a sweep does; their groups must all be alive at once
and never meet.

The test passes when every rank of every step prints its OK line: ranks 0..W-1 exactly once per
step, all with world W, over exactly NODES distinct hosts, each step's ranks agreeing on one
dtrain endpoint (DTRAIN_MASTER_ADDR:DTRAIN_MASTER_PORT of the tasks) at which MASTER_ADDR,
MASTER_PORT and the default group's TCPStore all point; concurrent steps have distinct endpoints.
For torchrun also: RANK == node rank * P + LOCAL_RANK, and each node rank on one host.

Needs the local cluster's environment (SLURM_CONF from DIR/env.sh of slurm/local/cluster.sh)
with the plugin loaded: the slurm_cluster fixture. The venv comes from setup_pypi_torch_venv.sh;
when it is missing and PyPI is unreachable, the test skips (exit 77).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

from client_common import EXIT_BARRIER_VARIABLE, launcher_environment
from launcher_common import OVERLAP_DIR_VARIABLE, OVERLAP_STEPS_VARIABLE
from step_common import OK_LINE, StepFailed, cluster_env

CLIENT_DIR = Path(__file__).resolve().parent
CLIENTS = {"torchrun": "torchrun_worker.py", "lightning": "lightning_client.py",
           "accelerate": "accelerate_client.py", "jax": "jax_client.py"}
PYPI = "https://pypi.org/simple/pip/"
# Above the clients' own watchdogs (150 s, 240 s), so a hang is reported by the client that hung.
STEP_TIMEOUT_S = 300
SKIPPED = 77


def skip_if_no_venv(python):
    """Exit 77 when the venv is missing because PyPI is unreachable; fail when it is missing for
    another reason."""
    if os.access(python, os.X_OK):
        return
    try:
        with urllib.request.urlopen(PYPI, timeout=30):
            pass
    except OSError as error:
        print(f"dtrain: skipped: PyPI ({PYPI}) is unreachable ({error}), so the venv of "
              f"setup_pypi_torch_venv.sh with {python} could not be made", flush=True)
        sys.exit(SKIPPED)
    raise StepFailed(f"{python} is missing although PyPI is reachable: run the "
                     "clients_pypi_torch_venv test (setup_pypi_torch_venv.sh) first")


def fields(result):
    return dict(item.split("=", 1) for item in result.split() if "=" in item)


def check_step(lines, framework, nodes, world, nproc, gpus_per_node):
    """Checks one step's OK lines; returns (job_step, dtrain endpoint, hosts)."""
    ranks = Counter(int(m.group(2)) for m in lines)
    if sorted(ranks) != list(range(world)) or any(count != 1 for count in ranks.values()):
        raise StepFailed(f"expected one OK line from each of ranks 0..{world - 1}, got ranks "
                         f"{sorted(ranks.elements())}")
    results = [(m, fields(m.group(5))) for m in lines]
    for m, f in results:
        if m.group(1) != framework or int(m.group(3)) != world:
            raise StepFailed(f"unexpected verdict {m.group(0)!r}: framework or world size wrong")
        if not f.get("dtrain") or not f["dtrain"].split(":")[-1].isdigit():
            raise StepFailed(f"rank {m.group(2)} reports no dtrain endpoint: {m.group(0)!r}")
        if f.get("master") != f["dtrain"] or f.get("store") != f["dtrain"]:
            raise StepFailed(f"rank {m.group(2)} met at master={f.get('master')} "
                             f"store={f.get('store')}, not at dtrain's endpoint {f['dtrain']}")
    endpoints = {f["dtrain"] for _, f in results}
    steps = {f.get("job_step") for _, f in results}
    if len(endpoints) != 1 or len(steps) != 1:
        raise StepFailed(f"the ranks of one step report endpoints {sorted(endpoints)} and steps "
                         f"{sorted(map(str, steps))}")
    hosts = Counter(m.group(4) for m, _ in results)
    if len(hosts) != nodes:
        raise StepFailed(f"ranks ran on {len(hosts)} host(s) {dict(hosts)}, expected {nodes} nodes")
    if framework == "torchrun":
        node_hosts = defaultdict(set)
        for m, f in results:
            rank, node_rank, local_rank = int(m.group(2)), int(f["node_rank"]), int(f["local_rank"])
            if rank != node_rank * nproc + local_rank:
                raise StepFailed(f"rank {rank} has node rank {node_rank} and local rank "
                                 f"{local_rank}: expected rank {node_rank * nproc + local_rank}")
            node_hosts[node_rank].add(m.group(4))
            # With --gres=gpu:G the torchrun task sees its G GPUs and the plugin sets torchrun's
            # worker count to G (the worker checks PET_NPROC_PER_NODE against the GPUs the task
            # sees in every case; world == N * G above shows torchrun used it).
            gpus = f.get("task_gpus", "none")
            gpu_count = 0 if gpus == "none" else len(gpus.split(","))
            if gpus_per_node and (f.get("pet_nproc") != str(gpus_per_node) or
                                  gpu_count != gpus_per_node):
                raise StepFailed(f"rank {rank}: the torchrun task had PET_NPROC_PER_NODE="
                                 f"{f.get('pet_nproc')} and CUDA_VISIBLE_DEVICES={gpus}, "
                                 f"expected {gpus_per_node} and {gpus_per_node} GPUs")
        if sorted(node_hosts) != list(range(nodes)) or any(len(h) != 1 for h in
                                                           node_hosts.values()):
            raise StepFailed(f"node ranks and hosts do not pair up: {dict(node_hosts)}")
    return steps.pop(), endpoints.pop(), hosts


def single_step(command, env, barrier):
    env[EXIT_BARRIER_VARIABLE] = barrier
    print("dtrain: running:", " ".join(command), flush=True)
    try:
        step = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True,
                              timeout=STEP_TIMEOUT_S)
    except subprocess.TimeoutExpired as expired:
        sys.stdout.write(expired.stdout or "")
        raise StepFailed(f"the step did not finish in {STEP_TIMEOUT_S} s") from None
    sys.stdout.write(step.stdout)
    if step.returncode != 0:
        raise StepFailed(f"srun exited with status {step.returncode}")
    return step.stdout


def concurrent_steps(command, env, workdir, count, nodes, ntasks_per_node):
    """COUNT copies of COMMAND started with --overlap side by side in one batch job on NODES
    nodes; returns all their output."""
    work = Path(workdir)
    overlap = work / "overlap"
    overlap.mkdir()
    script = ["#!/bin/bash", "failed=0", "pids=()"]
    for k in range(count):
        barrier = work / f"barrier.{k}"
        barrier.mkdir()
        srun = [command[0], "--overlap", f"--export=ALL,{EXIT_BARRIER_VARIABLE}={barrier}",
                *command[1:]]
        script.append(f"{' '.join(srun)} >{work}/step.{k}.out 2>&1 &")
        script.append("pids+=($!)")
    script += ['for pid in "${pids[@]}"; do wait "$pid" || failed=1; done', "exit $failed"]
    (work / "job.sh").write_text("\n".join(script) + "\n")
    env[OVERLAP_DIR_VARIABLE] = str(overlap)
    env[OVERLAP_STEPS_VARIABLE] = str(count)
    batch = ["sbatch", "--wait", f"-N{nodes}", f"--ntasks-per-node={ntasks_per_node}",
             f"--output={work}/job.out", f"{work}/job.sh"]
    print("dtrain: running:", " ".join(batch), "with", count, "steps side by side:",
          " ".join(command), flush=True)
    try:
        job = subprocess.run(batch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=STEP_TIMEOUT_S)
        failure = None if job.returncode == 0 else f"sbatch --wait exited {job.returncode}"
        sys.stdout.write(job.stdout)
    except subprocess.TimeoutExpired:
        failure = f"the job did not finish in {STEP_TIMEOUT_S} s"
    output = ""
    for k in range(count):
        path = work / f"step.{k}.out"
        text = path.read_text() if path.exists() else ""
        print(f"dtrain: step {k} of the job:", flush=True)
        sys.stdout.write(text)
        output += text
    if failure:
        raise StepFailed(failure)
    return output


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", required=True, choices=sorted(CLIENTS))
    parser.add_argument("-N", "--nodes", type=int, required=True)
    parser.add_argument("--ntasks-per-node", type=int, default=1)
    parser.add_argument("-n", "--ntasks", type=int, default=0,
                        help="jax only: TASKS tasks in all instead of --ntasks-per-node (an "
                             "uneven layout)")
    parser.add_argument("-m", "--distribution", default="",
                        help="jax only: srun's --distribution, e.g. cyclic")
    parser.add_argument("--nproc-per-node", type=int, default=1,
                        help="torchrun's workers per node (torchrun only)")
    parser.add_argument("--gpus-per-node", type=int, default=0, metavar="G",
                        help="torchrun only: ask for G gres GPUs per node (--gres=gpu:G) and "
                             "leave out --nproc-per-node, which torchrun then takes from the "
                             "plugin's PET_NPROC_PER_NODE")
    parser.add_argument("--python", required=True, help="the venv's interpreter")
    parser.add_argument("--concurrent", type=int, default=1, metavar="K",
                        help="run K steps side by side in one batch job")
    args = parser.parse_args()
    if args.framework == "torchrun" and args.ntasks_per_node != 1:
        parser.error("torchrun runs one task per node")
    if args.gpus_per_node and args.framework != "torchrun":
        parser.error("--gpus-per-node is for torchrun")
    if (args.ntasks or args.distribution) and args.framework != "jax":
        parser.error("--ntasks and --distribution are for jax")
    if args.ntasks and args.concurrent > 1:
        parser.error("--ntasks is for a single step")
    shape = (f"-n{args.ntasks}" if args.ntasks else f"--ntasks-per-node={args.ntasks_per_node}")
    shape += f" -m {args.distribution}" if args.distribution else ""
    label = (f"{args.framework} -N{args.nodes} {shape}"
             + (f" --gres=gpu:{args.gpus_per_node} (workers: PET_NPROC_PER_NODE)"
                if args.gpus_per_node else
                f" --nproc-per-node={args.nproc_per_node}" if args.framework == "torchrun" else "")
             + (f" x{args.concurrent} concurrent" if args.concurrent > 1 else ""))
    if args.gpus_per_node:
        args.nproc_per_node = args.gpus_per_node

    try:
        cluster_env("SLURM_CONF")
        skip_if_no_venv(args.python)
        client = str(CLIENT_DIR / CLIENTS[args.framework])
        task = [args.python, client]
        if args.framework == "lightning":
            task += [str(args.ntasks_per_node), str(args.nodes)]
        gres = []
        if args.framework == "torchrun":
            nproc = [] if args.gpus_per_node else [f"--nproc-per-node={args.nproc_per_node}"]
            task = [args.python, "-m", "torch.distributed.run", *nproc, client]
            gres = [f"--gres=gpu:{args.gpus_per_node}"] if args.gpus_per_node else []
        family = "jax" if args.framework == "jax" else "torch"
        tasks = ([f"-n{args.ntasks}"] if args.ntasks else
                 [f"--ntasks-per-node={args.ntasks_per_node}"])
        if args.distribution:
            tasks.append(f"--distribution={args.distribution}")
        command = ["srun", f"--distributed-train={family}", f"-N{args.nodes}", *tasks, *gres,
                   "--kill-on-bad-exit=1", *task]
        world = args.ntasks or args.nodes * args.ntasks_per_node * (
            args.nproc_per_node if args.framework == "torchrun" else 1)
        env = launcher_environment(
            os.environ, {"GLOO_SOCKET_IFNAME": cluster_env("DTRAIN_CLUSTER_NODE_IFNAME")})
        # The nodes' /tmp is private; the cluster's state directory is seen by all of them.
        with tempfile.TemporaryDirectory(prefix=f"{args.framework}-step.",
                                         dir=cluster_env("DTRAIN_CLUSTER_DIR")) as work:
            if args.concurrent > 1:
                output = concurrent_steps(command, env, work, args.concurrent, args.nodes,
                                          args.ntasks_per_node)
            else:
                output = single_step(command, env, work)
        per_step = defaultdict(list)
        for line in output.splitlines():
            m = OK_LINE.match(line)
            if m:
                per_step[fields(m.group(5)).get("job_step")].append(m)
        if len(per_step) != args.concurrent:
            raise StepFailed(f"expected OK lines from {args.concurrent} step(s), got steps "
                             f"{sorted(map(str, per_step))}")
        summaries = []
        endpoints = {}
        for job_step, lines in sorted(per_step.items()):
            _, endpoint, hosts = check_step(lines, args.framework, args.nodes, world,
                                            args.nproc_per_node, args.gpus_per_node)
            if endpoint in endpoints:
                raise StepFailed(f"steps {endpoints[endpoint]} and {job_step} both met at "
                                 f"{endpoint}")
            endpoints[endpoint] = job_step
            layout = ",".join(f"{host}:{count}" for host, count in sorted(hosts.items()))
            summaries.append(f"step {job_step}: {world} ranks ({layout}) met at dtrain's "
                             f"{endpoint}")
    except StepFailed as failure:
        print(f"dtrain: FAIL {label}: {failure}", file=sys.stderr, flush=True)
        return 1
    print(f"dtrain: PASS {label}: {'; '.join(summaries)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
