#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Test harness standing in for the SPANK plugin (srun --distributed-train) until it exists.

Computes this task's DTRAIN_* variables from the launcher's own variables -- Slurm's SLURM_*
under srun (block distribution), Open MPI's OMPI_COMM_WORLD_* under mpirun -- and then execs
the command. It is not part of dtrain: the cluster tests switch to the plugin by replacing
"dtrain_env_wrapper.py ... --" with "--distributed-train" on the srun line.

usage: dtrain_env_wrapper.py [--base-port N] [--corrupt RANK:NAME=VALUE] -- command [args...]
"""
import argparse
import os
import re
import socket
import subprocess
import sys


def expand_counts(text):
    counts = []
    for item in text.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", item)
        if not match:
            sys.exit(f"dtrain: dtrain_env_wrapper.py: cannot read SLURM_STEP_TASKS_PER_NODE={text!r}")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def layout():
    env = os.environ
    if "SLURM_PROCID" in env and "SLURM_STEP_NODELIST" in env:
        hosts = subprocess.run(["scontrol", "show", "hostnames", env["SLURM_STEP_NODELIST"]],
                               check=True, capture_output=True, text=True).stdout.split()
        counts = expand_counts(env["SLURM_STEP_TASKS_PER_NODE"])
        placement = []  # global rank -> (node, local rank), block distribution
        for node, count in enumerate(counts):
            placement += [(node, local) for local in range(count)]
        gtids = [int(x) for x in env["SLURM_GTIDS"].split(",")]
        node = int(env["SLURM_NODEID"])
        if [r for r, (n, _) in enumerate(placement) if n == node] != gtids:
            sys.exit("dtrain: dtrain_env_wrapper.py handles block distribution only "
                     f"(SLURM_GTIDS={env['SLURM_GTIDS']})")
        addresses = [socket.gethostbyname(h) for h in hosts]
        return int(env["SLURM_PROCID"]), placement, addresses, counts
    if "OMPI_COMM_WORLD_RANK" in env:
        size = int(env["OMPI_COMM_WORLD_SIZE"])
        return int(env["OMPI_COMM_WORLD_RANK"]), [(0, r) for r in range(size)], ["127.0.0.1"], [size]
    sys.exit("dtrain: dtrain_env_wrapper.py must run under srun or mpirun")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-port", type=int, default=29500)
    parser.add_argument("--corrupt", action="append", default=[],
                        help="RANK:NAME=VALUE, overrides one variable on one rank")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    rank, placement, addresses, counts = layout()
    node, local = placement[rank]
    endpoints = [f"{addresses[n]}:{args.base_port + l}" for n, l in placement]
    variables = {
        "DTRAIN_RANK": rank, "DTRAIN_WORLD_SIZE": len(placement), "DTRAIN_LOCAL_RANK": local,
        "DTRAIN_LOCAL_WORLD_SIZE": counts[node], "DTRAIN_NODE_RANK": node,
        "DTRAIN_NNODES": len(counts), "DTRAIN_MASTER_ADDR": addresses[0],
        "DTRAIN_MASTER_PORT": args.base_port - 1, "DTRAIN_CURRENT_ENDPOINT": endpoints[rank],
        "DTRAIN_ENDPOINTS": ",".join(endpoints),
    }
    for item in args.corrupt:
        target, _, assignment = item.partition(":")
        name, _, value = assignment.partition("=")
        if int(target) == rank:
            variables[name] = value
    os.environ.update({k: str(v) for k, v in variables.items()})
    os.execvp(command[0], command)


main()
