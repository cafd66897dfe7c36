# SPDX-License-Identifier: Apache-2.0
"""What the launcher and trainer clients (torchrun_worker.py, lightning_client.py,
accelerate_client.py) share: where the rendezvous really happened, and the verdict fields that
launcher_step.py checks.

Every client reports, in the result= field of its OK line (client_common.Client), key=value pairs:
  dtrain=ADDR:PORT   DTRAIN_MASTER_ADDR:DTRAIN_MASTER_PORT as the plugin exported them to the task
  master=ADDR:PORT   MASTER_ADDR:MASTER_PORT in the process after the framework's initialisation
  store=HOST:PORT    the host and port of the TCPStore under torch.distributed's default group: the
                     endpoint the ranks really met at
and the client itself fails unless the three agree, so that a framework that rewrites dtrain's
address or port, or a step that meets another step's ranks, fails the test.
"""

import os
import time
from pathlib import Path

from client_common import ContractError, ResultError, check_equal


def dtrain_endpoint(environ):
    """The step's master endpoint as the plugin exported it, from a task's environment."""
    addr = environ.get("DTRAIN_MASTER_ADDR")
    port = environ.get("DTRAIN_MASTER_PORT")
    if not addr or not port:
        raise ContractError("DTRAIN_MASTER_ADDR and DTRAIN_MASTER_PORT are not both set; they are "
                            "exported by the dtrain SPANK plugin under --distributed-train=torch")
    return f"{addr}:{port}"


def process_environment(pid):
    """The environment process PID was started with (/proc/PID/environ), as a dict."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        entries = f.read().split(b"\0")
    result = {}
    for entry in entries:
        name, sep, value = entry.partition(b"=")
        if sep:
            result[name.decode(errors="replace")] = value.decode(errors="replace")
    return result


def store_endpoint(dist):
    """HOST:PORT of the TCPStore under the default process group (its PrefixStores unwrapped)."""
    store = dist.distributed_c10d._get_default_store()
    seen = []
    while not hasattr(store, "port") and hasattr(store, "underlying_store"):
        seen.append(type(store).__name__)
        store = store.underlying_store
    if not hasattr(store, "port"):
        raise ResultError(f"the default group's store is a {type(store).__name__} (under "
                          f"{seen}), not a TCPStore: cannot tell where the ranks met")
    return f"{store.host}:{store.port}"


def check_rendezvous(dist, dtrain):
    """Fails unless MASTER_ADDR:MASTER_PORT and the default store are dtrain's endpoint; returns
    the verdict fields."""
    master = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
    store = store_endpoint(dist)
    check_equal("MASTER_ADDR:MASTER_PORT after initialisation (dtrain's endpoint expected)", master,
                dtrain)
    check_equal("the default group's TCPStore host:port (dtrain's endpoint expected)", store,
                dtrain)
    return f"dtrain={dtrain} master={master} store={store}"


def all_reduce_rank_sum(torch, dist, rank, world):
    """all_reduce(SUM) of rank+1 on gloo; fails unless it is world(world+1)/2."""
    value = torch.tensor([rank + 1], dtype=torch.int64)
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    total = int(value.item())
    check_equal("all_reduce sum of rank+1", total, world * (world + 1) // 2)
    return total


def check_same_parameters(torch, dist, model, world):
    """After data-parallel training every rank must hold the same parameters."""
    params = torch.cat([p.detach().flatten().float() for p in model.parameters()])
    gathered = [torch.zeros_like(params) for _ in range(world)]
    dist.all_gather(gathered, params)
    differing = [r for r, other in enumerate(gathered) if not torch.equal(other, gathered[0])]
    if differing:
        raise ResultError(f"after training ranks {differing} hold other parameters than rank 0")


# Set by launcher_step.py --concurrent K: a directory every rank of the K steps sees.
OVERLAP_DIR_VARIABLE = "CLIENT_OVERLAP_DIR"
OVERLAP_STEPS_VARIABLE = "CLIENT_OVERLAP_STEPS"


def wait_for_concurrent_steps(client):
    """With CLIENT_OVERLAP_DIR set: marks this rank's step as formed and waits until
    CLIENT_OVERLAP_STEPS steps of this job have formed their groups, so that the steps' groups
    (and their stores) are all alive at once. The client's watchdog bounds the wait."""
    directory = os.environ.get(OVERLAP_DIR_VARIABLE)
    if not directory:
        return ""
    steps = int(os.environ.get(OVERLAP_STEPS_VARIABLE, "2"))
    step = f"{os.environ.get('SLURM_JOB_ID')}.{os.environ.get('SLURM_STEP_ID')}"
    client.phase(f"waiting in {directory} until {steps} steps have formed their groups")
    Path(directory, f"{step}.{client.rank}").touch()
    while True:
        formed = {entry.name.rsplit(".", 1)[0] for entry in Path(directory).iterdir()}
        if len(formed) >= steps:
            return f"concurrent_steps={','.join(sorted(formed))}"
        time.sleep(0.05)
