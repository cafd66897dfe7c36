# SPDX-License-Identifier: Apache-2.0
"""One task of a step whose lists exceed execve's limit (tests/clients/memory_file_step.py).

Usage: memory_file_client.py {light|tf|paddle}

Every task loads the plugin's memory files with dtrain_env.load() (src/python) and checks them
against the task's own variables. "tf" and "paddle" then hand the loaded values to the real
framework, which must form the step's world from them:
  tf      TFConfigClusterResolver (what MultiWorkerMirroredStrategy reads TF_CONFIG with): its
          worker list, task type and index; before load() it must see no cluster at all (the
          TF_CONFIG the launcher exported must not reach the task)
  paddle  paddle.distributed.ParallelEnv and fleet's PaddleCloudRoleMaker (collective), which
          read PADDLE_TRAINER_ENDPOINTS and the other PADDLE_* variables: trainer count, id,
          endpoints; Paddle is imported after load(), and it runs shell commands when imported,
          which would fail with E2BIG had load() put the values into the C environment
Neither starts its servers: a strategy or a process group waits for all workers, and a step this
size runs 640 tasks on two cores, so the other tasks run the light check only.

Prints one line: "OK MODE rank=R world=W loaded=NAMES bytes=B pid=P fd=inherited|absent DETAILS"
(fd: whether this process has the task's descriptor), or "dtrain: FAIL ..." and exits 1.
"""

import json
import os
import subprocess
import sys


def fail(message):
    print(f"dtrain: FAIL {sys.argv[1]} rank={os.environ.get('SLURM_PROCID')}: {message}",
          flush=True)
    sys.exit(1)


def expect_equal(what, got, wanted):
    if got != wanted:
        fail(f"{what}: got {got!r}, expected {wanted!r}")


def check_loaded(loaded):
    rank = int(os.environ["DTRAIN_RANK"])
    world = int(os.environ["DTRAIN_WORLD_SIZE"])
    expect_equal("DTRAIN_RANK", rank, int(os.environ["SLURM_PROCID"]))
    expect_equal("loaded", loaded, ["DTRAIN_ENDPOINTS", "PADDLE_TRAINER_ENDPOINTS", "TF_CONFIG"])
    endpoints = os.environ["DTRAIN_ENDPOINTS"].split(",")
    expect_equal("entries of DTRAIN_ENDPOINTS", len(endpoints), world)
    expect_equal("own entry", endpoints[rank], os.environ["DTRAIN_CURRENT_ENDPOINT"])
    expect_equal("PADDLE_TRAINER_ENDPOINTS", os.environ["PADDLE_TRAINER_ENDPOINTS"],
                 os.environ["DTRAIN_ENDPOINTS"])
    config = json.loads(os.environ["TF_CONFIG"])
    expect_equal("TF_CONFIG workers", config["cluster"]["worker"], endpoints)
    expect_equal("TF_CONFIG task", config["task"], {"type": "worker", "index": rank})
    # The values are this process's only: what it starts with exec gets the files, not E2BIG.
    child = subprocess.run(["/bin/sh", "-c", 'echo "${TF_CONFIG:-unset} ${TF_CONFIG_FILE:+file}"'],
                           capture_output=True, text=True, check=True).stdout.split()
    expect_equal("a child's TF_CONFIG and TF_CONFIG_FILE", child, ["unset", "file"])
    return rank, world, endpoints


def check_tf(rank, world, endpoints):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    spec = resolver.cluster_spec()
    expect_equal("TFConfigClusterResolver workers", spec.num_tasks("worker"), world)
    expect_equal("TFConfigClusterResolver worker list", spec.job_tasks("worker"), endpoints)
    expect_equal("TFConfigClusterResolver task", (resolver.task_type, resolver.task_id),
                 ("worker", rank))
    expect_equal("this worker's address", spec.task_address("worker", rank),
                 os.environ["DTRAIN_CURRENT_ENDPOINT"])
    return f"tf_workers={spec.num_tasks('worker')} tf_task=worker:{resolver.task_id} " \
           f"tensorflow={tf.__version__}"


def tf_sees_no_cluster_before_load():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    before = tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec().as_dict()
    expect_equal("TFConfigClusterResolver before dtrain_env.load()", before, {})


def check_paddle(rank, world, endpoints):
    import paddle
    import paddle.distributed as dist
    from paddle.distributed import fleet
    env = dist.ParallelEnv()
    expect_equal("ParallelEnv (world_size, rank)", (env.world_size, env.rank), (world, rank))
    expect_equal("ParallelEnv trainer_endpoints", env.trainer_endpoints, endpoints)
    expect_equal("ParallelEnv current_endpoint", env.current_endpoint,
                 os.environ["DTRAIN_CURRENT_ENDPOINT"])
    role = fleet.PaddleCloudRoleMaker(is_collective=True)
    expect_equal("PaddleCloudRoleMaker (worker_num, worker_index)",
                 (role._worker_num(), role._worker_index()), (world, rank))
    expect_equal("PaddleCloudRoleMaker trainer endpoints", role._get_trainer_endpoints(),
                 endpoints)
    return f"paddle_trainers={env.world_size} paddle_id={env.rank} " \
           f"role_maker={role._worker_num()}:{role._worker_index()} paddle={paddle.__version__}"


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("light", "tf", "paddle"):
        print("dtrain: usage: memory_file_client.py {light|tf|paddle}", file=sys.stderr)
        return 2
    mode = sys.argv[1]
    import dtrain_env
    # Whether this process has the task's descriptor: not where a parent started it with
    # subprocess (close_fds); then dtrain_env reads the task's /proc/SLURM_TASK_PID/fd/N.
    number = int(os.environ["TF_CONFIG_FILE"].rsplit("/", 1)[1])
    try:
        os.fstat(number)
        descriptor = "inherited"
    except OSError:
        descriptor = "absent"
    for name in dtrain_env.NAMES:
        if name in os.environ:
            fail(f"{name} is set beside {name}_FILE: the inherited value reached the task")
    if mode == "tf":
        tf_sees_no_cluster_before_load()
    try:
        loaded = dtrain_env.load()
    except dtrain_env.MemoryFileError as error:
        fail(str(error))
    rank, world, endpoints = check_loaded(loaded)
    details = ""
    if mode == "tf":
        details = check_tf(rank, world, endpoints)
    elif mode == "paddle":
        details = check_paddle(rank, world, endpoints)
    print(f"OK {mode} rank={rank} world={world} loaded={','.join(loaded)} "
          f"bytes={len(os.environ['TF_CONFIG'])} pid={os.getpid()} fd={descriptor} "
          f"{details}".rstrip(), flush=True)
    # Frameworks leave threads behind; the result is in.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
