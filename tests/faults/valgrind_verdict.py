#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Reads the memcheck logs of slurmstepd (slurm/local/cluster.sh --valgrind-stepd) and fails when an
error's stack has a frame of dtrain's SPANK plugin.

Usage: valgrind_verdict.py LOG_DIR
Prints, per finished process: its pid, the errors valgrind counted and suppressed, and every
error record in full; exits 1 when a record names dtrain, 2 when no slurmstepd finished.
"""
import glob
import os
import re
import sys

# A frame of the plugin: its module, its namespace, or its exported SPANK entry points.
DTRAIN_FRAME = re.compile(r"spank_dtrain\.so|dtrain::|\bslurm_spank_\w+ \(plugin\.cpp")
SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors from \d+ contexts \(suppressed: (\d+) from")


def error_records(lines):
    """Groups a log's lines into blank-line-separated records that carry a stack trace."""
    record = []
    for line in lines + [""]:
        text = re.sub(r"^==\d+== ?", "", line.rstrip("\n"))
        if text.strip():
            record.append(text)
            continue
        if any(re.match(r"\s+(at|by) 0x", l) for l in record) and "SUMMARY" not in record[0]:
            yield record
        record = []


def main():
    if len(sys.argv) != 2:
        sys.exit(f"dtrain: usage: {sys.argv[0]} LOG_DIR")
    finished, dtrain_records = 0, 0
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.log"))):
        with open(path, errors="replace") as f:
            lines = f.readlines()
        summary = next((SUMMARY.search(l) for l in lines if SUMMARY.search(l)), None)
        if summary is None:
            # A forked child that exec'd the task: valgrind stops following it at exec.
            continue
        finished += 1
        records = list(error_records(lines))
        print(f"{os.path.basename(path)}: {summary.group(1)} errors, {summary.group(2)} suppressed, "
              f"{len(records)} error records")
        for record in records:
            ours = any(DTRAIN_FRAME.search(l) for l in record)
            dtrain_records += ours
            print(("  [dtrain] " if ours else "  [other]  ") + "\n    ".join(record))
    if finished == 0:
        print("dtrain: no slurmstepd under valgrind finished (no ERROR SUMMARY in any log in "
              f"{sys.argv[1]}); did the step run on the node given to --valgrind-stepd?", file=sys.stderr)
        sys.exit(2)
    print(f"valgrind: {finished} slurmstepd processes finished, {dtrain_records} error records with "
          "dtrain frames")
    if dtrain_records:
        print(f"dtrain: memcheck found {dtrain_records} errors in dtrain's plugin; see the records above",
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
