#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Compiles the SPANK plugin's translation units against one Slurm release's public headers.

Usage:
  check_slurm_headers.py --series 25.11 --headers-root DIR --build-dir BUILD --workdir WORK SOURCE...

DIR holds one folder per release, <major>.<minor>.<micro>/slurm/*.h, with slurm_version.h.in as
Slurm's source tree has it (the build's DTRAIN_SLURM_HEADERS_DIR). The newest release of SERIES
there is copied into WORK with slurm_version.h filled in, and every SOURCE is compiled with
-fsyntax-only, the flags the build uses for it (BUILD/compile_commands.json: the project's
warnings) and -Werror, with WORK's headers searched first. The check fails when a SOURCE does
not compile, or when a Slurm header it includes came from anywhere but WORK.
"""
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
from checklib import CheckFailed, Parser  # noqa: E402

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VERSION_PLACEHOLDER = "#undef SLURM_VERSION_NUMBER"
# Flags that name the object file or its dependency file; the check writes neither.
FLAGS_WITH_VALUE = {"-o", "-MT", "-MF", "-MQ"}
FLAGS_ALONE = {"-c", "-MD", "-MMD"}




def newest_release(headers_root, series):
    """The folder of the newest release of `series` (e.g. 25.11 -> 25.11.7) under headers_root."""
    pattern = re.compile(rf"^{re.escape(series)}\.(\d+)$")
    releases = []
    if os.path.isdir(headers_root):
        for name in os.listdir(headers_root):
            match = pattern.match(name)
            if match and os.path.isfile(os.path.join(headers_root, name, "slurm", "slurm.h")):
                releases.append((int(match.group(1)), name))
    if not releases:
        raise CheckFailed(
            f"no Slurm {series} header set ({series}.<micro>/slurm/slurm.h) under {headers_root}; "
            "configure with -DDTRAIN_SLURM_HEADERS_DIR=<folder of header sets> "
            "(docs/development.md, test inputs)")
    return max(releases)[1]


def install_headers(source_dir, release, include_dir):
    """Copies the release's headers into include_dir/slurm, with slurm_version.h filled in the
    way Slurm's configure does: its one `#undef SLURM_VERSION_NUMBER` becomes the number."""
    target = os.path.join(include_dir, "slurm")
    shutil.rmtree(include_dir, ignore_errors=True)
    os.makedirs(target)
    for name in os.listdir(source_dir):
        if name.endswith(".h"):
            shutil.copyfile(os.path.join(source_dir, name), os.path.join(target, name))
    template = os.path.join(source_dir, "slurm_version.h.in")
    if not os.path.isfile(template):
        raise CheckFailed(f"{template} is missing; the header set needs Slurm's slurm_version.h.in")
    with open(template) as f:
        text = f.read()
    if text.count(VERSION_PLACEHOLDER + "\n") != 1:
        raise CheckFailed(f"{template} should hold exactly one line '{VERSION_PLACEHOLDER}' to fill in")
    major, minor, micro = (int(part) for part in release.split("."))
    number = f"0x{major:02x}{minor:02x}{micro:02x}"
    with open(os.path.join(target, "slurm_version.h"), "w") as f:
        f.write(text.replace(VERSION_PLACEHOLDER + "\n", f"#define SLURM_VERSION_NUMBER {number}\n"))
    return number


def compile_commands(build_dir):
    path = os.path.join(build_dir, "compile_commands.json")
    try:
        with open(path) as f:
            entries = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckFailed(f"cannot read {path} ({e}); configure the build with CMAKE_EXPORT_COMPILE_COMMANDS=ON")
    return {os.path.realpath(os.path.join(e["directory"], e["file"])): e for e in entries}


def syntax_only_command(entry, include_dir, depfile):
    """The build's command for one source, turned into a -fsyntax-only check that searches
    include_dir before every other folder and writes the headers it read to depfile."""
    argv = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    source = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    if "-Wall" not in argv:
        raise CheckFailed(f"the build compiles {entry['file']} without -Wall; the check needs the project's warning flags")
    kept = [argv[0], f"-I{include_dir}"]
    skip_value = False
    for arg in argv[1:]:
        if skip_value:
            skip_value = False
        elif arg in FLAGS_WITH_VALUE:
            skip_value = True
        elif arg in FLAGS_ALONE or os.path.realpath(os.path.join(entry["directory"], arg)) == source:
            continue
        else:
            kept.append(arg)
    # -Werror whether or not the build has it (DTRAIN_WERROR): a release's headers must not make
    # dtrain's own code warn.
    return kept + ["-Werror", "-fsyntax-only", "-MD", "-MF", depfile, source]


def slurm_headers_read(depfile):
    with open(depfile) as f:
        text = f.read().replace("\\\n", " ")
    return [p for p in text.split() if re.search(r"(^|/)slurm/[^/]+\.h$", p)]


def check_source(source, entry, include_dir, depdir):
    shown = os.path.relpath(source, PROJECT_ROOT)
    depfile = os.path.join(depdir, shown.replace("/", "_") + ".d")
    cmd = syntax_only_command(entry, include_dir, depfile)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=entry["directory"], timeout=300)
    if proc.returncode != 0:
        return shown, f"{shown} does not compile:\n{shlex.join(cmd)}\n{proc.stdout}{proc.stderr}"
    headers = slurm_headers_read(depfile)
    foreign = [h for h in headers if not os.path.realpath(h).startswith(include_dir + os.sep)]
    if foreign:
        return shown, f"{shown} read Slurm headers from outside the header set: {foreign}"
    return shown + ("" if headers else " (no Slurm header)"), None


def main():
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", required=True, help="Slurm release series, e.g. 25.11")
    parser.add_argument("--headers-root", required=True, help="folder of <version>/slurm/*.h header sets")
    parser.add_argument("--build-dir", required=True, help="build tree with compile_commands.json")
    parser.add_argument("--workdir", required=True, help="scratch folder for the filled-in headers")
    parser.add_argument("--jobs", type=int, default=2, help="compilers run at once (default 2)")
    parser.add_argument("sources", nargs="+", help="translation units to compile")
    args = parser.parse_args()
    if not re.fullmatch(r"\d+\.\d\d", args.series):
        raise CheckFailed(f"--series {args.series!r} is not a Slurm series such as 25.11")

    started = time.monotonic()
    release = newest_release(args.headers_root, args.series)
    include_dir = os.path.realpath(os.path.join(args.workdir, "include"))
    number = install_headers(os.path.join(args.headers_root, release, "slurm"), release, include_dir)
    depdir = os.path.join(args.workdir, "deps")
    os.makedirs(depdir, exist_ok=True)
    entries = compile_commands(args.build_dir)
    sources = [os.path.realpath(s) for s in args.sources]
    missing = [s for s in sources if s not in entries]
    if missing:
        raise CheckFailed(f"{missing} are not in {args.build_dir}/compile_commands.json; reconfigure the build")
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda s: check_source(s, entries[s], include_dir, depdir), sources))
    failures = [problem for _, problem in results if problem]
    if not failures and all(name.endswith("(no Slurm header)") for name, _ in results):
        failures.append("none of the sources includes a Slurm header, so none was checked")
    if failures:
        raise CheckFailed(f"against Slurm {release}'s headers (SLURM_VERSION_NUMBER {number}):\n" + "\n".join(failures))
    print(f"dtrain: ok: {len(results)} translation units compile with -Werror against Slurm {release}'s headers "
          f"(SLURM_VERSION_NUMBER {number}): {', '.join(name for name, _ in results)} "
          f"({time.monotonic() - started:.1f}s)")


if __name__ == "__main__":
    try:
        main()
    except CheckFailed as e:
        print(f"dtrain: check failed: {e}", file=sys.stderr)
        sys.exit(1)
