#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The expectations of tests/check/check_cases.sh on one run of dtrain-check on the local
cluster: its exit status, its printed report and its JSON report (--json). check_cases.sh runs
srun and passes what it produced; on a failure this prints the output and the JSON too.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
from checklib import (add_check, arg, expect, expect_equal, expect_line, new_parser,  # noqa: E402
                      node_address, read_text, run_check)


def expect_report(what, cond):
    expect(cond, f"JSON check failed: {what}")
    print(f"dtrain: ok: {what}")


def check_healthy(out, r, _args):
    expect_line("summary", r"^dtrain-check: 4 nodes, 8 ranks, plugin in effect$", out)
    expect_line("verdict", r"^Verdict: healthy", out)
    expect_report("healthy, exit status 0, plugin in effect",
                  r["healthy"] and r["exit_status"] == 0 and r["plugin_in_effect"])
    expect_report("4 nodes", r["node_count"] == 4 and len(r["nodes"]) == 4)
    expect_report("ranks 0..7", r["rank_count"] == 8 and [x["rank"] for x in r["ranks"]] == list(range(8)))
    expect_report("nodes node1..node4",
                  sorted(n["name"] for n in r["nodes"]) == ["node1", "node2", "node3", "node4"])
    expect_report("no GPUs", all(n["gpu_count"] == 0 and n["gpus"] == [] for n in r["nodes"]))
    expect_report("fingerprint consistent", r["fingerprint"]["consistent"])
    expect_report("one fingerprint over all ranks",
                  len({json.dumps(x["fingerprint"], sort_keys=True) for x in r["ranks"]}) == 1)
    expect_report("preflight ran probes, none failed",
                  r["preflight"]["ran"] and r["preflight"]["probes"] > 0 and not r["preflight"]["failures"])
    expect_report("no port in use", all(p["in_use"] is False for x in r["ranks"] for p in x["ports"]))
    expect_report("no problem finding", not [f for f in r["findings"] if f["severity"] == "problem"])


def check_held_endpoint_port(out, r, args):
    # Every port of row 0 (args.base_port .. + 64) is held on node3: rank 6's is one of them.
    held = range(args.base_port, args.base_port + 65)
    node3 = re.escape(node_address("node3"))
    expect_line("rank 6's port row", rf"^  6 +node3 .* {node3}:\d+ +IN USE", out)
    port = re.search(rf"^  6 +node3 .* {node3}:(\d+) +IN USE", out, re.M).group(1)
    expect(int(port) in held, f"rank 6's port {port} is not one of the held {held.start}-{held.stop - 1}")
    expect_line("finding",
                rf"^  \[problem\] endpoint-port-in-use: on node3, rank 6's endpoint {node3}:{port} ", out)
    expect_line("fix", r"^      fix: Find the holder with .ss -ltnp", out)
    expect_report("endpoint-port-in-use names node3 and rank 6 only",
                  [(f["node"], f["rank"]) for f in r["findings"] if f["id"] == "endpoint-port-in-use"]
                  == [("node3", 6)])
    endpoint = f"{node_address('node3')}:{port}"
    expect_report(f"a finding names {endpoint} and ss -ltnp",
                  any(endpoint in f["detail"] and "ss -ltnp" in f["fix"] for f in r["findings"]))
    expect_report("not healthy, exit status 1", not r["healthy"] and r["exit_status"] == 1)


def check_no_plugin(out, r, _args):
    expect_line("summary", r"^dtrain-check: 2 nodes, 2 ranks, plugin NOT in effect$", out)
    expect_line("finding",
                r"^  \[problem\] plugin-not-in-effect: no rank has the plugin's DTRAIN_\* variables", out)
    expect_line("fix", r"^      fix: Launch with .srun --mpi=pmix --distributed-train", out)
    expect_report("the one problem is plugin-not-in-effect",
                  [f["id"] for f in r["findings"] if f["severity"] == "problem"] == ["plugin-not-in-effect"])
    expect_report("preflight ran, none failed", r["preflight"]["ran"] and not r["preflight"]["failures"])


# case: (dtrain-check's exit status, the step it ran on, the checks of its reports)
CASES = {
    "healthy": (0, "srun --distributed-train -N4 -n8, a healthy step", check_healthy),
    "held-endpoint-port": (1, "srun --distributed-train -N4 -n8, rank 6's endpoint port held on node3",
                           check_held_endpoint_port),
    "no-plugin": (1, "srun -N2 -n2, without the plugin", check_no_plugin),
}


def check_case(args):
    expected_status, step, check_reports = CASES[args.case]
    expect_equal(f"exit status of dtrain-check on {step}", args.status, expected_status)
    expect(os.path.exists(args.json), f"dtrain-check wrote no JSON report {args.json}")
    with open(args.json) as f:
        report = json.load(f)
    check_reports(read_text(args.output), report, args)
    print(f"dtrain: ok: case {args.case}")


def show_output(args):
    shown = ""
    for what, path in (("output", args.output), ("json", args.json)):
        if os.path.exists(path):
            shown += f"\n---- {what} ----\n{read_text(path)}"
    return shown


def main():
    parser, cases = new_parser(__doc__)
    reports = (arg("--status", type=int, required=True, help="dtrain-check's exit status"),
               arg("--output", required=True, help="its stdout and stderr"),
               arg("--json", required=True, help="its --json report"))
    held_port = (arg("--base-port", type=int, required=True,
                     help="the first of the 65 held ports (row 0 of pin_plugin_ports)"),)
    for name, (_, step, _) in CASES.items():
        add_check(cases, name, check_case, step, *reports,
                  *(held_port if name == "held-endpoint-port" else ()), case=name)
    run_check(parser, show_on_failure=show_output)


if __name__ == "__main__":
    main()
