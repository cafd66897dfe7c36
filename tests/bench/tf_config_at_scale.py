#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks a TF_CONFIG that the plugin put in a memory file (TF_CONFIG_FILE) the way a TensorFlow
program has to take it: TensorFlow reads TF_CONFIG only from the environment
(tfconfig_cluster_resolver.py: json.loads(os.environ.get('TF_CONFIG', '{}'))), never from a file.

Without TensorFlow it checks the JSON; with it (any python that imports tensorflow), also that
TFConfigClusterResolver, fed the file's content through os.environ, and SimpleClusterResolver,
fed the parsed cluster without the environment, see every worker and this task. Usage:
    tf_config_at_scale.py FILE --workers N --index I
"""

import argparse
import json
import os
import re
import sys
import time

ENDPOINT = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$")


def say(check, verdict, detail):
    print(f"dtrain: tf-config-at-scale: {check}: {verdict} ({detail})", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--index", type=int, required=True)
    args = parser.parse_args()

    with open(args.file, encoding="utf-8") as f:
        text = f.read()
    start = time.perf_counter()
    config = json.loads(text)
    parse_ms = (time.perf_counter() - start) * 1000
    workers = config["cluster"]["worker"]
    problems = []
    if len(workers) != args.workers:
        problems.append(f"{len(workers)} workers, expected {args.workers}")
    if config["task"] != {"type": "worker", "index": args.index}:
        problems.append(f"task is {config['task']}")
    malformed = [w for w in workers if not ENDPOINT.match(w)]
    if malformed:
        problems.append(f"{len(malformed)} malformed endpoints, first {malformed[0]!r}")
    if len(set(workers)) != len(workers):
        problems.append("duplicate endpoints")
    if problems:
        say("json", "FAIL", "; ".join(problems))
        return 1
    say("json", "PASS", f"{len(text)} bytes, {len(workers)} workers, parsed in {parse_ms:.0f} ms")

    try:
        import tensorflow as tf  # noqa: PLC0415 (optional: only where it is installed)
    except ImportError:
        say("tensorflow", "SKIPPED", "tensorflow is not installed for " + sys.executable)
        return 0

    # What a user does at this size: put the file's content where TensorFlow looks for it, in
    # this process only (a 2 MB variable would make any later execve fail with E2BIG)...
    os.environ["TF_CONFIG"] = text
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    spec = resolver.cluster_spec()
    got = (spec.num_tasks("worker"), resolver.task_type, resolver.task_id,
           spec.task_address("worker", args.workers - 1))
    want = (args.workers, "worker", args.index, workers[-1])
    say("TFConfigClusterResolver", "PASS" if got == want else "FAIL",
        f"tensorflow {tf.__version__}: {got[0]} workers, task {got[1]} {got[2]}")
    del os.environ["TF_CONFIG"]
    if got != want:
        return 1

    # ... or leave the environment alone and hand the strategy a resolver built from the file.
    simple = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(config["cluster"]), task_type="worker", task_id=args.index)
    count = simple.cluster_spec().num_tasks("worker")
    say("SimpleClusterResolver", "PASS" if count == args.workers else "FAIL",
        f"{count} workers from the file, TF_CONFIG unset")
    return 0 if count == args.workers else 1


if __name__ == "__main__":
    sys.exit(main())
