#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch client: torch.distributed's own env:// initialisation on the plugin's variables.

Run with Debian's python3-torch (/usr/bin/python3). Reads RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT as exported by the dtrain SPANK plugin;
init_process_group('gloo', init_method='env://') reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
itself. The launchers set GLOO_SOCKET_IFNAME to the interface between the (emulated) nodes.

Checks: all_reduce of rank+1 equals n(n+1)/2; broadcast_object_list delivers rank 0's object to
every rank; the (GROUP_RANK, LOCAL_RANK, LOCAL_WORLD_SIZE) triples gathered from all ranks give
every node the local ranks 0..LOCAL_WORLD_SIZE-1 exactly once; five DistributedDataParallel SGD
steps on each rank's own data lower the loss and leave every rank with the same parameters.
"""

import socket
import sys
from collections import defaultdict
from datetime import timedelta

from client_common import Client, ResultError, check_equal, expected_sum, required_env, required_int

TIMEOUT_S = 60
WATCHDOG_S = 150


def check_local_ranks(triples):
    """triples[r] = (node_rank, local_rank, local_world_size) reported by global rank r."""
    per_node = defaultdict(list)
    for node_rank, local_rank, local_world_size in triples:
        per_node[node_rank].append((local_rank, local_world_size))
    for node_rank, entries in sorted(per_node.items()):
        sizes = {size for _, size in entries}
        locals_seen = sorted(local for local, _ in entries)
        if sizes != {len(entries)} or locals_seen != list(range(len(entries))):
            raise ResultError(f"node {node_rank} has {len(entries)} ranks but reports local ranks "
                              f"{locals_seen} and LOCAL_WORLD_SIZE {sorted(sizes)}")
    return "/".join(str(len(per_node[node])) for node in sorted(per_node))


def train_ddp(torch, dist, rank, world):
    """A few real training steps: DDP averages the gradients of every rank's own batch, so the
    ranks must end with identical parameters, and the loss must fall."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    inputs = torch.randn(32, 4, generator=torch.Generator().manual_seed(1000 + rank))
    targets = inputs @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    if not losses[-1] < losses[0]:
        raise ResultError(f"the DDP loss did not fall: {losses}")
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(params) for _ in range(world)]
    dist.all_gather(gathered, params)
    differing = [r for r, other in enumerate(gathered) if not torch.equal(other, gathered[0])]
    if differing:
        raise ResultError(f"after DDP training ranks {differing} hold other parameters than rank 0")
    return losses


def body(client):
    rank = client.rank = required_int("RANK")
    world = client.world_size = required_int("WORLD_SIZE")
    local_rank = required_int("LOCAL_RANK")
    local_world_size = required_int("LOCAL_WORLD_SIZE")
    node_rank = required_int("GROUP_RANK")
    master = f"{required_env('MASTER_ADDR')}:{required_env('MASTER_PORT')}"

    client.phase("import torch")
    import torch
    import torch.distributed as dist

    client.phase(f"init_process_group('gloo', init_method='env://') with master {master}")
    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=TIMEOUT_S))
    check_equal("dist.get_rank()", dist.get_rank(), rank)
    check_equal("dist.get_world_size()", dist.get_world_size(), world)

    client.phase("all_reduce(SUM) of rank+1")
    value = torch.tensor([rank + 1], dtype=torch.int64)
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    total = int(value.item())
    check_equal("all_reduce sum of rank+1", total, expected_sum(world))

    client.phase("broadcast_object_list from rank 0")
    sent = {"root_host": socket.gethostname(), "world": world, "sum": total}
    objects = [sent if rank == 0 else None]
    dist.broadcast_object_list(objects, src=0)
    received = objects[0]
    if not isinstance(received, dict):
        raise ResultError(f"broadcast_object_list delivered {received!r}, expected a dict")
    check_equal("broadcast world", received.get("world"), world)
    check_equal("broadcast sum", received.get("sum"), total)

    client.phase("all_gather_object of (GROUP_RANK, LOCAL_RANK, LOCAL_WORLD_SIZE)")
    triples = [None] * world
    dist.all_gather_object(triples, (node_rank, local_rank, local_world_size))
    ranks_per_node = check_local_ranks(triples)

    client.phase("DistributedDataParallel: 5 SGD steps of a linear model on this rank's data")
    losses = train_ddp(torch, dist, rank, world)

    client.phase("barrier and destroy_process_group")
    dist.barrier()
    dist.destroy_process_group()
    return (f"all_reduce={total} broadcast_from={received['root_host']} "
            f"ranks_per_node={ranks_per_node} torch={torch.__version__} "
            f"ddp_loss={losses[0]:.4f}->{losses[-1]:.4f}")


if __name__ == "__main__":
    Client("torch", WATCHDOG_S).run(body)
    sys.exit(1)  # not reached: Client.run always exits
