# SPDX-License-Identifier: Apache-2.0
"""Hugging Face Accelerate client: Accelerator() and a plain training loop, under

    srun --distributed-train=torch -N2 --ntasks-per-node=2 python accelerate_client.py

Accelerate has no Slurm detection of its own: PartialState reads RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT (accelerate/state.py, utils/environment.py
get_cpu_distributed_information), which the dtrain SPANK plugin exports, and keeps MASTER_ADDR and
MASTER_PORT when they are set. On a machine without GPUs it needs Accelerator(cpu=True) to form a
multi-process CPU (gloo) group; with GPUs the default Accelerator() does (LOCAL_RANK is set).
Runs with PyPI's torch 2.x and accelerate (setup_pypi_torch_venv.sh).

Checks: PartialState().process_index == SLURM_PROCID, num_processes == SLURM_NTASKS,
local_process_index == SLURM_LOCALID; one epoch of a small linear model through
accelerator.prepare and accelerator.backward lowers the loss on the whole data set and leaves every
rank with the same parameters; the rendezvous (MASTER_ADDR:MASTER_PORT and the default group's
TCPStore) is dtrain's DTRAIN_MASTER_ADDR:DTRAIN_MASTER_PORT; an all_reduce gives the right sum.
"""

import os
import sys

from client_common import Client, ResultError, check_equal, required_int
from launcher_common import (all_reduce_rank_sum, check_rendezvous, check_same_parameters,
                             dtrain_endpoint)

WATCHDOG_S = 240


def full_loss(torch, model, inputs, targets):
    """The mean squared error of MODEL on the whole data set."""
    with torch.no_grad():
        return torch.nn.functional.mse_loss(model(inputs), targets).item()


def body(client):
    rank = client.rank = required_int("SLURM_PROCID")
    world = client.world_size = required_int("SLURM_NTASKS")
    dtrain = dtrain_endpoint(os.environ)

    client.phase("import torch and accelerate")
    import torch
    import torch.distributed as dist
    import accelerate
    from accelerate import Accelerator, PartialState
    from torch.utils.data import DataLoader, TensorDataset

    client.phase(f"Accelerator(cpu=True): the gloo group at dtrain's endpoint {dtrain}")
    # The recipe's code (from here to the end of the loop).
    accelerator = Accelerator(cpu=True)
    state = PartialState()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    inputs = torch.randn(256, 4)
    targets = inputs @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    data = DataLoader(TensorDataset(inputs, targets), batch_size=16)
    model, optimizer, data = accelerator.prepare(model, optimizer, data)
    loss_before = full_loss(torch, accelerator.unwrap_model(model), inputs, targets)
    model.train()
    batches = 0
    for batch_inputs, batch_targets in data:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(batch_inputs), batch_targets)
        accelerator.backward(loss)
        optimizer.step()
        batches += 1
    loss_after = full_loss(torch, accelerator.unwrap_model(model), inputs, targets)

    client.phase("checks of the ranks, the epoch and the rendezvous")
    check_equal("PartialState().process_index (SLURM_PROCID)", state.process_index, rank)
    check_equal("PartialState().num_processes (SLURM_NTASKS)", state.num_processes, world)
    check_equal("PartialState().local_process_index (SLURM_LOCALID)", state.local_process_index,
                required_int("SLURM_LOCALID"))
    check_equal("accelerator.distributed_type", accelerator.distributed_type.name, "MULTI_CPU")
    check_equal("the batches of this rank's shard", batches, 256 // 16 // world)
    if not loss_after < loss_before:
        raise ResultError(f"one epoch did not lower the loss on the data set: {loss_before} -> "
                          f"{loss_after}")
    if not dist.is_initialized():
        raise ResultError("torch.distributed is not initialised by Accelerator()")
    rendezvous = check_rendezvous(dist, dtrain)

    client.phase("all_gather of the trained parameters and all_reduce(SUM) of rank+1")
    check_same_parameters(torch, dist, accelerator.unwrap_model(model), world)
    total = all_reduce_rank_sum(torch, dist, rank, world)
    accelerator.wait_for_everyone()
    return (f"all_reduce={total} process_index={state.process_index} "
            f"job_step={os.environ.get('SLURM_JOB_ID')}.{os.environ.get('SLURM_STEP_ID')} "
            f"{rendezvous} loss={loss_before:.4f}->{loss_after:.4f} "
            f"accelerate={accelerate.__version__} torch={torch.__version__}")


if __name__ == "__main__":
    Client("accelerate", WATCHDOG_S).run(body)
    sys.exit(1)  # not reached: Client.run always exits
