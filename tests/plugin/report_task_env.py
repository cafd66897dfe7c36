#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Runs as one task of a step: records what the task really is and what the plugin exported.

Usage: report_task_env.py [DIR]. With DIR (outside /tmp, which is private per node), writes one
JSON file per task there; without, prints one JSON line.
"""
import json
import os
import socket
import sys

NAMES = [
    "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_JOB_ID", "SLURM_STEP_ID",
    "SLURM_STEP_RESV_PORTS", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "PADDLE_DISTRI_BACKEND",
    "DTRAIN_RANK", "DTRAIN_WORLD_SIZE", "DTRAIN_LOCAL_RANK", "DTRAIN_LOCAL_WORLD_SIZE",
    "DTRAIN_NODE_RANK", "DTRAIN_NNODES", "DTRAIN_MASTER_ADDR", "DTRAIN_MASTER_PORT",
    "DTRAIN_CURRENT_ENDPOINT", "DTRAIN_ENDPOINTS", "DTRAIN_ENDPOINTS_FILE", "DTRAIN_ENDPOINTS_HASH", "DTRAIN_FRAMEWORKS",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS",
    "PADDLE_TRAINER_ENDPOINTS_FILE", "PADDLE_CURRENT_ENDPOINT", "PADDLE_RANK_IN_NODE",
    "PADDLE_LOCAL_RANK", "PADDLE_GLOBAL_RANK", "PADDLE_GLOBAL_SIZE", "PADDLE_LOCAL_SIZE",
    "PADDLE_NNODES", "PADDLE_MASTER", "TF_CONFIG", "TF_CONFIG_FILE",
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NCCL_IB_HCA", "UCX_NET_DEVICES", "DTRAIN_NIC",
    "NCCL_SOCKET_IFNAME", "OMP_NUM_THREADS", "DTRAIN_CPU_LIST", "DTRAIN_GPU_BUS_IDS",
    "DTRAIN_CUDA_DEVICE", "FLAGS_selected_gpus", "JAX_COORDINATOR_ADDRESS", "JAX_LOCAL_DEVICE_IDS",
    "PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NPROC_PER_NODE",
    # Container runs (tests/containers): dtrain's request to pyxis, which tasks must not see.
    "PYXIS_CONTAINER_ENV",
]

host = socket.gethostname()
report = {name: os.environ[name] for name in NAMES if name in os.environ}
report["host"] = host
report["host_addr"] = socket.gethostbyname(host)
with open("/proc/self/status") as status:
    for line in status:
        if line.startswith("Cpus_allowed_list:"):
            report["cpus_allowed"] = line.split(":", 1)[1].strip()
# Which root file system the task runs in: the test image's sets PYTORCH_VERSION here.
with open("/etc/environment") as f:
    report["etc_environment"] = f.read()
for name in ("DTRAIN_ENDPOINTS_FILE", "PADDLE_TRAINER_ENDPOINTS_FILE", "TF_CONFIG_FILE"):
    if name in report:
        with open(report[name]) as f:
            report[name + ":content"] = f.read()
# srun interleaves long lines of different tasks, so a report directory is preferred.
if len(sys.argv) > 1:
    path = os.path.join(sys.argv[1], f"job{report.get('SLURM_JOB_ID')}-step{report.get('SLURM_STEP_ID')}-rank{report['SLURM_PROCID']}.json")
    with open(path, "w") as f:
        json.dump(report, f, sort_keys=True)
else:
    print("DTRAIN_REPORT " + json.dumps(report, sort_keys=True), flush=True)
