# SPDX-License-Identifier: Apache-2.0
"""PyTorch Lightning client: a Trainer as its documentation writes it for Slurm, under

    srun --distributed-train=torch -N2 --ntasks-per-node=2 python lightning_client.py 2 2

(the arguments: the Trainer's devices=, which must equal --ntasks-per-node, and num_nodes=).

Lightning's SLURMEnvironment (lightning_fabric/plugins/environments/slurm.py) takes over because
SLURM_NTASKS is set: it reads the ranks from SLURM_PROCID, SLURM_LOCALID and SLURM_NODEID, and
since Lightning 2.0 keeps MASTER_ADDR and MASTER_PORT when they are set (main_address,
main_port), which the dtrain SPANK plugin does. Runs with PyPI's torch 2.x and pytorch-lightning
2.x (setup_pypi_torch_venv.sh).

Checks: Lightning chose SLURMEnvironment; after one epoch of DDP training (gloo, CPU) of a small
linear model, trainer.global_rank == SLURM_PROCID, trainer.world_size == SLURM_NTASKS,
trainer.local_rank == SLURM_LOCALID and trainer.node_rank == SLURM_NODEID; the rendezvous
(MASTER_ADDR:MASTER_PORT and the default group's TCPStore) is dtrain's
DTRAIN_MASTER_ADDR:DTRAIN_MASTER_PORT; every rank holds the same parameters and an all_reduce gives
the right sum. Under launcher_step.py --concurrent, every rank also waits until the other steps
of its job have formed their groups (launcher_common.wait_for_concurrent_steps).
"""

import os
import sys
import warnings

from client_common import Client, ResultError, check_equal, required_int
from launcher_common import (all_reduce_rank_sum, check_rendezvous, check_same_parameters,
                             dtrain_endpoint, wait_for_concurrent_steps)

WATCHDOG_S = 240


def body(client, devices, num_nodes):
    rank = client.rank = required_int("SLURM_PROCID")
    world = client.world_size = required_int("SLURM_NTASKS")
    nodes = required_int("SLURM_NNODES")
    # Before the framework runs: what the plugin exported.
    dtrain = dtrain_endpoint(os.environ)

    client.phase("import torch and pytorch_lightning")
    import torch
    import torch.distributed as dist
    import pytorch_lightning as pl
    from torch.utils.data import DataLoader, TensorDataset

    # The recipe's code (from here to trainer.fit).
    class Regression(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            inputs, targets = batch
            return torch.nn.functional.mse_loss(self.layer(inputs), targets)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    pl.seed_everything(0)
    inputs = torch.randn(256, 4)
    targets = inputs @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    data = DataLoader(TensorDataset(inputs, targets), batch_size=16)
    model = Regression()
    client.phase("pl.Trainer(...): Lightning chooses its cluster environment")
    trainer = pl.Trainer(accelerator="cpu", devices=devices, num_nodes=num_nodes, strategy="ddp",
                         max_epochs=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)

    client.phase(f"trainer.fit: one epoch of DDP on gloo (dtrain's endpoint {dtrain})")
    with warnings.catch_warnings():
        # The tiny data set: "does not have many workers", "small number of batches".
        warnings.simplefilter("ignore")
        trainer.fit(model, data)

    environment = trainer.strategy.cluster_environment
    check_equal("Lightning's cluster environment", type(environment).__name__, "SLURMEnvironment")
    check_equal("trainer.global_rank (SLURM_PROCID)", trainer.global_rank, rank)
    check_equal("trainer.world_size (SLURM_NTASKS)", trainer.world_size, world)
    check_equal("trainer.local_rank (SLURM_LOCALID)", trainer.local_rank,
                required_int("SLURM_LOCALID"))
    check_equal("trainer.node_rank (SLURM_NODEID)", trainer.node_rank, required_int("SLURM_NODEID"))
    check_equal("trainer.num_nodes (SLURM_NNODES)", trainer.num_nodes, nodes)
    check_equal("the epochs trained", trainer.current_epoch, 1)
    if not dist.is_initialized():
        raise ResultError("torch.distributed is not initialised after trainer.fit")
    check_equal("dist.get_rank()", dist.get_rank(), rank)
    check_equal("dist.get_world_size()", dist.get_world_size(), world)
    check_equal("the cluster environment's main_address:main_port",
                f"{environment.main_address}:{environment.main_port}", dtrain)
    rendezvous = check_rendezvous(dist, dtrain)

    client.phase("all_gather of the trained parameters and all_reduce(SUM) of rank+1")
    check_same_parameters(torch, dist, model, world)
    total = all_reduce_rank_sum(torch, dist, rank, world)
    overlap = wait_for_concurrent_steps(client)
    client.phase("barrier")
    dist.barrier()
    return (f"all_reduce={total} global_rank={trainer.global_rank} "
            f"job_step={os.environ.get('SLURM_JOB_ID')}.{os.environ.get('SLURM_STEP_ID')} "
            f"{rendezvous} lightning={pl.__version__} torch={torch.__version__} {overlap}".rstrip())


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} DEVICES NUM_NODES: the Trainer's devices= (tasks per node) "
                 "and num_nodes=")
    Client("lightning", WATCHDOG_S).run(lambda client: body(client, int(sys.argv[1]),
                                                            int(sys.argv[2])))
    sys.exit(1)  # not reached: Client.run always exits
