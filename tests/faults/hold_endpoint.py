#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Runs COMMAND; on the task whose DTRAIN_RANK is --rank, first listens on that task's own
DTRAIN_CURRENT_ENDPOINT from this (foreign) process, as a stray server left on the node would.

Usage: hold_endpoint.py --rank R -- COMMAND [ARGS...]
The held socket is not inherited by COMMAND and is closed when COMMAND ends.
"""
import argparse
import os
import socket
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", type=int, required=True, help="the rank whose endpoint is held")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no COMMAND given after --")
    held = None
    if os.environ.get("DTRAIN_RANK") == str(args.rank):
        endpoint = os.environ.get("DTRAIN_CURRENT_ENDPOINT")
        if not endpoint:
            sys.exit("dtrain: hold_endpoint.py: DTRAIN_CURRENT_ENDPOINT is unset; launch with srun --distributed-train")
        address, port = endpoint.rsplit(":", 1)
        # No SO_REUSEADDR: a plain server, which the bootstrap's own listener cannot share.
        held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        held.bind((address, int(port)))
        held.listen()
        print(f"hold_endpoint.py: rank {args.rank} on {socket.gethostname()}: holding {endpoint}", flush=True)
    status = subprocess.run(command).returncode
    if held:
        held.close()
    sys.exit(status if status >= 0 else 128 - status)


if __name__ == "__main__":
    main()
