#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Development harness: run a framework client as N local processes without Slurm.

This is NOT the contract test. The contract tests run the clients through
'srun --distributed-train' with the real SPANK plugin (see CMakeLists.txt here). This harness only
lets the clients be developed on a machine without the cluster: it starts N processes with the
environment the plugin would export for a block layout of N tasks over --nodes emulated nodes,
computed by the contract's rules (ARCHITECTURE.md section 2):

  node k has address 127.0.1.(k+1) when --nodes > 1, else 127.0.0.1;
  endpoint r = addr(node of r):(base_port + local_rank(r)), ordered by global rank;
  MASTER_ADDR:MASTER_PORT = addr(node of rank 0):(base_port + max tasks per node), outside the
  endpoint range.

With --nodes > 1 all emulated nodes still share this host's network stack, where TensorFlow's
gRPC servers, which bind the wildcard address, collide; run TensorFlow over several nodes on the
local cluster instead, whose nodes each have a network stack (cluster_client_step.py).

Every contract variable is removed from the inherited environment, so a client cannot pass by
reading a variable the plugin does not export. The loopback settings the cluster tests also set
(GLOO_SOCKET_IFNAME=lo) and the exit barrier directory (CLIENT_EXIT_BARRIER_DIR) are added.
"""

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from client_common import CLIENTS, EXIT_BARRIER_VARIABLE, LOOPBACK_SETTINGS, launcher_environment

CLIENT_DIR = Path(__file__).resolve().parent


def block_layout(tasks, nodes):
    """Slurm's block distribution: node k gets ceil or floor of tasks/nodes, first nodes first."""
    per_node = [tasks // nodes + (1 if k < tasks % nodes else 0) for k in range(nodes)]
    layout = []
    for node, count in enumerate(per_node):
        layout.extend((node, local) for local in range(count))
    return per_node, layout


def node_address(node, nodes):
    return "127.0.0.1" if nodes == 1 else f"127.0.1.{node + 1}"


def ports_free(addresses_and_ports):
    for address, port in addresses_and_ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((address, port))
            except OSError:
                return False
    return True


def pick_base_port(addresses, span):
    for _ in range(100):
        base = random.randrange(20000, 30000)
        if ports_free([(a, base + i) for a in addresses for i in range(span)]):
            return base
    raise SystemExit("dtrain: run_local: no free port range found in 20000-30000; "
                     "free some ports or retry")


def contract_environment(tasks, nodes):
    per_node, layout = block_layout(tasks, nodes)
    addresses = [node_address(k, nodes) for k in range(nodes)]
    span = max(per_node) + 1
    base = pick_base_port(addresses, span)
    endpoints = [f"{addresses[node]}:{base + local}" for node, local in layout]
    master_addr, master_port = addresses[layout[0][0]], str(base + max(per_node))
    environments = []
    for rank, (node, local) in enumerate(layout):
        env = {
            "DTRAIN_RANK": str(rank), "DTRAIN_WORLD_SIZE": str(tasks),
            "DTRAIN_LOCAL_RANK": str(local), "DTRAIN_LOCAL_WORLD_SIZE": str(per_node[node]),
            "DTRAIN_NODE_RANK": str(node), "DTRAIN_NNODES": str(nodes),
            "DTRAIN_MASTER_ADDR": master_addr, "DTRAIN_MASTER_PORT": master_port,
            "DTRAIN_CURRENT_ENDPOINT": endpoints[rank], "DTRAIN_ENDPOINTS": ",".join(endpoints),
            "RANK": str(rank), "WORLD_SIZE": str(tasks), "LOCAL_RANK": str(local),
            "LOCAL_WORLD_SIZE": str(per_node[node]), "GROUP_RANK": str(node),
            "GROUP_WORLD_SIZE": str(nodes), "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(tasks),
            "MASTER_ADDR": master_addr, "MASTER_PORT": master_port,
            "PADDLE_TRAINER_ID": str(rank), "PADDLE_TRAINERS_NUM": str(tasks),
            "PADDLE_TRAINER_ENDPOINTS": ",".join(endpoints),
            "PADDLE_CURRENT_ENDPOINT": endpoints[rank], "PADDLE_RANK_IN_NODE": str(local),
            "PADDLE_LOCAL_RANK": str(local), "PADDLE_GLOBAL_RANK": str(rank),
            "PADDLE_GLOBAL_SIZE": str(tasks), "PADDLE_LOCAL_SIZE": str(per_node[node]),
            "PADDLE_NNODES": str(nodes), "PADDLE_MASTER": f"{master_addr}:{master_port}",
            "TF_CONFIG": json.dumps({"cluster": {"worker": endpoints},
                                     "task": {"type": "worker", "index": rank}}),
        }
        environments.append(env)
    return environments


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", required=True, choices=sorted(CLIENTS))
    parser.add_argument("-n", "--ntasks", type=int, required=True, help="number of ranks (>= 2)")
    parser.add_argument("-N", "--nodes", type=int, default=1,
                        help="emulated nodes (distinct 127.0.1.N addresses); default 1")
    parser.add_argument("--venv", default=os.environ.get("DTRAIN_CLIENT_VENV"),
                        help="venv made by setup_venv.sh (paddle, tf); default $DTRAIN_CLIENT_VENV")
    parser.add_argument("--timeout", type=float, default=240, help="seconds for the whole run")
    parser.add_argument("--extra-env", action="append", default=[], metavar="NAME=VALUE",
                        help="add a variable to every task (to try what a framework needs)")
    args = parser.parse_args()
    if args.ntasks < 2 or not 1 <= args.nodes <= args.ntasks:
        parser.error("need -n >= 2 and 1 <= -N <= -n")
    if args.framework == "tf" and args.nodes > 1:
        parser.error("tf with --nodes > 1: the emulated nodes share one network stack, where "
                     "TensorFlow's wildcard-bound servers collide; use the local cluster "
                     "(cluster_client_step.py) for several nodes")
    if args.framework == "torch":
        python = "/usr/bin/python3"
    elif not args.venv:
        parser.error(f"--venv (or DTRAIN_CLIENT_VENV) is required for {args.framework}; "
                     "create it with tests/clients/setup_venv.sh VENV_DIR")
    else:
        python = str(Path(args.venv) / "bin" / "python")

    base_env = launcher_environment(os.environ, LOOPBACK_SETTINGS)
    barrier = tempfile.TemporaryDirectory(prefix="dtrain-client-exit.")
    base_env[EXIT_BARRIER_VARIABLE] = barrier.name
    for item in args.extra_env:
        name, _, value = item.partition("=")
        base_env[name] = value
    script = str(CLIENT_DIR / CLIENTS[args.framework])
    started = time.monotonic()
    processes = [subprocess.Popen([python, script], env={**base_env, **task_env})
                 for task_env in contract_environment(args.ntasks, args.nodes)]
    deadline = started + args.timeout
    statuses = []
    for process in processes:
        try:
            statuses.append(process.wait(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            process.kill()
            statuses.append(process.wait())
    elapsed = time.monotonic() - started
    barrier.cleanup()
    verdict = "PASS" if all(status == 0 for status in statuses) else "FAIL"
    print(f"run_local: {verdict} {args.framework} -n {args.ntasks} -N {args.nodes} "
          f"exit statuses {statuses} in {elapsed:.1f} s", flush=True)
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
