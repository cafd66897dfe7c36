#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""JAX client: jax.distributed.initialize() with no arguments, as JAX's multi-process guide
calls it, on the plugin's variables, then an all-gather across every process.

Run with the venv of setup_pypi_torch_venv.sh (JAX's CPU wheels from PyPI), started by
launcher_step.py --framework jax. JAX reads
JAX_COORDINATOR_ADDRESS, which the plugin sets to rank 0's node and the step's master port, and
takes the process count and id from Slurm's own SLURM_NTASKS and SLURM_PROCID
(jax/_src/clusters/slurm_cluster.py). The CPU devices need gloo for collectives across processes.

Checks: jax.process_index() == DTRAIN_RANK == SLURM_PROCID and jax.process_count() ==
DTRAIN_WORLD_SIZE; the coordinator JAX used is JAX_COORDINATOR_ADDRESS, which is
DTRAIN_MASTER_ADDR:DTRAIN_MASTER_PORT; an all-gather of every process's rank returns 0..n-1 in
order on every process. The OK line's result carries dtrain=, master= and store= (the endpoint
the plugin exported, the coordinator address JAX used, and the one it was told) as
launcher_step.py compares them across ranks and concurrent steps.
"""

import os

from client_common import Client, check_equal, required_env, required_int
from launcher_common import wait_for_concurrent_steps

WATCHDOG_S = 150


def body(client):
    client.rank = required_env("DTRAIN_RANK")
    client.world_size = required_env("DTRAIN_WORLD_SIZE")
    rank, world = int(client.rank), int(client.world_size)
    coordinator = required_env("JAX_COORDINATOR_ADDRESS")
    dtrain = f"{required_env('DTRAIN_MASTER_ADDR')}:{required_int('DTRAIN_MASTER_PORT')}"
    check_equal("JAX_COORDINATOR_ADDRESS (rank 0's node at the master port)", coordinator, dtrain)
    check_equal("SLURM_PROCID, which JAX reads as the process id", required_int("SLURM_PROCID"),
                rank)

    client.phase("import jax")
    import jax
    import numpy as np
    from jax._src import distributed
    from jax.experimental import multihost_utils

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    client.phase(f"jax.distributed.initialize() (coordinator {coordinator})")
    jax.distributed.initialize()
    check_equal("jax.process_index()", jax.process_index(), rank)
    check_equal("jax.process_count()", jax.process_count(), world)
    used = distributed.global_state.coordinator_address
    check_equal("the coordinator address JAX used", used, coordinator)

    client.phase("multihost_utils.process_allgather of the ranks")
    gathered = multihost_utils.process_allgather(np.array([rank], dtype=np.int32))
    check_equal("process_allgather of every rank", [int(v) for v in np.ravel(gathered)],
                list(range(world)))
    # Concurrent steps (launcher_step.py --concurrent): every step's coordinator is alive here.
    overlap = wait_for_concurrent_steps(client)
    gathered = multihost_utils.process_allgather(np.array([rank], dtype=np.int32))
    check_equal("a second all-gather, with every concurrent step formed",
                [int(v) for v in np.ravel(gathered)], list(range(world)))
    client.phase("jax.distributed.shutdown()")
    jax.distributed.shutdown()
    return (f"allgather=0..{world - 1} dtrain={dtrain} master={used} store={coordinator} "
            f"job_step={os.environ.get('SLURM_JOB_ID')}.{os.environ.get('SLURM_STEP_ID')} "
            f"{overlap}").rstrip()


if __name__ == "__main__":
    Client("jax", WATCHDOG_S).run(body)
