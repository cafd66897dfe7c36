#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Runs the same steps on the Slurm 22.05 and the Slurm 25.11 cluster and compares what the tasks
get from Slurm.

Usage: compare_task_env.py STATE_DIR_2205 STATE_DIR_2511 [WORK_DIR]

Prints every SLURM_* variable that only one version sets or that differs in value, and fails when
a variable the dtrain plugin reads (see spank/remote.cpp: read_step_inputs) differs between the
versions for the same srun, since the plugin would then plan a different layout. Each cluster's
clients come from its own env.sh (PATH, SLURM_CONF); the steps run without the plugin's option.
The tasks write their environment into WORK_DIR (default: the current directory; not under
/tmp, which every emulated node has privately).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# What the plugin reads from the step environment; S_JOB_* items are read through the SPANK API.
PLUGIN_INPUTS = ["SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE", "SLURM_DISTRIBUTION",
                 "SLURM_DIST_PLANESIZE", "SLURM_STEP_RESV_PORTS", "SLURM_PROCID", "SLURM_LOCALID",
                 "SLURM_NODEID", "SLURM_NNODES", "SLURM_NTASKS"]
# Per job, step, run or process: they differ between any two steps.
VOLATILE = re.compile(r"^SLURM_(JOB_ID|JOBID|STEP_ID|STEPID|TASK_PID|STEP_LAUNCHER_PORT|SRUN_COMM_PORT|"
                      r"LAUNCH_NODE_IPADDR|JOB_START_TIME|JOB_END_TIME|CONF|UMASK|SUBMIT_DIR|"
                      r"WORKING_DIR|SPANK_.*)$")
SHAPES = [["-N4", "-n8"], ["-N3", "-n5", "-m", "cyclic"], ["-N2", "-n6", "-m", "plane=2"],
          ["-N2", "-n4", "-m", "cyclic:block"], ["-N2", "--ntasks-per-node=2", "-m", "block,Pack"]]


def fail(message):
    print(f"dtrain: check failed: {message}", file=sys.stderr)
    sys.exit(1)


def cluster_env(state_dir):
    env_file = os.path.join(state_dir, "env.sh")
    if not os.path.isfile(env_file):
        fail(f"{env_file} is missing: start that cluster first (slurm/local/cluster.sh up --state-dir {state_dir})")
    # From a clean environment: the caller's may hold the other cluster's PATH and SLURM_*.
    base = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    out = subprocess.run(["bash", "-c", f"source '{env_file}' && env -0"], env=base,
                         capture_output=True, check=True)
    return dict(item.split("=", 1) for item in out.stdout.decode().split("\0") if "=" in item)


def step_env(env, shape, work_dir):
    # One file per task: srun would interleave the tasks' output.
    out_dir = tempfile.mkdtemp(prefix="task-env-", dir=work_dir)
    cmd = ["srun", *shape, "/bin/sh", "-c", f'env -0 > "{out_dir}/$SLURM_PROCID"']
    proc = subprocess.run(cmd, env=env, capture_output=True, timeout=120)
    if proc.returncode != 0:
        fail(f"{' '.join(cmd)} exited {proc.returncode} (srun {env.get('PATH', '').split(':')[0]}):\n"
             f"{proc.stderr.decode(errors='replace')}")
    tasks = {}
    for name in os.listdir(out_dir):
        with open(os.path.join(out_dir, name), "rb") as f:
            items = f.read().decode(errors="replace").split("\0")
        tasks[int(name)] = {k: v for k, v in (i.split("=", 1) for i in items if "=" in i)
                            if k.startswith("SLURM_")}
    shutil.rmtree(out_dir)
    return tasks


def version(env):
    return subprocess.run(["srun", "--version"], env=env, capture_output=True, text=True).stdout.strip()


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help") else 2)
    work_dir = os.path.abspath(sys.argv[3] if len(sys.argv) == 4 else ".")
    old_env, new_env = cluster_env(sys.argv[1]), cluster_env(sys.argv[2])
    old_version, new_version = version(old_env), version(new_env)
    print(f"dtrain: comparing task environments of {old_version} ({sys.argv[1]}) and {new_version} ({sys.argv[2]})")
    mismatches = []
    for shape in SHAPES:
        old, new = step_env(old_env, shape, work_dir), step_env(new_env, shape, work_dir)
        if sorted(old) != sorted(new):
            fail(f"srun {' '.join(shape)}: ranks {sorted(old)} on {old_version} but {sorted(new)} on {new_version}")
        only_old = sorted(set(old[0]) - set(new[0]))
        only_new = sorted(set(new[0]) - set(old[0]))
        changed = sorted(k for k in set(old[0]) & set(new[0])
                         if old[0][k] != new[0][k] and not VOLATILE.match(k))
        print(f"srun {' '.join(shape)}:")
        print(f"  only {old_version}: {' '.join(only_old) or '-'}")
        print(f"  only {new_version}: {' '.join(f'{k}={new[0][k]}' for k in only_new) or '-'}")
        for k in changed:
            print(f"  rank 0 {k}: {old[0][k]!r} -> {new[0][k]!r}")
        for k in ("SLURM_DISTRIBUTION", "SLURM_DIST_PLANESIZE"):
            if k in old[0] and k not in changed:
                print(f"  {k}={old[0][k]} on both")
        for rank in sorted(old):
            for name in PLUGIN_INPUTS:
                if old[rank].get(name) != new[rank].get(name):
                    mismatches.append(f"srun {' '.join(shape)}: rank {rank} {name}="
                                      f"{old[rank].get(name)!r} on {old_version}, {new[rank].get(name)!r} on {new_version}")
    if mismatches:
        fail("what the plugin reads differs between the versions:\n  " + "\n  ".join(mismatches))
    print(f"dtrain: ok: the plugin's inputs ({', '.join(PLUGIN_INPUTS)}) are equal on both versions for "
          f"{len(SHAPES)} step shapes")


if __name__ == "__main__":
    main()
