#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Cluster test: real TensorFlow and PaddlePaddle read a step's lists from memory files.

Usage: memory_file_step.py VENV_PYTHON

The plugin is loaded with address=name and a 200-character name suffix (as on a site whose node
names carry a long interconnect domain), so that the 640-task step's endpoint lists and
TF_CONFIG exceed execve's 131072-byte limit and reach the tasks as memory files. The launcher
exports its own TF_CONFIG and PADDLE_TRAINER_ENDPOINTS first, as a batch script might: no task
may see them. Every task runs memory_file_client.py: ranks 0 and 639 in the venv with
TensorFlow, ranks 1 and 638 with PaddlePaddle, the others the light check with /usr/bin/python3,
rank 2 in a PID namespace of its own with its own /proc (unshare --pid --fork --mount-proc, as
Apptainer --pid or Podman start a program), where the task's /proc/<pid> is not the task, and
rank 3 as a child that Python's subprocess started without the task's descriptors. The test
passes when all 640 print their OK line, rank 2 as PID 1 and rank 3 without the descriptor.

Needs the local cluster's environment (SLURM_CONF, DTRAIN_CLUSTER_DIR) and DTRAIN_PLUGIN.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from step_common import StepFailed

HERE = Path(__file__).resolve().parent
MODULE_DIR = HERE.parent.parent / "src" / "python"
CLIENT = HERE / "memory_file_client.py"
TASKS = 640
FRAMEWORK_RANKS = {0: "tf", TASKS - 1: "tf", 1: "paddle", TASKS - 2: "paddle"}
OK_LINE = re.compile(r"^OK (light|tf|paddle) rank=(\d+) world=(\d+) loaded=(\S+) bytes=(\d+) "
                     r"pid=(\d+) fd=(inherited|absent)(.*)$")
UNSHARE = ["/usr/bin/unshare", "--pid", "--fork", "--mount-proc"]
NAMESPACE_RANK, SUBPROCESS_RANK = 2, 3
STEP_TIMEOUT_S = 400


class plugstack_args:
    """Loads the plugin with other plugstack.conf arguments while the step runs."""

    def __init__(self, *args):
        self.path = Path(os.environ["DTRAIN_CLUSTER_DIR"]) / "plugstack.conf"
        self.line = " ".join(["required", os.environ["DTRAIN_PLUGIN"], *args]) + "\n"

    def __enter__(self):
        self.saved = self.path.read_text()
        self.path.write_text(self.line)

    def __exit__(self, *exc):
        self.path.write_text(self.saved)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    venv_python = sys.argv[1]
    light = ["/usr/bin/python3", str(CLIENT), "light"]
    special = {rank: [venv_python, str(CLIENT), mode] for rank, mode in FRAMEWORK_RANKS.items()}
    special[SUBPROCESS_RANK] = ["/usr/bin/python3", "-c",
                                "import subprocess, sys; "
                                f"sys.exit(subprocess.run({light!r}).returncode)"]
    # Where this machine cannot start a PID namespace, rank 2 runs the light check as it is.
    probe = subprocess.run(["srun", "-N1", "-n1", *UNSHARE, "/bin/true"], capture_output=True,
                           text=True, timeout=60)
    namespaces = probe.returncode == 0
    if namespaces:
        special[NAMESPACE_RANK] = [*UNSHARE, *light]
    else:
        print(f"dtrain: not checked: a PID namespace of its own ({probe.stderr.strip()})")
    cases = " ".join(f"{rank}) exec {shlex.join(argv)} ;;" for rank, argv in special.items())
    task = f'case "$SLURM_PROCID" in {cases} *) exec {shlex.join(light)} ;; esac'
    env = dict(os.environ, PYTHONPATH=str(MODULE_DIR),
               TF_CONFIG='{"cluster":{"worker":["batch-script:1"]},"task":{"index":0}}',
               PADDLE_TRAINER_ENDPOINTS="batch-script:1", TF_CPP_MIN_LOG_LEVEL="2")
    suffix = "-" + "x" * 199
    command = ["srun", "--distributed-train", "-N4", f"-n{TASKS}", "--overcommit",
               "--kill-on-bad-exit=1", "/bin/bash", "-c", task]
    print("dtrain: running:", " ".join(command[:-1]), "'<case on SLURM_PROCID>'", flush=True)
    try:
        with plugstack_args("address=name", f"suffix={suffix}", "check_ports=off",
                            "port_block=161", "topology=none"):
            step = subprocess.run(command, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, timeout=STEP_TIMEOUT_S)
        if step.returncode != 0:
            raise StepFailed(f"srun exited with {step.returncode}:\n{step.stdout[-3000:]}\n"
                             f"{step.stderr[-3000:]}")
        verdicts = {}
        for line in step.stdout.splitlines():
            match = OK_LINE.match(line)
            if match:
                verdicts[int(match.group(2))] = match
        if sorted(verdicts) != list(range(TASKS)):
            missing = sorted(set(range(TASKS)) - set(verdicts))
            raise StepFailed(f"{len(verdicts)} of {TASKS} tasks reported OK; missing ranks "
                             f"{missing[:20]}:\n{step.stdout[-3000:]}\n{step.stderr[-3000:]}")
        sizes = {int(m.group(5)) for m in verdicts.values()}
        if min(sizes) <= 131072:
            raise StepFailed(f"TF_CONFIG was only {min(sizes)} bytes: not past execve's limit")
        for rank, mode in FRAMEWORK_RANKS.items():
            if verdicts[rank].group(1) != mode:
                raise StepFailed(f"rank {rank} ran {verdicts[rank].group(1)}, not {mode}")
        expected_fd = {rank: "absent" if rank == SUBPROCESS_RANK else "inherited"
                       for rank in range(TASKS)}
        wrong_fd = [r for r in range(TASKS) if verdicts[r].group(7) != expected_fd[r]]
        if wrong_fd:
            raise StepFailed(f"ranks {wrong_fd[:20]}: the task's descriptor was not as expected "
                             f"({[verdicts[r].group(0) for r in wrong_fd[:3]]})")
        if namespaces and verdicts[NAMESPACE_RANK].group(6) != "1":
            raise StepFailed(f"rank {NAMESPACE_RANK} did not run in a PID namespace of its own: "
                             f"{verdicts[NAMESPACE_RANK].group(0)}")
    except (StepFailed, subprocess.TimeoutExpired) as failure:
        print(f"dtrain: FAIL memory files with TensorFlow and PaddlePaddle: {failure}",
              file=sys.stderr, flush=True)
        return 1
    for rank in sorted({*FRAMEWORK_RANKS, SUBPROCESS_RANK, NAMESPACE_RANK}):
        print(f"dtrain: ok: rank {rank}: {verdicts[rank].group(0)}")
    print(f"dtrain: PASS: {TASKS} tasks loaded DTRAIN_ENDPOINTS, PADDLE_TRAINER_ENDPOINTS and "
          f"TF_CONFIG ({min(sizes)}-{max(sizes)} bytes) from their memory files with "
          "dtrain_env.load(); the launcher's own TF_CONFIG and PADDLE_TRAINER_ENDPOINTS reached "
          "none; TensorFlow's TFConfigClusterResolver and Paddle's ParallelEnv and "
          f"PaddleCloudRoleMaker formed the {TASKS}-worker world from the loaded values; "
          f"rank {SUBPROCESS_RANK}, without the task's descriptor, read the files through the "
          "task's /proc/SLURM_TASK_PID" +
          (f"; rank {NAMESPACE_RANK}, PID 1 of its own PID namespace, through /proc/self/fd"
           if namespaces else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
