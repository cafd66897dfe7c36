# SPDX-License-Identifier: Apache-2.0
"""TensorFlow client: MultiWorkerMirroredStrategy on the plugin's TF_CONFIG.

Run with the venv made by setup_venv.sh (tensorflow-cpu wheel from PyPI). The strategy reads
TF_CONFIG itself (TFConfigClusterResolver), starts this worker's gRPC server on the port of
cluster.worker[task.index] and runs collectives over gRPC between the worker addresses. This client
parses TF_CONFIG only to check that TensorFlow agrees with it. TF_CPP_MIN_LOG_LEVEL is set to keep
TensorFlow's start-up banner out of the test log; it changes nothing else.

Checks: the strategy has one replica per worker in TF_CONFIG, and an all-reduce (SUM) of rank+1
across the workers equals n(n+1)/2 on every worker.
"""

import json
import os
import sys

from client_common import Client, ContractError, check_equal, expected_sum, required_env

COLLECTIVE_TIMEOUT_S = 60
WATCHDOG_S = 150


def parse_tf_config(text):
    try:
        config = json.loads(text)
        workers = config["cluster"]["worker"]
        task = config["task"]
        index = task["index"]
    except (ValueError, KeyError, TypeError) as error:
        raise ContractError(f"TF_CONFIG is not {{'cluster': {{'worker': [...]}}, 'task': "
                            f"{{'type': 'worker', 'index': N}}}}: {error!r} in {text!r}") from None
    if task.get("type") != "worker" or not isinstance(index, int) or not 0 <= index < len(workers):
        raise ContractError(f"TF_CONFIG task {task!r} is not a worker index into "
                            f"{len(workers)} workers")
    return workers, index


def body(client):
    workers, rank = parse_tf_config(required_env("TF_CONFIG"))
    client.rank, client.world_size = rank, len(workers)
    world = len(workers)

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    client.phase("import tensorflow")
    import tensorflow as tf

    client.phase(f"MultiWorkerMirroredStrategy() from TF_CONFIG, this worker {workers[rank]}")
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING,
        timeout_seconds=COLLECTIVE_TIMEOUT_S)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    check_equal("strategy.num_replicas_in_sync", strategy.num_replicas_in_sync, world)
    resolver = strategy.cluster_resolver
    check_equal("cluster_resolver.task_id", resolver.task_id, rank)

    client.phase("replica_context.all_reduce(SUM) of rank+1 across the workers")

    @tf.function
    def reduce_rank_plus_one():
        def replica_fn():
            context = tf.distribute.get_replica_context()
            return context.all_reduce(tf.distribute.ReduceOp.SUM,
                                      tf.constant(rank + 1, dtype=tf.int64))

        return strategy.run(replica_fn)

    per_replica = reduce_rank_plus_one()
    totals = [int(value.numpy()) for value in strategy.experimental_local_results(per_replica)]
    for total in totals:
        check_equal("all_reduce sum of rank+1", total, expected_sum(world))
    return f"all_reduce={totals[0]} replicas={world} tensorflow={tf.__version__}"


if __name__ == "__main__":
    Client("tf", WATCHDOG_S).run(body)
    sys.exit(1)  # not reached: Client.run always exits
