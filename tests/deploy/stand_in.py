#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Stands in for the program of an sbatch template (train.py, dtrain-check, ...): records the
variables such a program reads, and its arguments, as one JSON file per task.

Usage: stand_in.py DIR ROLE [ARGS...]. DIR must be outside /tmp (private per node); ROLE names
what this process stands in for; ARGS are what the template passed to the program. As "bench",
rank 0 also prints the nccl-tests summary line that templates parse, with the bus bandwidth
given in STAND_IN_BUSBW (GB/s, default 1.5).
"""
import json
import os
import socket
import sys

PREFIXES = ("DTRAIN_", "SLURM_", "PADDLE_", "CUDA_", "NCCL_", "TF_CONFIG")
NAMES = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PMIX_RANK", "PMIX_NAMESPACE",
    "UCX_NET_DEVICES", "OMP_NUM_THREADS", "FLAGS_selected_gpus",
}

if len(sys.argv) < 3:
    print("dtrain: usage: stand_in.py DIR ROLE [ARGS...]", file=sys.stderr)
    sys.exit(2)
out_dir, role, args = sys.argv[1], sys.argv[2], sys.argv[3:]
report = {name: value for name, value in os.environ.items() if name in NAMES or name.startswith(PREFIXES)}
host = socket.gethostname()
report.update({"role": role, "args": args, "host": host, "host_addr": socket.gethostbyname(host)})
for name in ("DTRAIN_ENDPOINTS_FILE", "PADDLE_TRAINER_ENDPOINTS_FILE", "TF_CONFIG_FILE"):
    if name in report:
        with open(report[name]) as f:
            report[name + ":content"] = f.read()
path = os.path.join(out_dir, f"{role}-job{report.get('SLURM_JOB_ID')}-step{report.get('SLURM_STEP_ID')}"
                             f"-rank{report.get('SLURM_PROCID')}.json")
with open(path, "w") as f:
    json.dump(report, f, sort_keys=True)
if role == "bench" and report.get("DTRAIN_RANK") == "0":
    print(f"# Avg bus bandwidth    : {os.environ.get('STAND_IN_BUSBW', '1.5')}")
print(f"stand-in {role}: rank {report.get('DTRAIN_RANK', '-')} of {report.get('DTRAIN_WORLD_SIZE', '-')} on {host}")
