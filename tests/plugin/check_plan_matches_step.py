#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""dtrain-plan against a live step: the offline plan, given the step's job and step ids, and the
plan made inside the step with --from-env both print the table every task really got, rank by
rank: node, host, local rank, endpoint, master address and port.

Usage: check_plan_matches_step.py DTRAIN_PLAN [srun layout options...]
Needs the cluster's env.sh (SLURM_CONF, DTRAIN_CLUSTER_DIR) and DTRAIN_PLUGIN, like
check_plugin_steps.py, whose helpers it uses.
"""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_plugin_steps import REPORTER, CheckFailed, expect, reports, run, srun_step  # noqa: E402


def live_table(tasks):
    return [{"rank": int(t["DTRAIN_RANK"]), "node": int(t["SLURM_NODEID"]), "host": t["host"],
             "local_rank": int(t["SLURM_LOCALID"]), "endpoint": t["DTRAIN_CURRENT_ENDPOINT"]}
            for t in tasks]


def plan_table(plan):
    return [{k: r[k] for k in ("rank", "node", "host", "local_rank", "endpoint")}
            for r in plan["ranks"]]


def compare(what, tasks, plan):
    live = live_table(tasks)
    planned = plan_table(plan)
    expect(len(live) == len(planned), f"{what}: {len(planned)} planned ranks, {len(live)} ran")
    for got, want in zip(live, planned):
        expect(got == want, f"{what}: rank {got['rank']} ran as {got} but was planned as {want}")
    master = (tasks[0]["DTRAIN_MASTER_ADDR"], int(tasks[0]["DTRAIN_MASTER_PORT"]))
    expect(master == (plan["master_addr"], plan["master_port"]),
           f"{what}: master {master} live, {plan['master_addr']}:{plan['master_port']} planned")
    live_endpoints = tasks[0].get("DTRAIN_ENDPOINTS") or tasks[0]["DTRAIN_ENDPOINTS_FILE:content"]
    expect(plan["endpoints"] == live_endpoints,
           f"{what}: the endpoint lists differ: {plan['endpoints']} planned, {live_endpoints} live")


def main(plan_tool, layout):
    tasks, _ = srun_step(layout)
    job, step = tasks[0]["SLURM_JOB_ID"], tasks[0]["SLURM_STEP_ID"]
    nodelist = run(["scontrol", "show", "hostlist",
                    ",".join(dict.fromkeys(t["host"] for t in tasks))]).stdout.strip()
    per_node = {}
    for t in tasks:
        per_node[int(t["SLURM_NODEID"])] = per_node.get(int(t["SLURM_NODEID"]), 0) + 1
    tasks_per_node = ",".join(str(per_node[n]) for n in sorted(per_node))
    distribution = layout[layout.index("-m") + 1] if "-m" in layout else "block"
    # Offline, on rank 0's node so that node names resolve as they did in the step. Files, not
    # /tmp: every emulated node has its own /tmp.
    work = tempfile.mkdtemp(prefix="plan-", dir=os.environ.get("DTRAIN_TEST_WORKDIR", "."))
    offline_json = os.path.join(work, "offline.json")
    # Ports Slurm reserved for the step (MpiParams=ports) are known only to the step itself.
    reserved = tasks[0].get("SLURM_STEP_RESV_PORTS")
    run(["srun", "-N1", "-n1", "-w", tasks[0]["host"], plan_tool, "--nodelist", nodelist,
         "--tasks-per-node", tasks_per_node, "-m", distribution, "--job-id", job,
         "--step-id", step, *(["--resv-ports", reserved] if reserved else []),
         "--json", offline_json])
    with open(offline_json) as f:
        compare(f"dtrain-plan --job-id {job} --step-id {step}", tasks, json.load(f))

    # Inside a step of the same shape, --from-env reads the ids and the layout from Slurm.
    inside_json = os.path.join(work, "from-env.json")
    reports_dir = os.path.join(work, "reports")
    os.mkdir(reports_dir)
    script = (f'[ "$SLURM_PROCID" = 0 ] && exec {plan_tool} --from-env --json {inside_json} '
              f'>/dev/null; exec /usr/bin/python3 {REPORTER} {reports_dir}')
    run(["srun", "--distributed-train", *layout, "bash", "-c", script])
    with open(inside_json) as f:
        inside = json.load(f)
    others = reports(reports_dir)
    shutil.rmtree(work)
    expect(len(others) == len(tasks) - 1, f"{len(others)} of {len(tasks) - 1} tasks reported")
    # Rank 0 ran dtrain-plan instead of the reporter: compare the ranks that reported, and rank
    # 0's row through the plan's own endpoint list.
    planned = plan_table(inside)
    for t in others:
        row = live_table([t])[0]
        expect(row == planned[row["rank"]],
               f"--from-env: rank {row['rank']} ran as {row} but was planned as "
               f"{planned[row['rank']]}")
        expect((t["DTRAIN_MASTER_ADDR"], int(t["DTRAIN_MASTER_PORT"])) ==
               (inside["master_addr"], inside["master_port"]), "--from-env: master differs")
    print(f"dtrain: ok: srun {' '.join(layout)}: dtrain-plan --job-id/--step-id and --from-env "
          f"print the table the {len(tasks)} tasks got (master "
          f"{inside['master_addr']}:{inside['master_port']})")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        main(sys.argv[1], sys.argv[2:])
    except CheckFailed as e:
        print(f"dtrain: check failed: {e}", file=sys.stderr)
        sys.exit(1)
