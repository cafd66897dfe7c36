#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Cluster checks of dtrain under the container runtimes sites use: pyxis + enroot
(srun --container-image) and Charliecloud (srun ... ch-run IMAGE --).

Usage: check_container_steps.py CHECK
  pyxis-dtrain-first   dtrain.conf sorts before pyxis.conf (what the packages install): every task
                       keeps its own variables, as PYXIS_CONTAINER_ENV asks pyxis; the binding is
                       the one the same step gets outside the container; MPI's bootstrap passes
  pyxis-dtrain-last    zz-dtrain.conf sorts after pyxis.conf: dtrain's task_init runs inside the
                       container's namespaces; the same checks, plus a step whose lists go to
                       memory files
  pyxis-order-broken   dtrain first and the user's own --container-env, which replaces dtrain's
                       list: the image's PyTorch hook wins, and the bootstrap and dtrain-check
                       say so
  pyxis-torch          real PyTorch in the container: init_process_group + all_reduce, 4 nodes
  charliecloud         srun --distributed-train ch-run IMAGE -- ...: the same checks and PyTorch

Needs the containers cluster's environment (tests/cluster/run_with_cluster_env.sh), and
DTRAIN_PLUGIN, DTRAIN_PYXIS (spank_pyxis.so), DTRAIN_CONTAINER_SQSH (the image for enroot),
DTRAIN_CONTAINER_DIR (the same image as a directory, for ch-run), DTRAIN_BENCH, DTRAIN_CHECK,
DTRAIN_TOPOLOGY, DTRAIN_SOURCE_DIR and DTRAIN_BINARY_DIR. tests/containers/build_runtimes.sh and
build_image.sh make the runtimes and the image.
"""
import hashlib
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "plugin"))
from check_plugin_steps import (REPORTER, STATE, CheckFailed, check_step, expect,  # noqa: E402
                                report_dir, reports, run)

PLUGIN = os.environ["DTRAIN_PLUGIN"]
PYXIS = os.environ["DTRAIN_PYXIS"]
SQSH = os.environ["DTRAIN_CONTAINER_SQSH"]
IMAGE_DIR = os.environ["DTRAIN_CONTAINER_DIR"]
BENCH = os.environ["DTRAIN_BENCH"]
CHECK = os.environ["DTRAIN_CHECK"]
TOPOLOGY = os.environ["DTRAIN_TOPOLOGY"]
SOURCE_DIR = os.environ["DTRAIN_SOURCE_DIR"]
BINARY_DIR = os.environ["DTRAIN_BINARY_DIR"]
DROPINS = os.path.join(STATE, "plugstack.d")
CLIENT_STEP = os.path.join(HERE, "..", "clients", "cluster_client_step.py")
STEP = ["-N4", "-n8"]
# What the plugin binds: inside a container each task must get what it gets outside.
BINDING = ["CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "DTRAIN_CPU_LIST", "DTRAIN_GPU_BUS_IDS",
           "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES", "DTRAIN_NIC", "OMP_NUM_THREADS"]


def shared_dirs():
    """The folders the tasks read and write: the sources and the build tree (reports, the cluster's
    state with its PMIx sockets, the tools)."""
    dirs = [SOURCE_DIR]
    if os.path.relpath(BINARY_DIR, SOURCE_DIR).startswith(".."):
        dirs.append(BINARY_DIR)
    return dirs


def library_dirs(binary):
    """Folders outside the system's of the libraries `binary` loads (CUDA's, the build tree's):
    the container has Debian's own and needs these mounted."""
    out = run(["ldd", binary]).stdout
    dirs = set()
    for line in out.splitlines():
        parts = line.split("=>")
        if len(parts) != 2 or not parts[1].strip().startswith("/"):
            continue
        folder = os.path.dirname(parts[1].split()[0])
        if not folder.startswith(("/lib", "/usr/lib")):
            dirs.add(folder)
    return sorted(dirs)


def pyxis_options(user_env=None):
    # One container per image and node, kept between steps (container_scope=global): only the
    # first step of a cluster unpacks the image.
    with open(SQSH, "rb") as f:
        head = hashlib.sha256(f.read(1 << 20)).hexdigest()[:12]
    mounts = [f"{d}:{d}" for d in shared_dirs() + library_dirs(BENCH)]
    options = [f"--container-image={SQSH}", f"--container-name=dtrain-{head}",
               f"--container-mounts={','.join(mounts)}"]
    if user_env:
        options.append(f"--container-env={user_env}")
    return options


def ch_run_prefix():
    # ch-run binds only onto folders the image has, and cannot create them in a read-only image:
    # the mount points are made here, in the test's own image.
    dirs = shared_dirs() + library_dirs(BENCH)
    for d in dirs:
        os.makedirs(IMAGE_DIR + d, exist_ok=True)
    binds = [a for d in dirs for a in ("-b", f"{d}:{d}")]
    return ["ch-run", *binds, IMAGE_DIR, "--"]


def write_dropins(dtrain_first, *dtrain_args):
    """dtrain's and pyxis's plugstack.d drop-ins, dtrain's sorting first or last."""
    dtrain = " ".join(["required", PLUGIN, f"topology={TOPOLOGY}", *dtrain_args]) + "\n"
    pyxis = f"required {PYXIS} runtime_path=/tmp/pyxis\n"
    for name in os.listdir(DROPINS):
        os.unlink(os.path.join(DROPINS, name))
    for name, line in (("dtrain.conf" if dtrain_first else "zz-dtrain.conf", dtrain),
                       ("pyxis.conf", pyxis)):
        with open(os.path.join(DROPINS, name), "w") as f:
            f.write(line)


class plugin_order:
    """Loads dtrain and pyxis in the given order, then back to dtrain first, as the cluster
    started (containers_up.sh)."""

    def __init__(self, dtrain_first, *dtrain_args):
        self.order = (dtrain_first, *dtrain_args)

    def __enter__(self):
        write_dropins(*self.order)

    def __exit__(self, *exc):
        write_dropins(True)


def task_env(launch=(), prefix=(), step=STEP):
    out = report_dir()
    proc = run(["srun", "--distributed-train", *step, *launch, *prefix, "python3", REPORTER, out],
               check=False)
    tasks = reports(out)
    expect(proc.returncode == 0 and tasks,
           f"the step failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return tasks


def expect_in_image(tasks, where):
    outside = [t for t in tasks if "PYTORCH_VERSION=" not in t.get("etc_environment", "")]
    expect(not outside, f"{where}: ranks {[t['DTRAIN_RANK'] for t in outside]} did not run in the image "
           "(their /etc/environment lacks its PYTORCH_VERSION)")


def expect_same_binding(inside, outside, where):
    for t, h in zip(inside, outside):
        for name in BINDING:
            expect(t.get(name) == h.get(name),
                   f"{where}: rank {t['DTRAIN_RANK']}: {name}={t.get(name)!r} in the container but "
                   f"{h.get(name)!r} for the same step outside it")


def expect_dtrain_values(tasks, where):
    for t in tasks:
        rank = t["DTRAIN_RANK"]
        for name, ours in (("MASTER_ADDR", "DTRAIN_MASTER_ADDR"), ("MASTER_PORT", "DTRAIN_MASTER_PORT"),
                           ("RANK", "DTRAIN_RANK"), ("LOCAL_RANK", "DTRAIN_LOCAL_RANK")):
            expect(t.get(name) == t.get(ours), f"{where}: rank {rank}: {name}={t.get(name)!r} but "
                   f"{ours}={t.get(ours)!r}")
        expect("PYXIS_CONTAINER_ENV" not in t, f"{where}: rank {rank} sees dtrain's PYXIS_CONTAINER_ENV")


def bootstrap(launch=(), prefix=(), tool=BENCH, args=("--bootstrap-only",)):
    return run(["srun", "--mpi=pmix", "--distributed-train", *STEP, *launch, *prefix, tool, *args],
               check=False)


def check_pyxis_order(dtrain_first):
    where = "dtrain before pyxis" if dtrain_first else "dtrain after pyxis"
    with plugin_order(dtrain_first):
        outside = task_env()
        inside = task_env(pyxis_options())
        check_step(inside)
        expect_in_image(inside, where)
        expect_same_binding(inside, outside, where)
        expect_dtrain_values(inside, where)
        boot = bootstrap(pyxis_options())
        expect(boot.returncode == 0 and "bootstrap time" in boot.stdout,
               f"{where}: the bootstrap failed in the container ({boot.returncode}):\n{boot.stdout[-2000:]}"
               f"\n{boot.stderr[-3000:]}")
    print(f"dtrain: ok: {where}: 8 tasks in enroot containers on 4 nodes keep their own ranks, "
          f"endpoints and binding ({', '.join(n for n in BINDING if n in inside[0])} as outside the "
          "container), PyTorch's names are dtrain's, and the MPI bootstrap passes in the container")
    if dtrain_first:
        return
    # Values too long for execve: memory files that tasks create inside the container's namespaces.
    suffix = "-" + "x" * 199
    with plugin_order(False, "address=name", f"suffix={suffix}", "check_ports=off", "port_block=161"):
        proc = run(["srun", "--distributed-train", "-N4", "-n640", "--overcommit", *pyxis_options(),
                    "python3", "-c",
                    "import os; p=os.environ['DTRAIN_ENDPOINTS_FILE']; e=open(p).read(); st=os.stat(p); "
                    "assert p.startswith('/proc/self/fd/'), p; "
                    "j,s,r=(os.environ[v] for v in ('SLURM_JOB_ID','SLURM_STEP_ID','SLURM_PROCID')); "
                    "assert os.readlink(p)==f'/memfd:dtrain:{j}.{s}:rank{r}:DTRAIN_ENDPOINTS,PADDLE_TRAINER_ENDPOINTS (deleted)', os.readlink(p); "
                    "assert 'TF_CONFIG' not in os.environ and 'TF_CONFIG_HASH' in os.environ; "
                    "assert st.st_uid==os.getuid() and st.st_mode&0o777==0o400, oct(st.st_mode); "
                    "assert e.split(',')[int(os.environ['DTRAIN_RANK'])]==os.environ['DTRAIN_CURRENT_ENDPOINT']; "
                    "print('STARTED', len(e))"], check=False)
    started = [line for line in proc.stdout.splitlines() if line.startswith("STARTED")]
    expect(proc.returncode == 0 and len(started) == 640,
           f"{len(started)} of 640 tasks read their memory files in the container ({proc.returncode}):\n"
           f"{proc.stderr[-3000:]}")
    print(f"dtrain: ok: {where}: 640 tasks in containers read a {started[0].split()[1]}-byte endpoint list "
          "from memory files created in the container's namespaces (mode 0400, /proc/self/fd, "
          "labelled with the task's job, step and rank)")


def check_pyxis_order_broken():
    with plugin_order(True):
        tasks = task_env(pyxis_options(user_env="DTRAIN_TEST_ONLY"))
        # The failure being detected is real: the image's hook replaced PyTorch's rendezvous.
        replaced = [t for t in tasks if t.get("MASTER_PORT") != t.get("DTRAIN_MASTER_PORT")]
        expect(len(replaced) == len(tasks),
               "with the user's --container-env, the image's MASTER_PORT was expected on every task, got "
               f"{[(t.get('MASTER_PORT'), t.get('DTRAIN_MASTER_PORT')) for t in tasks]}")
        boot = bootstrap(pyxis_options(user_env="DTRAIN_TEST_ONLY"))
        expect(boot.returncode != 0 and "changed after dtrain set them" in boot.stderr
               and "MASTER_PORT=" in boot.stderr,
               f"the bootstrap did not name the changed variables ({boot.returncode}):\n{boot.stderr[-3000:]}")
        doctor = bootstrap(pyxis_options(user_env="DTRAIN_TEST_ONLY"), tool=CHECK, args=())
        expect(doctor.returncode == 1 and "variables-changed-after-dtrain" in doctor.stdout,
               f"dtrain-check did not report variables-changed-after-dtrain ({doctor.returncode}):\n"
               f"{doctor.stdout[-3000:]}\n{doctor.stderr[-2000:]}")
    line = next(x for x in boot.stderr.splitlines() if "changed after dtrain" in x)
    print("dtrain: ok: dtrain before pyxis with the user's --container-env: the image's PyTorch hook set "
          f"MASTER_PORT={replaced[0]['MASTER_PORT']} over dtrain's {replaced[0]['DTRAIN_MASTER_PORT']}; "
          f"the bootstrap stops:\n  {line.strip()[:300]}\n"
          "dtrain: ok: dtrain-check exits 1 with variables-changed-after-dtrain")


def run_torch(options, prefix=()):
    command = [CLIENT_STEP, "--framework", "torch", "-N4", "-n8", "--python", "python3"]
    command += [f"--srun-option={o}" for o in options]
    if prefix:
        command += ["--task-prefix", " ".join(prefix)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    expect(proc.returncode == 0, f"PyTorch in the container failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    rank0 = next(x for x in proc.stdout.splitlines() if x.startswith("OK torch rank=0 "))
    verdict = next(x for x in proc.stdout.splitlines() if x.startswith("dtrain: PASS"))
    return f"{verdict}; rank 0: {rank0.split('result=', 1)[1]}"


def check_pyxis_torch():
    with plugin_order(True):
        verdict = run_torch(pyxis_options())
    print(f"{verdict} (in enroot containers through pyxis)")


def check_charliecloud():
    os.environ.setdefault("USER", "root" if os.getuid() == 0 else str(os.getuid()))
    prefix = ch_run_prefix()
    with plugin_order(True):
        outside = task_env()
        inside = task_env(prefix=prefix)
        check_step(inside)
        expect_in_image(inside, "ch-run")
        expect_same_binding(inside, outside, "ch-run")
        expect_dtrain_values(inside, "ch-run")
        boot = bootstrap(prefix=prefix)
        expect(boot.returncode == 0 and "bootstrap time" in boot.stdout,
               f"ch-run: the bootstrap failed ({boot.returncode}):\n{boot.stderr[-3000:]}")
        verdict = run_torch([], prefix=prefix)
    print("dtrain: ok: 8 tasks under ch-run on 4 nodes keep their own ranks, endpoints and binding, "
          "and the MPI bootstrap passes")
    print(f"{verdict} (under ch-run)")


CHECKS = {
    "pyxis-dtrain-first": lambda: check_pyxis_order(True),
    "pyxis-dtrain-last": lambda: check_pyxis_order(False),
    "pyxis-order-broken": check_pyxis_order_broken,
    "pyxis-torch": check_pyxis_torch,
    "charliecloud": check_charliecloud,
}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CHECKS:
        print(f"usage: {sys.argv[0]} {{{'|'.join(CHECKS)}}}", file=sys.stderr)
        sys.exit(2)
    skip_reason = os.path.join(STATE, "skip-reason")
    if os.path.exists(skip_reason):
        with open(skip_reason) as f:
            print(f"dtrain: skipped: {f.read().strip()}")
        sys.exit(77)
    try:
        CHECKS[sys.argv[1]]()
    except CheckFailed as e:
        print(f"dtrain: check failed: {e}", file=sys.stderr)
        sys.exit(1)
