#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Deployment checks on the local Slurm cluster.

Usage:
  check_deploy.py template FILE.sbatch   submit an sbatch template with stand-in programs and
                                         check the variables every task saw
  check_deploy.py package BUILD_DIR      build the Debian package, check its dependencies (the
                                         exact Slurm, without slurmd), version and maintainer,
                                         install it, run a step with the installed plugin and
                                         drop-in, render the installed man pages, and remove
                                         the package again

Needs SLURM_CONF and DTRAIN_CLUSTER_DIR (source the cluster's env.sh). template also needs
DTRAIN_PLUGIN (the built spank_dtrain.so). package needs root and dpkg. Every check restores the
cluster's plugstack.conf when it ends.
"""
import collections
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
STAND_IN = os.path.join(HERE, "stand_in.py")
MAN_PAGES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(REPO, "slurm", "man", "*.[18]")))
MAN_CHECK = os.path.join(HERE, "check_man_pages.sh")
# The environment contract is checked by the plugin suite's check_step, in one place.
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "plugin"))
os.environ.setdefault("DTRAIN_PLUGIN", "")  # read at import; only its check functions are used
from check_plugin_steps import CheckFailed, check_step, endpoint_list, expect  # noqa: E402

STATE = os.environ["DTRAIN_CLUSTER_DIR"]
PLUGSTACK = os.path.join(STATE, "plugstack.conf")
WORKDIR = os.environ.get("DTRAIN_TEST_WORKDIR", STATE)
JOB_TIMEOUT = 150
PACKAGE = "dtrain"


def run(cmd, check=True, timeout=JOB_TIMEOUT, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise CheckFailed(f"{shlex.join(cmd)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


class cluster_plugstack:
    """Gives the cluster's plugstack.conf this content for the duration, then restores it."""

    def __init__(self, content):
        self.content = content

    def __enter__(self):
        with open(PLUGSTACK) as f:
            self.saved = f.read()
        with open(PLUGSTACK, "w") as f:
            f.write(self.content)

    def __exit__(self, *exc):
        with open(PLUGSTACK, "w") as f:
            f.write(self.saved)


def reports(directory, role):
    found = []
    for path in sorted(glob.glob(os.path.join(directory, f"{role}-*.json"))):
        with open(path) as f:
            found.append(json.load(f))
    return found


def by_step(tasks):
    steps = collections.defaultdict(list)
    for t in tasks:
        steps[int(t["SLURM_STEP_ID"])].append(t)
    return {step: sorted(ts, key=lambda t: int(t["SLURM_PROCID"])) for step, ts in sorted(steps.items())}


# --- templates ------------------------------------------------------------------------------

def sbatch_directive(text, name):
    match = re.search(rf"^#SBATCH\s+--{name}=(\S+)", text, re.MULTILINE)
    expect(match, f"the template has no '#SBATCH --{name}=' line")
    return match.group(1)


def expected_frameworks(text):
    match = re.search(r"--distributed-train(?:=(\S+))?", text.split("\nset -euo pipefail", 1)[-1])
    expect(match, "the template never runs srun --distributed-train")
    names = {"torch": "torch", "pytorch": "torch", "paddle": "paddle", "tf": "tf", "tensorflow": "tf",
             "jax": "jax"}
    # The plugin's order (core::to_string(FrameworkSet)), which DTRAIN_FRAMEWORKS is written in.
    order = ("torch", "paddle", "tf", "jax")
    if not match.group(1) or match.group(1) == "all":
        return order
    chosen = {names[n] for n in match.group(1).split(",")}
    return tuple(name for name in order if name in chosen)


def submit(template, out_dir, env, expect_success=True):
    """sbatch --wait on the local cluster, whose nodes have 4 CPUs and no GPUs: the template's
    GPU and CPU-per-task requests are overridden on the command line, nothing else."""
    name = f"dtrain-deploy-{uuid.uuid4().hex[:8]}"
    output = os.path.join(out_dir, "job.out")
    # --no-requeue: a node that misses a heartbeat under load must fail the job, not rerun it.
    cmd = ["sbatch", "--wait", "--no-requeue", f"--job-name={name}", "--gpus-per-node=0", "--cpus-per-task=1",
           f"--output={output}", template]
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=JOB_TIMEOUT,
                              cwd=out_dir, env={**os.environ, **env})
    except subprocess.TimeoutExpired:
        subprocess.run(["scancel", f"--name={name}"], check=False)
        raise CheckFailed(f"{os.path.basename(template)} did not finish within {JOB_TIMEOUT}s; cancelled")
    with open(output) as f:
        job_output = f.read()
    ok = proc.returncode == 0
    expect(ok == expect_success,
           f"sbatch {os.path.basename(template)} exited {proc.returncode} (expected "
           f"{'success' if expect_success else 'failure'})\n{proc.stderr}\n--- job output:\n{job_output}")
    return job_output, time.monotonic() - started


def check_training_template(template, text, out_dir):
    nodes = int(sbatch_directive(text, "nodes"))
    per_node = int(sbatch_directive(text, "ntasks-per-node"))
    frameworks = expected_frameworks(text)
    uses_pmix = re.search(r"^srun .*--mpi=pmix", text, re.MULTILINE) is not None
    trainer = f"/usr/bin/python3 {STAND_IN} {out_dir} trainer"
    job_output, seconds = submit(template, out_dir, {"TRAINER": trainer})
    steps = by_step(reports(out_dir, "trainer"))
    expect(len(steps) == 1, f"expected one srun step, got steps {sorted(steps)}:\n{job_output}")
    tasks = next(iter(steps.values()))
    expect(len(tasks) == nodes * per_node,
           f"{len(tasks)} tasks ran; the template asks for {nodes} nodes x {per_node} tasks")
    expect(len({t["host"] for t in tasks}) == nodes, f"tasks ran on {sorted({t['host'] for t in tasks})}")
    check_step(tasks, expect_frameworks=frameworks)
    for t in tasks:
        rank = t["DTRAIN_RANK"]
        expect(t["DTRAIN_FRAMEWORKS"] == ",".join(frameworks),
               f"rank {rank}: DTRAIN_FRAMEWORKS={t['DTRAIN_FRAMEWORKS']}, template asks for {frameworks}")
        if "torch" not in frameworks:
            expect("RANK" not in t and "MASTER_ADDR" not in t, f"rank {rank}: torch names exported")
        if "paddle" not in frameworks:
            expect(not any(k.startswith("PADDLE_") for k in t), f"rank {rank}: paddle names exported")
        if "tf" not in frameworks:
            expect("TF_CONFIG" not in t, f"rank {rank}: TF_CONFIG exported")
        if "torch" in frameworks:
            expect((t["MASTER_ADDR"], t["MASTER_PORT"]) == (t["DTRAIN_MASTER_ADDR"], t["DTRAIN_MASTER_PORT"]),
                   f"rank {rank}: MASTER_ADDR:MASTER_PORT differ from DTRAIN_MASTER_*")
        if "paddle" in frameworks:
            # The local nodes have no GPU: Paddle needs gloo there.
            expect(t.get("PADDLE_DISTRI_BACKEND") == "gloo", f"rank {rank}: PADDLE_DISTRI_BACKEND={t.get('PADDLE_DISTRI_BACKEND')}")
            expect(t["PADDLE_TRAINER_ENDPOINTS"] == endpoint_list(t), f"rank {rank}: PADDLE_TRAINER_ENDPOINTS differ")
        if "tf" in frameworks:
            expect("TF_CONFIG" in t, f"rank {rank}: TF_CONFIG missing")
        if uses_pmix:
            expect(t.get("PMIX_RANK") == rank, f"rank {rank}: PMIX_RANK={t.get('PMIX_RANK')}: --mpi=pmix did not reach the task")
    print(f"dtrain: ok: {os.path.basename(template)}: {len(tasks)} tasks on {nodes} node(s) saw consistent "
          f"{','.join(frameworks)} variables{' and PMIx ranks' if uses_pmix else ''} ({seconds:.1f}s)")


def check_qualification_template(template, text, out_dir):
    nodes = int(sbatch_directive(text, "nodes"))
    per_node = int(sbatch_directive(text, "ntasks-per-node"))
    report_dir = os.path.join(out_dir, "reports")
    env = {
        "CHECK": f"/usr/bin/python3 {STAND_IN} {out_dir} check",
        "BENCH": f"/usr/bin/python3 {STAND_IN} {out_dir} bench",
        "BENCH_ARGS": "--backend nccl -b 8 -e 64M",
        "REPORT_DIR": report_dir,
        "STAND_IN_BUSBW": "12.5",
    }
    job_output, seconds = submit(template, out_dir, env)
    for role, args in (("check", ["--json", f"{report_dir}/check.json"]),
                       ("bench", env["BENCH_ARGS"].split() + ["--json", f"{report_dir}/bench.json"])):
        steps = by_step(reports(out_dir, role))
        expect(len(steps) == 1, f"{role} ran in steps {sorted(steps)}:\n{job_output}")
        tasks = next(iter(steps.values()))
        expect(len(tasks) == nodes * per_node, f"{role} ran as {len(tasks)} tasks, not {nodes} x {per_node}")
        check_step(tasks)
        for t in tasks:
            expect(t["args"] == args, f"{role} got arguments {t['args']}, expected {args}")
            expect(t.get("PMIX_RANK") == t["DTRAIN_RANK"], f"rank {t['DTRAIN_RANK']}: {role} started without PMIx")
    expect("dtrain qualification passed on" in job_output and "average bus bandwidth 12.5 GB/s" in job_output,
           f"no pass line with the bandwidth in the job output:\n{job_output}")
    # The job must fail, saying why, when a check fails or the bandwidth is below the floor.
    for name, change, reason in (("check", {"CHECK": "false"}, "dtrain-check found problems"),
                                 ("busbw", {"MIN_BUSBW": "300"}, "12.5 GB/s is below MIN_BUSBW=300")):
        failing_dir = tempfile.mkdtemp(prefix=f"fail-{name}-", dir=out_dir)
        failed_output, _ = submit(template, failing_dir, {**env, "REPORT_DIR": os.path.join(failing_dir, "reports"),
                                                          **change}, expect_success=False)
        expect(reason in failed_output, f"the failing job ({change}) did not say '{reason}':\n{failed_output}")
    print(f"dtrain: ok: {os.path.basename(template)}: dtrain-check and dtrain-bench stand-ins on {nodes * per_node} "
          f"PMIx tasks; passes, and fails on a failed check and on MIN_BUSBW ({seconds:.1f}s for the passing job)")


def check_template(template):
    with open(template) as f:
        text = f.read()
    out_dir = tempfile.mkdtemp(prefix=os.path.basename(template) + "-", dir=WORKDIR)
    plugin = os.environ["DTRAIN_PLUGIN"]
    expect(os.path.isfile(plugin), f"DTRAIN_PLUGIN={plugin!r} is not the built plugin")
    with cluster_plugstack(f"required {plugin}\n"):
        if "${TRAINER" in text:
            check_training_template(template, text, out_dir)
        elif "${CHECK" in text:
            check_qualification_template(template, text, out_dir)
        else:
            raise CheckFailed(f"{template} runs neither ${{TRAINER}} nor ${{CHECK}}: no stand-in can replace its program")
    subprocess.run(["rm", "-rf", out_dir], check=False)


# --- the Debian package ---------------------------------------------------------------------

def dpkg(*args):
    """dpkg, waiting while another dpkg or apt holds the lock (dpkg itself does not wait)."""
    for _ in range(60):
        proc = run(["dpkg", *args], check=False)
        if proc.returncode == 0 or "lock" not in proc.stderr:
            break
        time.sleep(2)
    if proc.returncode != 0:
        raise CheckFailed(f"dpkg {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def build_package(build_dir, out_dir):
    started = time.monotonic()
    proc = run(["cpack", "-G", "DEB", "--config", os.path.join(build_dir, "CPackConfig.cmake"), "-B", out_dir],
               check=False, timeout=300)
    expect(proc.returncode == 0, f"cpack -G DEB failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    debs = glob.glob(os.path.join(out_dir, f"{PACKAGE}_*.deb"))
    expect(len(debs) == 1, f"cpack made {debs}")
    return debs[0], time.monotonic() - started


def cache_value(build_dir, name):
    path = os.path.join(build_dir, "CMakeCache.txt")
    with open(path) as f:
        for line in f:
            match = re.match(rf"{re.escape(name)}:[A-Z]+=(.*)$", line.rstrip("\n"))
            if match:
                return match.group(1)
    raise CheckFailed(f"{path} has no {name}")


def installed_files():
    return run(["dpkg-query", "-L", PACKAGE]).stdout.split("\n")


def drop_in_line(path, plugin):
    """The drop-in must load nothing as shipped, and its commented plugin line must name the
    installed plugin. Returns that line, uncommented."""
    with open(path) as f:
        lines = f.read().splitlines()
    active = [l for l in lines if l.strip() and not l.lstrip().startswith("#")]
    expect(not active, f"{path} is active as installed: {active}")
    candidates = [l.lstrip("#").strip() for l in lines if re.match(r"#\s*(optional|required)\s+/", l)]
    expect(len(candidates) == 1, f"{path} should hold one commented plugin line, has {candidates}")
    line = candidates[0]
    expect(line.split()[1] == plugin, f"the drop-in names {line.split()[1]}, the package installed {plugin}")
    documented = set(re.findall(r"^#\s{3}(\w+)=", "\n".join(lines), re.MULTILINE))
    keys = {"enable", "frameworks", "ports", "port_block", "address", "ip_max_nodes", "suffix",
            "topology", "topology_cache", "bind", "gpus", "loopback", "check_ports"}
    expect(keys <= documented, f"{path} does not document {sorted(keys - documented)}")
    return line


def check_package(build_dir):
    expect(os.geteuid() == 0, "the package check installs a .deb: run it as root (CI runs it on a throwaway machine)")
    out_dir = tempfile.mkdtemp(prefix="package-", dir=WORKDIR)
    deb, cpack_seconds = build_package(build_dir, out_dir)
    pin_package = cache_value(build_dir, "DTRAIN_DEB_SLURM_PIN_PACKAGE")
    slurm_version = run(["dpkg-query", "-W", "-f=${Version}", pin_package]).stdout
    pin = f"{pin_package} (= {slurm_version})"
    depends = run(["dpkg-deb", "-f", deb, "Depends"]).stdout.strip()
    expect(pin in depends, f"the package depends on {depends}, not {pin}")
    # Login nodes have no slurmd: nothing may pull it (or slurmctld) in. A mismatched Slurm is
    # still refused, because the client and the node daemon both pin the pinned package too.
    daemons = [name for name in ("slurmd", "slurmctld") if re.search(rf"(^|[\s,|]){name}\b", depends)]
    expect(not daemons, f"the package depends on {daemons} ({depends}); login nodes have no such package")
    for holder in ("slurm-client", "slurmd"):
        theirs = run(["dpkg-query", "-W", "-f=${Depends}", holder]).stdout
        expect(pin in theirs, f"{holder} does not depend on {pin} ({theirs}): pinning it would not refuse a mismatched {holder}")
    version = run(["dpkg-deb", "-f", deb, "Version"]).stdout.strip()
    release = slurm_version.split("-")[0].split(":")[-1]
    expect(version.endswith(f"-1.slurm{release}"), f"the package's version {version} does not name Slurm {release}")
    maintainer = run(["dpkg-deb", "-f", deb, "Maintainer"]).stdout.strip()
    expect(maintainer == cache_value(build_dir, "DTRAIN_PACKAGE_MAINTAINER") and "localhost" not in maintainer,
           f"the package's maintainer is {maintainer!r}")
    try:
        started = time.monotonic()
        dpkg("-i", deb)
        install_seconds = time.monotonic() - started
        files = installed_files()
        plugins = [f for f in files if f.endswith("/spank_dtrain.so")]
        expect(len(plugins) == 1, f"the package holds {plugins}")
        plugin = plugins[0]
        expect(os.path.exists(os.path.join(os.path.dirname(plugin), "auth_munge.so")),
               f"{plugin} is not in Slurm's plugin directory (no auth_munge.so next to it)")
        drop_in = "/etc/slurm/plugstack.conf.d/dtrain.conf"
        expect(drop_in in files, f"{drop_in} is not in the package")
        conffiles = run(["dpkg-query", "-W", "-f=${Conffiles}", PACKAGE]).stdout
        expect(drop_in in conffiles, f"{drop_in} is not a conffile: {conffiles!r}")
        line = drop_in_line(drop_in, plugin)
        tools = sorted(f for f in files if f.startswith("/usr/bin/dtrain-"))
        for tool in ("dtrain-plan", "dtrain-bench", "dtrain-trainer"):
            expect(f"/usr/bin/{tool}" in tools, f"/usr/bin/{tool} is not in the package")
        for tool in tools:
            with open(tool, "rb") as f:
                compiled = f.read(4) == b"\x7fELF"
            # Installed programs find their libraries (libdtrain_bootstrap) without the build tree.
            if compiled:
                run([tool, "--help"])

        report_dir = tempfile.mkdtemp(prefix="reports-", dir=out_dir)
        with cluster_plugstack(line + "\n"):
            proc = run(["srun", "--distributed-train", "-N2", "-n4", "/usr/bin/python3", STAND_IN, report_dir, "task"])
        steps = by_step(reports(report_dir, "task"))
        expect(len(steps) == 1, f"expected one step, got {sorted(steps)}:\n{proc.stdout}\n{proc.stderr}")
        tasks = next(iter(steps.values()))
        expect(len(tasks) == 4, f"{len(tasks)} tasks reported")
        entries = check_step(tasks)
        low, high = (int(p) for p in re.search(r"ports=(\d+)-(\d+)", line).groups())
        ports = {int(e.rsplit(":", 1)[1]) for e in entries} | {int(tasks[0]["DTRAIN_MASTER_PORT"])}
        if not tasks[0].get("SLURM_STEP_RESV_PORTS"):
            expect(all(low <= p <= high for p in ports), f"ports {sorted(ports)} are outside the drop-in's ports={low}-{high}")

        pages = [f for f in files if re.search(r"/man/man[18]/[^/]+\.[18]\.gz$", f)]
        names = sorted(os.path.basename(f)[:-3] for f in pages)
        expect(names == MAN_PAGES, f"the package holds man pages {names}, slurm/man/ has {MAN_PAGES}")
        license_file = "/usr/share/doc/dtrain/LICENSE"
        expect(license_file in files, f"{license_file} is not in the package")
        with open(license_file) as installed, open(os.path.join(REPO, "LICENSE")) as ours:
            expect(installed.read() == ours.read(), f"{license_file} is not the repository's LICENSE")
        man = run([MAN_CHECK, *pages], check=False)
        expect(man.returncode == 0, f"installed man pages do not render cleanly:\n{man.stdout}{man.stderr}")
    finally:
        # Purge, not only remove: removal alone would leave the drop-in behind in /etc.
        dpkg("--purge", PACKAGE)
    expect(not os.path.exists(plugin) and not os.path.exists(drop_in), "files left behind after dpkg --purge")
    subprocess.run(["rm", "-rf", out_dir], check=False)
    print(f"dtrain: ok: package {os.path.basename(deb)} (version {version}, cpack {cpack_seconds:.1f}s, dpkg -i "
          f"{install_seconds:.1f}s) depends on {pin}, which slurmd and slurm-client pin too, and not on slurmd; "
          f"{len(tools)} tools start; the drop-in's line loaded {plugin} and a 2-node step got "
          f"endpoints {','.join(entries)}; {len(pages)} man pages render; LICENSE installed; purged")


if __name__ == "__main__":
    checks = {"template": check_template, "package": check_package}
    if len(sys.argv) != 3 or sys.argv[1] not in checks:
        print(f"dtrain: usage: {sys.argv[0]} {{template FILE.sbatch|package BUILD_DIR}}", file=sys.stderr)
        sys.exit(2)
    try:
        checks[sys.argv[1]](sys.argv[2])
    except CheckFailed as e:
        print(f"dtrain: check failed: {e}", file=sys.stderr)
        sys.exit(1)
