# SPDX-License-Identifier: Apache-2.0
"""Plumbing shared by the real-framework clients in tests/clients.

Each client runs one framework's own initialisation with nothing but the environment the dtrain
SPANK plugin exported, performs a collective across all ranks and checks the result. This module
holds what the clients have in common: reading the contract variables with a clear error, a
watchdog that turns a hang into a bounded failure, and the one-line verdict the tests match.

Exit status: 0 success, 1 the framework failed or returned a wrong result, 2 a contract variable is
missing or malformed, 3 the watchdog fired (the framework hung).
"""

import os
import socket
import sys
import threading
import time
import traceback
from pathlib import Path

# The client script of each framework, in this directory.
CLIENTS = {"torch": "torch_client.py", "paddle": "paddle_client.py", "tf": "tf_client.py"}

# Launcher side (run_local.py, cluster_client_step.py): what the tests add to the plugin's
# environment (gloo's interface: run_local's processes share loopback, the local cluster's nodes
# each have eth0 in a network namespace of their own), and which inherited variables they remove
# so that a client cannot pass by reading something the plugin did not export.
LOOPBACK_SETTINGS = {"GLOO_SOCKET_IFNAME": "lo"}
CONTRACT_PREFIXES = ("DTRAIN_", "PADDLE_", "GROUP_", "ROLE_", "FLAGS_", "TF_", "GLOO_", "NCCL_",
                     "UCX_", "CUDA_", "PET_", "JAX_")
CONTRACT_NAMES = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                  "MASTER_PORT", "OMP_NUM_THREADS", "LD_PRELOAD"}

# Set by the launchers to a directory that every rank can see (outside the nodes' private /tmp):
# the clients meet there before they exit, see Client.exit_barrier.
EXIT_BARRIER_VARIABLE = "CLIENT_EXIT_BARRIER_DIR"

EXIT_FRAMEWORK_ERROR = 1
EXIT_BAD_ENVIRONMENT = 2
EXIT_HUNG = 3


def launcher_environment(environ, settings):
    """environ without any contract variable, plus the launcher's settings."""
    kept = {name: value for name, value in environ.items()
            if name not in CONTRACT_NAMES and not name.startswith(CONTRACT_PREFIXES)}
    kept.update(settings)
    return kept


class ContractError(Exception):
    """A variable of the plugin's environment contract is missing or malformed."""


class ResultError(Exception):
    """The framework completed a collective but returned a wrong value."""


def required_env(name):
    value = os.environ.get(name)
    if value is None or value == "":
        raise ContractError(
            f"environment variable {name} is not set; it is exported by the dtrain SPANK plugin "
            "(run the client under 'srun --distributed-train', or tests/clients/run_local.py)")
    return value


def required_int(name):
    text = required_env(name)
    try:
        return int(text)
    except ValueError:
        raise ContractError(f"environment variable {name}={text!r} is not an integer") from None


def expected_sum(world_size):
    """Sum over ranks of (rank + 1): what an all_reduce of rank+1 must return."""
    return world_size * (world_size + 1) // 2


def check_equal(what, got, expected):
    if got != expected:
        raise ResultError(f"{what}: got {got!r}, expected {expected!r}")


def write_line(fd, text):
    """One write(2) per line: the ranks of a step share one output stream, and a single write
    below PIPE_BUF is never interleaved with another rank's line."""
    os.write(fd, (text + "\n").encode())


class Client:
    """Runs a client body under a watchdog and reports one verdict line.

    The body receives this object, calls phase() before each step that may block, and returns
    the text for the result= field of the OK line.
    """

    def __init__(self, framework, timeout_s):
        self.framework = framework
        self.timeout_s = timeout_s
        self.rank = "?"
        self.world_size = "?"
        self._phase = "start-up"

    def phase(self, text):
        self._phase = text

    def _fail(self, status, message):
        sys.stdout.flush()
        sys.stderr.flush()
        write_line(2, f"dtrain: {self.framework} client rank={self.rank} world={self.world_size} "
                   f"host={socket.gethostname()}: {message}")
        # os._exit: frameworks leave non-daemon threads behind (gRPC, gloo) that would block a
        # normal interpreter exit after a failure.
        os._exit(status)

    def exit_barrier(self):
        """Waits until every rank has its result. A worker that exits while a peer still reads
        from it breaks the peer's collective: TensorFlow's ring all-reduce then fails with
        "Socket closed" on the slower worker. A file per rank in the launcher's directory is a
        barrier that needs none of the framework's own connections."""
        directory = os.environ.get(EXIT_BARRIER_VARIABLE)
        if not directory:
            return
        self.phase(f"exit barrier: waiting for all {self.world_size} ranks in {directory}")
        Path(directory, f"done.{self.rank}").touch()
        while sum(1 for _ in Path(directory).glob("done.*")) < int(self.world_size):
            time.sleep(0.05)

    def _on_timeout(self):
        self._fail(EXIT_HUNG, f"no result after {self.timeout_s} s, stuck in: {self._phase}")

    def run(self, body):
        watchdog = threading.Timer(self.timeout_s, self._on_timeout)
        watchdog.daemon = True
        watchdog.start()
        try:
            result = body(self)
            self.exit_barrier()
        except ContractError as error:
            self._fail(EXIT_BAD_ENVIRONMENT, str(error))
        except ResultError as error:
            self._fail(EXIT_FRAMEWORK_ERROR, f"wrong result in {self._phase}: {error}")
        except Exception as error:  # the framework's own error, reported verbatim
            traceback.print_exc(file=sys.stderr)
            self._fail(EXIT_FRAMEWORK_ERROR,
                       f"{self._phase} failed: {type(error).__name__}: {error}")
        watchdog.cancel()
        sys.stdout.flush()
        sys.stderr.flush()
        write_line(1, f"OK {self.framework} rank={self.rank} world={self.world_size} "
                   f"host={socket.gethostname()} result={result}")
        # Same reason as in _fail: the result is in, and a framework's exit-time teardown (for
        # example TensorFlow's gRPC server, which has no clean shutdown) must not turn it into a
        # hang or a crash.
        os._exit(0)
