# SPDX-License-Identifier: Apache-2.0
"""A worker of torchrun started once per node with no arguments of its own:

    srun --distributed-train=torch --ntasks-per-node=1 \\
        python -m torch.distributed.run --nproc-per-node=2 torchrun_worker.py

torchrun takes --nnodes, --node-rank, --master-addr and --master-port from PET_NNODES,
PET_NODE_RANK, PET_MASTER_ADDR and PET_MASTER_PORT, which the dtrain SPANK plugin exports to a
step with one task per node (torch/distributed/argparse_util.py: env). Runs with PyPI's torch 2.x
(setup_pypi_torch_venv.sh).

Checks, in each worker: RANK == node rank * LOCAL_WORLD_SIZE + LOCAL_RANK, where the node rank is
the one the plugin gave the torchrun task (its PET_NODE_RANK and SLURM_NODEID, read from the task's
own environment in /proc/PARENT/environ); WORLD_SIZE == PET_NNODES * LOCAL_WORLD_SIZE; the
rendezvous (MASTER_ADDR:MASTER_PORT and the default group's TCPStore) is the task's
DTRAIN_MASTER_ADDR:DTRAIN_MASTER_PORT; the task's PET_NPROC_PER_NODE is set exactly when it has
GPUs, to the number of its CUDA_VISIBLE_DEVICES; init_process_group('gloo') and an all_reduce give
the right sum. The OK line's result= holds the fields launcher_step.py checks (launcher_common.py).
"""

import os
import sys
from datetime import timedelta

from client_common import Client, ResultError, check_equal, required_int
from launcher_common import (all_reduce_rank_sum, check_rendezvous, dtrain_endpoint,
                             process_environment)

TIMEOUT_S = 60
WATCHDOG_S = 150


def agent_environment():
    """The environment the plugin gave the srun task, which is torchrun's agent: this worker's
    parent."""
    parent = os.getppid()
    with open(f"/proc/{parent}/cmdline", "rb") as f:
        cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
    if "torch.distributed.run" not in cmdline and "torchrun" not in cmdline:
        raise ResultError(f"the parent process {parent} is not torchrun: {cmdline!r}")
    return process_environment(parent)


def body(client):
    rank = client.rank = required_int("RANK")
    world = client.world_size = required_int("WORLD_SIZE")
    local_rank = required_int("LOCAL_RANK")
    local_world = required_int("LOCAL_WORLD_SIZE")

    task = agent_environment()
    node_rank = int(task.get("PET_NODE_RANK", "-1"))
    nnodes = int(task.get("PET_NNODES", "-1"))
    check_equal("the task's PET_NODE_RANK against its SLURM_NODEID", str(node_rank),
                task.get("SLURM_NODEID"))
    check_equal("the task's PET_NNODES against its SLURM_STEP_NUM_NODES", str(nnodes),
                task.get("SLURM_STEP_NUM_NODES"))
    check_equal("the task's PET_MASTER_ADDR:PET_MASTER_PORT",
                f"{task.get('PET_MASTER_ADDR')}:{task.get('PET_MASTER_PORT')}",
                dtrain_endpoint(task))
    check_equal("RANK (node rank * LOCAL_WORLD_SIZE + LOCAL_RANK)", rank,
                node_rank * local_world + local_rank)
    check_equal("WORLD_SIZE (PET_NNODES * LOCAL_WORLD_SIZE)", world, nnodes * local_world)
    check_equal("GROUP_RANK (torchrun's node rank)", required_int("GROUP_RANK"), node_rank)
    # A task with GPUs gets torchrun's --nproc-per-node from the plugin too: one worker per GPU
    # of the task, which sees all of them (launcher_step.py checks the worker count; an explicit
    # --nproc-per-node wins over it).
    task_gpus = task.get("CUDA_VISIBLE_DEVICES", "")
    pet_nproc = task.get("PET_NPROC_PER_NODE")
    if pet_nproc is not None or task_gpus:
        check_equal("the task's PET_NPROC_PER_NODE against its CUDA_VISIBLE_DEVICES", pet_nproc,
                    str(len(task_gpus.split(","))) if task_gpus else None)

    client.phase("import torch")
    import torch
    import torch.distributed as dist

    client.phase(f"init_process_group('gloo') through torchrun's store at "
                 f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}")
    dist.init_process_group("gloo", timeout=timedelta(seconds=TIMEOUT_S))
    check_equal("dist.get_rank()", dist.get_rank(), rank)
    check_equal("dist.get_world_size()", dist.get_world_size(), world)
    rendezvous = check_rendezvous(dist, dtrain_endpoint(task))

    client.phase("all_reduce(SUM) of rank+1")
    total = all_reduce_rank_sum(torch, dist, rank, world)

    client.phase("barrier and destroy_process_group")
    dist.barrier()
    dist.destroy_process_group()
    return (f"all_reduce={total} node_rank={node_rank} local_rank={local_rank} "
            f"pet_nproc={pet_nproc or 'unset'} task_gpus={task_gpus or 'none'} "
            f"job_step={task.get('SLURM_JOB_ID')}.{task.get('SLURM_STEP_ID')} {rendezvous} "
            f"torch={torch.__version__}")


if __name__ == "__main__":
    Client("torchrun", WATCHDOG_S).run(body)
    sys.exit(1)  # not reached: Client.run always exits
