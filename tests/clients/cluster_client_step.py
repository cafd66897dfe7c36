#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Cluster test: one real framework client as an 'srun --distributed-train=FRAMEWORK' step.

The tasks get nothing but what the dtrain SPANK plugin exports for FRAMEWORK (plus
GLOO_SOCKET_IFNAME, the nodes' interface from the cluster's env.sh, and CLIENT_EXIT_BARRIER_DIR
where the ranks meet before they exit); every contract variable inherited from the caller is
removed before srun. Every node has a network stack of its own, so servers that bind the wildcard
address (TensorFlow's gRPC) need nothing more. The step passes when every
rank prints its OK line: ranks 0..n-1 exactly once, all with world n, spread over exactly N
emulated nodes (distinct host names).

Needs the local cluster's environment (SLURM_CONF from DIR/env.sh of slurm/local/cluster.sh) with the
plugin loaded by its plugstack.conf: the slurm_cluster fixture of tests/cluster and tests/plugin.
"""

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from client_common import CLIENTS, EXIT_BARRIER_VARIABLE, launcher_environment
from step_common import OK_LINE, StepFailed, cluster_env

CLIENT_DIR = Path(__file__).resolve().parent
# Above the clients' own watchdogs (150 s), so a hang is reported by the client that hung.
STEP_TIMEOUT_S = 200


def check_ok_lines(output, framework, nodes, ntasks):
    verdicts = [OK_LINE.match(line) for line in output.splitlines()]
    verdicts = [m for m in verdicts if m]
    ranks = Counter(int(m.group(2)) for m in verdicts)
    if sorted(ranks) != list(range(ntasks)) or any(count != 1 for count in ranks.values()):
        raise StepFailed(f"expected one OK line from each of ranks 0..{ntasks - 1}, got ranks "
                         f"{sorted(ranks.elements())}")
    for m in verdicts:
        if m.group(1) != framework or int(m.group(3)) != ntasks:
            raise StepFailed(f"unexpected verdict {m.group(0)!r}: framework or world size wrong")
    hosts = Counter(m.group(4) for m in verdicts)
    if len(hosts) != nodes:
        raise StepFailed(f"ranks ran on {len(hosts)} host(s) {dict(hosts)}, expected {nodes} nodes")
    results = {m.group(5).split()[0] for m in verdicts}
    return hosts, results


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", required=True, choices=sorted(CLIENTS))
    parser.add_argument("-N", "--nodes", type=int, required=True)
    parser.add_argument("-n", "--ntasks", type=int, required=True)
    parser.add_argument("--python", required=True,
                        help="interpreter of the client (/usr/bin/python3, or the venv's)")
    parser.add_argument("--het", metavar="N:n,N:n...",
                        help="run a heterogeneous step instead, one component per N:n (its nodes "
                             "and tasks); -N and -n are then the totals")
    parser.add_argument("--srun-option", action="append", default=[], metavar="OPTION",
                        help="one more srun option, e.g. --container-image=PATH (repeatable)")
    parser.add_argument("--task-prefix", default="", metavar="COMMAND",
                        help="what runs the client, e.g. 'ch-run IMAGE --' (split as a shell "
                             "would)")
    args = parser.parse_args()

    try:
        cluster_env("SLURM_CONF")
        task = [*shlex.split(args.task_prefix), args.python,
                str(CLIENT_DIR / CLIENTS[args.framework])]
        command = ["srun", f"--distributed-train={args.framework}", f"-N{args.nodes}",
                   f"-n{args.ntasks}", "--kill-on-bad-exit=1", *args.srun_option, *task]
        if args.het:
            command = ["srun", "--kill-on-bad-exit=1"]
            for k, component in enumerate(args.het.split(",")):
                nodes, tasks = component.split(":")
                command += ([":"] if k else []) + [f"--distributed-train={args.framework}",
                                                   f"-N{nodes}", f"-n{tasks}", *task]
        print("dtrain: running:", " ".join(command), flush=True)
        # The nodes' /tmp is private; the cluster's state directory is seen by all of them.
        with tempfile.TemporaryDirectory(prefix="client-exit.",
                                         dir=cluster_env("DTRAIN_CLUSTER_DIR")) as barrier:
            env = launcher_environment(
                os.environ, {"GLOO_SOCKET_IFNAME": cluster_env("DTRAIN_CLUSTER_NODE_IFNAME")})
            env[EXIT_BARRIER_VARIABLE] = barrier
            # The gres profiles' topology gives every task GPUs, which Paddle's CPU wheel cannot
            # use: as on a GPU node with a CPU build, the user picks gloo (the plugin sets it
            # only for tasks without GPUs).
            if (args.framework == "paddle" and
                    os.environ.get("DTRAIN_CLUSTER_PROFILE") in ("gres", "site")):
                env["PADDLE_DISTRI_BACKEND"] = "gloo"
            try:
                step = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True,
                                      timeout=STEP_TIMEOUT_S)
            except subprocess.TimeoutExpired as expired:
                sys.stdout.write(expired.stdout or "")
                raise StepFailed(f"the step did not finish in {STEP_TIMEOUT_S} s") from None
        sys.stdout.write(step.stdout)
        if step.returncode != 0:
            raise StepFailed(f"srun exited with status {step.returncode}")
        hosts, results = check_ok_lines(step.stdout, args.framework, args.nodes, args.ntasks)
    except StepFailed as failure:
        print(f"dtrain: FAIL {args.framework} -N{args.nodes} -n{args.ntasks}: {failure}",
              file=sys.stderr, flush=True)
        return 1
    layout = ",".join(f"{host}:{count}" for host, count in sorted(hosts.items()))
    print(f"dtrain: PASS {args.framework} -N{args.nodes} -n{args.ntasks}: ranks per host "
          f"{layout}, {' '.join(sorted(results))}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
