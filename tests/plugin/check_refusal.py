#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Cluster checks of a step that the plugin refuses on one node: that node ends the whole step
(issue 36), so no task anywhere runs the program, srun returns at once, and srun's output carries
the refusing node's reason. Also the rule for a port of the step held by the user's own process.

Usage: check_refusal.py CHECK   (one-node | sbatch | het | own-port)
Needs SLURM_CONF and DTRAIN_CLUSTER_DIR (source the cluster's env.sh), and DTRAIN_PLUGIN (the
built spank_dtrain.so). The refusal is another user (uid 65534) listening on the ports node2 would
give the step: every port Slurm may reserve (MpiParams=ports, the `site` profile), or else every
port of a pinned row of derived ports. Prints how long srun took; asserts no time.
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_plugin_steps import (PLUGSTACK, STATE, TIMEOUT, CheckFailed, expect,  # noqa: E402
                                held_ports, pinned_port_rows, run)

NOBODY = 65534
# The program every task runs: it says so after a short sleep, then waits long. A task that ran
# it for more than that sleep prints PROGRAM-RAN; a step nobody ends keeps srun for 300 s.
PROGRAM = ["/usr/bin/python3", "-c",
           "import os,sys,time; time.sleep(5); "
           "print('PROGRAM-RAN', os.environ.get('SLURM_PROCID'), os.uname().nodename, flush=True); "
           "time.sleep(300)"]


def reserved_range():
    """Slurm's MpiParams=ports range as (first, last), or None when Slurm reserves no ports."""
    config = run(["scontrol", "show", "config"]).stdout
    found = re.search(r"^MpiParams\s*=\s*.*ports=(\d+)-(\d+)", config, re.M)
    return (int(found.group(1)), int(found.group(2))) if found else None


class plugstack_line:
    """Loads the plugin as KIND (required or optional) with the cluster's own arguments plus
    EXTRA, for the scope; restores plugstack.conf after."""

    def __init__(self, kind, *extra):
        self.kind, self.extra = kind, extra

    def __enter__(self):
        with open(PLUGSTACK) as f:
            self.saved = f.read()
        words = next(line for line in self.saved.splitlines() if "spank_dtrain" in line).split()
        with open(PLUGSTACK, "w") as f:
            f.write(" ".join([self.kind, *words[1:], *self.extra]) + "\n")
        return self

    def __exit__(self, *exc):
        with open(PLUGSTACK, "w") as f:
            f.write(self.saved)


def node2_ports():
    """(plugstack arguments, the ports node2's local rank 0 can get, what they are), whatever the
    job and step ids."""
    reserved = reserved_range()
    if reserved:
        return (), range(reserved[0], reserved[1] + 1), f"Slurm's reserved ports {reserved[0]}-{reserved[1]}"
    base = 23000 + 2112 * (os.getpid() % 4)
    pin, row = pinned_port_rows(base)
    return pin, row(0), f"row 0 of the derived ports {pin[0]}"


def timed(cmd):
    """Runs srun CMD; returns its CompletedProcess and the seconds from the moment the step could
    start (srun's "has been allocated resources" line where it waited for nodes) to srun's exit."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr_lines = []

    def read_stderr():
        nonlocal start
        for line in proc.stderr:
            if "has been allocated resources" in line:
                start = time.monotonic()
            stderr_lines.append(line)

    reader = threading.Thread(target=read_stderr)
    reader.start()
    try:
        stdout = proc.stdout.read()
        proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    finally:
        reader.join(timeout=30)
    seconds = time.monotonic() - start
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, "".join(stderr_lines)), seconds


def expect_refused(proc, seconds, what, printed=None):
    """The step failed on node2 naming uid 65534, was ended everywhere, and no task ran the
    program."""
    text = printed if printed is not None else proc.stdout + proc.stderr
    expect("PROGRAM-RAN" not in text, f"{what}: a task ran the program:\n{text[-3000:]}")
    reason = re.search(r"dtrain: port (\d+) on node2 \([^)]*\), [^\n]* is held by a process of another user "
                       rf"\(uid {NOBODY}\)", text)
    expect(reason, f"{what}: node2's reason is not in the output:\n{text[-3000:]}")
    ended = re.search(r"dtrain: step (\d+\.\d+) ends on every node, since this node refused it", text)
    expect(ended, f"{what}: node2 did not say that it ends the step:\n{text[-3000:]}")
    print(f"dtrain: ok: {what}: node2 refused (port {reason.group(1)} held by uid {NOBODY}), step "
          f"{ended.group(1)} ended on every node, no task ran the program; srun returned after {seconds:.1f} s")


def check_one_node():
    pin, held, which = node2_ports()
    for kind in ("required", "optional"):
        with plugstack_line(kind, *pin), held_ports("node2", held, NOBODY):
            proc, seconds = timed(["srun", "--distributed-train", "-N3", "-n3", "-w", "node[1-3]", *PROGRAM])
        expect(proc.returncode != 0, f"{kind}: srun exited 0 although node2 refused the step")
        expect_refused(proc, seconds, f"{kind}: srun -N3 -n3, {which} held on node2")


def check_sbatch():
    # Inside a batch job the refused step ends, and the job goes on: the next step runs.
    pin, held, which = node2_ports()
    with tempfile.TemporaryDirectory(dir=os.environ.get("DTRAIN_TEST_WORKDIR", STATE)) as tmp:
        script, log = os.path.join(tmp, "job.sh"), os.path.join(tmp, "job.out")
        with open(script, "w") as f:
            f.write("#!/bin/bash\n#SBATCH -N3 -n3 -w node[1-3]\n"
                    "start=$(date +%s%N)\n"
                    f"srun --distributed-train {shlex.join(PROGRAM)}\n"
                    "status=$?\n"
                    "echo \"refused-step-exit=$status after $((($(date +%s%N) - start) / 1000000)) ms\"\n"
                    "srun -N1 -n1 -w node1 echo next-step-ran\n")
        with plugstack_line("required", *pin), held_ports("node2", held, NOBODY):
            proc = run(["sbatch", "--wait", "-o", log, script], check=False)
        with open(log) as f:
            printed = f.read()
    exit_line = re.search(r"refused-step-exit=(\d+) after (\d+) ms", printed)
    expect(exit_line and exit_line.group(1) != "0", f"the refused step's srun exit:\n{printed[-3000:]}")
    expect("next-step-ran" in printed, f"the job did not go on after the refused step:\n{printed[-3000:]}")
    expect_refused(proc, int(exit_line.group(2)) / 1000, f"sbatch -N3, step 0 with {which} held on node2",
                   printed)
    print("dtrain: ok: the batch job went on: its next step ran")


def check_het():
    # A het step: node2 is in component 1; component 0's node1 must not run the program either.
    pin, held, which = node2_ports()
    command = ["srun", "--distributed-train", "-w", "node1", "-N1", "-n1", *PROGRAM, ":",
               "--distributed-train", "-w", "node2,node3", "-N2", "-n2", *PROGRAM]
    with plugstack_line("required", *pin), held_ports("node2", held, NOBODY):
        proc, seconds = timed(command)
    expect(proc.returncode != 0, "srun exited 0 although node2 refused the het step")
    expect_refused(proc, seconds, f"het step node1 : node2,node3, {which} held on node2")


def check_own_port():
    # The user's own process (an earlier step, say) on node2's endpoint port: TensorFlow's workers
    # and PaddlePaddle's trainers bind it, so a step exporting all frameworks stops, on every node;
    # a PyTorch-only step, which never binds endpoint ports, runs with a warning.
    pin, held, which = node2_ports()
    step = ["srun", "-N3", "-n3", "-w", "node[1-3]"]
    with plugstack_line("required", *pin), held_ports("node2", held, os.getuid()):
        proc, seconds = timed([*step, "--distributed-train", *PROGRAM])
        torch = run([*step, "--distributed-train=torch", "/usr/bin/python3", "-c",
                     "import os; print('TORCH-STEP-RAN', os.environ['RANK'])"], check=False)
    text = proc.stdout + proc.stderr
    expect(proc.returncode != 0 and "PROGRAM-RAN" not in text, f"the step ran with its endpoint port held:\n{text[-3000:]}")
    reason = re.search(r"dtrain: port (\d+) on node2 \([^)]*\), the endpoint of local rank 0, is already in use by "
                       r"another process of yours, and TensorFlow's worker server \(TF_CONFIG\) and PaddlePaddle's "
                       r"trainer \(PADDLE_CURRENT_ENDPOINT\) binds it", text)
    expect(reason, f"no reason naming the binders:\n{text[-3000:]}")
    expect("ends on every node" in text, text[-3000:])
    print(f"dtrain: ok: the user's own process on node2's endpoint port {reason.group(1)} ({which}) stops a step "
          f"exporting TensorFlow and PaddlePaddle on every node; srun returned after {seconds:.1f} s")
    expect(torch.returncode == 0 and torch.stdout.count("TORCH-STEP-RAN") == 3,
           f"the PyTorch-only step did not run:\n{torch.stdout}\n{torch.stderr[-2000:]}")
    expect("no framework this step exports binds it" in torch.stderr, torch.stderr[-2000:])
    print("dtrain: ok: the same port only warns a PyTorch-only step, which runs")


CHECKS = {"one-node": check_one_node, "sbatch": check_sbatch, "het": check_het, "own-port": check_own_port}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CHECKS:
        print(f"usage: {sys.argv[0]} {{{'|'.join(CHECKS)}}}", file=sys.stderr)
        sys.exit(2)
    try:
        CHECKS[sys.argv[1]]()
    except (CheckFailed, subprocess.TimeoutExpired) as e:
        print(f"dtrain: check failed: {e}", file=sys.stderr)
        sys.exit(1)
