# SPDX-License-Identifier: Apache-2.0
"""What the cluster tests that run framework clients as srun steps share (cluster_client_step.py,
launcher_step.py, memory_file_step.py): the failure they report, the cluster variables they need,
and the OK line every client prints (client_common.Client)."""

import os
import re

# "OK FRAMEWORK rank=R world=W host=HOST result=..." (client_common.Client.report).
OK_LINE = re.compile(r"^OK (\S+) rank=(\d+) world=(\d+) host=(\S+) result=(.*)$")


class StepFailed(Exception):
    """The step did not do what the test expects; the message says what differed."""


def cluster_env(name):
    """A variable of the local cluster's env.sh, or StepFailed naming how to get it."""
    value = os.environ.get(name)
    if not value:
        raise StepFailed(f"{name} is not set; run through ctest (dtrain_add_cluster_test sources "
                         "the cluster's env.sh) or source <state-dir>/env.sh first")
    return value
