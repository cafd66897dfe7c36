#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes tests/fuzz/corpus/fuzz_topology: the machines of tests/fixtures/topologies with two
cores per socket or NUMA group (the I/O trees are kept whole), so that each seed is a few KiB
and the fuzzer spends its time on the structure rather than on repeated cores; plus the same
smallest GPU node in hwloc's v1 XML format. The guard-*.xml seeds beside them are written by
hand: one of each shape on which hwloc 2.9 crashes and the XML guard must refuse. Rerun only
when the fixtures change:

    python3 tests/fuzz/make_topology_seeds.py
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # keep the fixtures folder clean
sys.path.insert(0, os.path.join(HERE, "..", "fixtures", "topologies"))
import generate_fixtures as fixtures  # noqa: E402

CORES_KEPT = 2


def trimmed_cores(first_core, count, threads, total_cores):
    """Keeps CORES_KEPT cores of each group, renumbered densely, Linux style (PU c + t*total)."""
    group = first_core // count
    total = total_cores // count * CORES_KEPT
    return [fixtures.core(c, [c + t * total for t in range(threads)])
            for c in range(group * CORES_KEPT, (group + 1) * CORES_KEPT)]


def main():
    out = os.path.join(HERE, "corpus", "fuzz_topology")
    os.makedirs(out, exist_ok=True)
    fixtures.cores_for = trimmed_cores
    machines = [("dgx-h100-trimmed.xml", fixtures.dgx_h100(), "dgx-h100"),
                ("4gpu-missing-nic-trimmed.xml", fixtures.four_gpu_missing_nic(), "snc-4gpu"),
                ("gpu-order-differs-trimmed.xml", fixtures.gpu_order_differs(), "v100-4gpu"),
                ("no-io-trimmed.xml", fixtures.no_io(), "cpu-only"),
                ("two-cpu-two-gpu.xml", fixtures.two_cpu_two_gpu(), "two-cpu-two-gpu")]
    for name, machine, host in machines:
        fixtures.write(os.path.join(out, name), machine, host)
    subprocess.run(["lstopo", "--if", "xml", "-i", os.path.join(out, "two-cpu-two-gpu.xml"),
                    "--of", "xml", "--export-xml-flags", "v1", "-f",
                    os.path.join(out, "two-cpu-two-gpu-v1.xml")], check=True)


if __name__ == "__main__":
    main()
