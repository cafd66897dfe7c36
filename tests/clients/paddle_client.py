# SPDX-License-Identifier: Apache-2.0
"""PaddlePaddle client: paddle.distributed.init_parallel_env() on the plugin's PADDLE_* variables.

Run with the venv made by setup_venv.sh (CPU paddlepaddle wheel from PyPI). init_parallel_env()
reads PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ENDPOINTS, PADDLE_CURRENT_ENDPOINT
and, to choose the backend, PADDLE_DISTRI_BACKEND; with the gloo backend its TCP store is at
MASTER_ADDR:MASTER_PORT, else PADDLE_MASTER, else the first trainer endpoint. This client reads the
same PADDLE_* variables only to check that Paddle agrees with them.

Checks: Paddle's rank and world size equal PADDLE_TRAINER_ID and PADDLE_TRAINERS_NUM, this rank's
entry of PADDLE_TRAINER_ENDPOINTS is PADDLE_CURRENT_ENDPOINT, and all_reduce of rank+1 equals
n(n+1)/2.
"""

import os
import sys

from client_common import (Client, ContractError, check_equal, expected_sum, required_env,
                           required_int)

WATCHDOG_S = 150


def body(client):
    rank = client.rank = required_int("PADDLE_TRAINER_ID")
    world = client.world_size = required_int("PADDLE_TRAINERS_NUM")
    endpoints = required_env("PADDLE_TRAINER_ENDPOINTS").split(",")
    current = required_env("PADDLE_CURRENT_ENDPOINT")
    if len(endpoints) != world or not 0 <= rank < world:
        raise ContractError(f"PADDLE_TRAINER_ENDPOINTS has {len(endpoints)} entries but "
                            f"PADDLE_TRAINERS_NUM={world} and PADDLE_TRAINER_ID={rank}")
    if endpoints[rank] != current:
        raise ContractError(f"PADDLE_TRAINER_ENDPOINTS[{rank}]={endpoints[rank]} differs from "
                            f"PADDLE_CURRENT_ENDPOINT={current}")

    client.phase("import paddle")
    import paddle
    import paddle.distributed as dist

    backend = os.environ.get("PADDLE_DISTRI_BACKEND", "auto")
    client.phase(f"paddle.distributed.init_parallel_env() (PADDLE_DISTRI_BACKEND={backend}, "
                 f"endpoints {','.join(endpoints)})")
    dist.init_parallel_env()
    check_equal("paddle.distributed.get_rank()", dist.get_rank(), rank)
    check_equal("paddle.distributed.get_world_size()", dist.get_world_size(), world)

    client.phase("paddle.distributed.all_reduce(SUM) of rank+1")
    value = paddle.to_tensor([rank + 1], dtype="int64")
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    total = int(value.numpy()[0])
    check_equal("all_reduce sum of rank+1", total, expected_sum(world))

    client.phase("paddle.distributed.barrier")
    dist.barrier()
    return f"all_reduce={total} backend={backend} paddle={paddle.__version__}"


if __name__ == "__main__":
    Client("paddle", WATCHDOG_S).run(body)
    sys.exit(1)  # not reached: Client.run always exits
