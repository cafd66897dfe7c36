#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The documentation says what the code does: checks that fail when the two drift apart.

Usage:
  check_docs.py consistency --repo REPO --build BUILD_DIR
  check_docs.py spdx-script --repo REPO

consistency (ctest -R docs_consistency), each check printing one line:
  tools      every program the build installs (cmake --install into a scratch directory) has a
             man page of its own name among the installed pages, and the plugin has
             spank_dtrain.8;
  options    every option a tool's parser takes (its --help output for compiled tools, the
             getopts string and --long case arms for scripts) appears in its man page;
  plugstack  every plugstack.conf key the plugin's parser knows (src/core/config.cpp) is
             described in spank_dtrain(8), in slurm/site/dtrain.conf and in docs/admin.md;
  paths      every repository path the documentation names (README.md, SECURITY.md, docs/,
             the man pages, slurm/site/, slurm/examples/, the READMEs under tests/ and
             bootstrap/), and every relative Markdown link, exists;
  spdx       every source file git tracks (*.cpp *.hpp *.cu *.h *.py *.sh *.cmake,
             CMakeLists.txt, files that start with a shebang; not fuzzer corpora) carries
             "SPDX-License-Identifier: Apache-2.0" in its first lines (tests/deploy/add_spdx.sh
             adds it), and LICENSE is the Apache License 2.0;
  contact    the packages' maintainer (cmake/DtrainPackaging.cmake, slurm/packaging/dtrain.spec)
             is the address SECURITY.md gives for reports;
  text       no document names a path outside the repository: test inputs are named by the
             variables that take them (DOC_ONLY_FORBIDDEN below).
spdx-script: add_spdx.sh, run on a scratch git repository, adds the line in each file's comment
syntax after a shebang, leaves data files alone, and changes nothing when run again.

Exit status 0 when every check passed, 1 otherwise (every failure is listed).
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

IDENTIFIER = "SPDX-License-Identifier: Apache-2.0"
C_STYLE = (".cpp", ".hpp", ".cu", ".h")
HASH_STYLE = (".py", ".sh", ".cmake")
DATA = (".xml", ".json", ".txt", ".md", ".svg")

# Documentation whose repository paths must exist (globs relative to the repository).
DOCS = ["README.md", "SECURITY.md", "docs/*.md", "slurm/man/*.[18]", "slurm/site/*",
        "slurm/examples/README.md", "slurm/examples/*.sbatch", "tests/*/README.md",
        "bootstrap/README.md"]
# Where a path of the repository starts; core/ and topology/ are short for src/core/ and
# src/topology/, as the documentation writes them.
PATH_PATTERN = re.compile(
    r"(?<![\w./~$-])((?:\.ci|bootstrap|cmake|docs|slurm|spank|src|tests|core|topology)"
    r"/[\w.*+-]*(?:/[\w.*+-]+)*/?)")
SHORT_PREFIXES = {"core/": "src/core/", "topology/": "src/topology/"}
# Paths of other projects that the documentation cites as sources (Slurm's tree, headers of
# the Slurm package), not files of this repository.
EXTERNAL_PATHS = {
    "src/common/reverse_tree.c",  # Slurm
    "src/common/spank.c",  # Slurm
    "src/common/plugstack.c",  # Slurm
    "src/api/Makefile.am",  # Slurm
    "slurm/slurm.h", "slurm/spank.h", "slurm/slurm_version.h",  # Slurm's public headers
}

# Paths outside the repository, allowed in code only as the default of a variable that takes
# a test input; never in the documentation.
DOC_ONLY_FORBIDDEN = [
    (re.compile(r"\.\./shared\b"), "a path outside the repository (../shared)"),
    (re.compile(r"\bshared/third_party\b"), "a path outside the repository (shared/third_party)"),
]


class Report:
    def __init__(self):
        self.failures = []

    def check(self, name, problems, ok_line):
        if problems:
            self.failures.append(name)
            print(f"dtrain: check failed: {name}:", file=sys.stderr)
            for problem in problems:
                print(f"  {problem}", file=sys.stderr)
        else:
            print(f"dtrain: ok: {name}: {ok_line}")


def tracked_files(repo):
    out = subprocess.run(["git", "-C", repo, "ls-files", "-z"], capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace")


def roff_text(text):
    """A man page's source with the roff escapes that hide option names taken out."""
    text = re.sub(r"\\f(?:\[[A-Z]*\]|[BIRP])", "", text)
    text = text.replace("\\-", "-").replace("\\(hy", "-").replace("\\c", "").replace("\\e", "\\")
    text = text.replace("\\(aq", "'").replace("\\&", "")
    return text


# --- tools and options ----------------------------------------------------------------------

def stage_install(build, work):
    stage = os.path.join(work, "stage")
    shutil.rmtree(stage, ignore_errors=True)
    proc = subprocess.run(["cmake", "--install", build], env={**os.environ, "DESTDIR": stage},
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"dtrain: check failed: cmake --install {build} (DESTDIR={stage}) exited "
                         f"{proc.returncode}: build every target first\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    files = []
    for root, _, names in os.walk(stage):
        files += [os.path.join(root, n) for n in names]
    return stage, files


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def help_options(tool, stage, files):
    """The options of a compiled tool, as its CLI11 parser prints them in --help."""
    libdirs = sorted({os.path.dirname(f) for f in files if re.search(r"\.so(\.\d+)*$", f)})
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(libdirs + [os.environ.get("LD_LIBRARY_PATH", "")]))
    proc = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=60, env=env)
    if proc.returncode != 0:
        return None, f"{os.path.basename(tool)} --help exited {proc.returncode}: {proc.stderr[-500:]}"
    options = set()
    for line in proc.stdout.splitlines():
        # CLI11 writes each option's names first on its line: "  -b,     --minbytes TEXT ...".
        match = re.match(r"\s+((?:-{1,2}[\w-]+,?\s*)+)", line)
        if match:
            options |= set(re.findall(r"-{1,2}[A-Za-z][\w-]*", match.group(1)))
    return options, None


def script_options(path):
    """The options of a shell tool: its getopts string and its --long case arms."""
    text = read_text(path) or ""
    options = set()
    for spec in re.findall(r'getopts\s+"([^"]+)"', text):
        options |= {f"-{c}" for c in spec if c.isalnum()}
    options |= set(re.findall(r"^\s*(--[a-z][\w-]*)(?:\s*\|[^)]*)?\)", text, re.MULTILINE))
    return options


def check_tools(report, repo, build, work):
    stage, files = stage_install(build, work)
    pages = {os.path.basename(f)[:-3] for f in files if re.search(r"/man[18]/[^/]+\.[18]\.gz$", f)}
    tools = sorted(f for f in files if os.path.basename(os.path.dirname(f)) == "bin" and os.access(f, os.X_OK))
    plugins = sorted(f for f in files if re.search(r"/spank_[\w-]+\.so$", f))
    problems = []
    for tool in tools:
        if f"{os.path.basename(tool)}.1" not in pages:
            problems.append(f"{os.path.basename(tool)} is installed but no {os.path.basename(tool)}.1 is "
                            f"(add slurm/man/{os.path.basename(tool)}.1)")
    for plugin in plugins:
        page = os.path.basename(plugin)[:-3] + ".8"
        if page not in pages:
            problems.append(f"{os.path.basename(plugin)} is installed but no {page} is")
    if not tools or not plugins:
        problems.append(f"the install holds {len(tools)} tools and {len(plugins)} plugins: not a full install")
    report.check("tools", problems,
                 f"{len(tools)} installed tools and {len(plugins)} plugin, each with its installed man page "
                 f"({', '.join(sorted(pages))})")

    problems, counted = [], 0
    for tool in tools:
        name = os.path.basename(tool)
        page = os.path.join(repo, "slurm", "man", f"{name}.1")
        if not os.path.exists(page):
            continue  # reported above
        if is_elf(tool):
            options, error = help_options(tool, stage, files)
            if error:
                problems.append(error)
                continue
        else:
            options = script_options(tool)
        if not options:
            problems.append(f"{name}: no options found in its parser")
            continue
        with open(page) as f:
            text = roff_text(f.read())
        for option in sorted(options):
            counted += 1
            if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text):
                problems.append(f"{name} takes {option}, which slurm/man/{name}.1 does not mention")
    report.check("options", problems, f"{counted} options of {len(tools)} tools, each in the tool's man page")
    shutil.rmtree(stage, ignore_errors=True)


# --- plugstack keys ---------------------------------------------------------------------------

def check_plugstack(report, repo):
    with open(os.path.join(repo, "src", "core", "config.cpp")) as f:
        keys = sorted(set(re.findall(r'key == "(\w+)"', f.read())))
    with open(os.path.join(repo, "slurm", "man", "spank_dtrain.8")) as f:
        man = roff_text(f.read())
    with open(os.path.join(repo, "slurm", "site", "dtrain.conf")) as f:
        dropin = f.read()
    admin_path = os.path.join(repo, "docs", "admin.md")
    admin = open(admin_path).read() if os.path.exists(admin_path) else ""
    problems = []
    if len(keys) < 5:
        problems.append(f"found only {keys} in src/core/config.cpp: has the parser changed shape?")
    for key in keys:
        if not re.search(rf"^\.(?:B|BR|BI|TP)\s.*\b{key}=", man, re.MULTILINE):
            problems.append(f"spank_dtrain.8 describes no {key}= (a .TP/.B line naming it)")
        if not re.search(rf"^#\s+{key}=", dropin, re.MULTILINE):
            problems.append(f"slurm/site/dtrain.conf describes no {key}=")
        if not re.search(rf"^\|\s*`{key}`\s*\|", admin, re.MULTILINE):
            problems.append(f"docs/admin.md's configuration table has no row for `{key}`")
    report.check("plugstack", problems,
                 f"{len(keys)} plugstack keys, each in spank_dtrain.8, slurm/site/dtrain.conf and docs/admin.md")


# --- paths named in the documentation ---------------------------------------------------------

def doc_files(repo):
    found = set()
    for pattern in DOCS:
        found |= {p for p in glob.glob(os.path.join(repo, pattern)) if os.path.isfile(p)}
    return sorted(found)


def path_exists(repo, path):
    for short, full in SHORT_PREFIXES.items():
        if path.startswith(short):
            path = full + path[len(short):]
    full = os.path.join(repo, path)
    if any(c in path for c in "*?["):
        return bool(glob.glob(full))
    return os.path.exists(full)


def anchors(markdown_path):
    """The anchors GitHub gives the headings of a Markdown file: lower case, punctuation other
    than '-' and '_' dropped, spaces made '-'; repeated headings get -1, -2, ..."""
    found, counts, fenced = set(), {}, False
    with open(markdown_path) as f:
        for line in f:
            if line.startswith("```"):
                fenced = not fenced
            match = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not match:
                continue
            slug = re.sub(r"[^\w\- ]", "", match.group(1).replace("`", "").lower()).replace(" ", "-")
            n = counts.get(slug, 0)
            counts[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def check_paths(report, repo):
    problems, seen = [], 0
    for doc in doc_files(repo):
        text = read_text(doc) or ""
        rel = os.path.relpath(doc, repo)
        if doc.endswith((".1", ".8")):
            text = roff_text(text)
        for match in PATH_PATTERN.finditer(text):
            path = match.group(1).rstrip(".,:;")
            if path in EXTERNAL_PATHS or path.count("/") == 0:
                continue
            # "slurm/man/" and similar folder names are checked; "docs/" alone too.
            seen += 1
            if not path_exists(repo, path):
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f"{rel}:{line} names {path}, which does not exist")
        if doc.endswith(".md"):
            for match in re.finditer(r"\]\(([^)\s]+)\)", text):
                target, _, anchor = match.group(1).partition("#")
                if re.match(r"[a-z]+:", target):
                    continue
                seen += 1
                line = text.count("\n", 0, match.start()) + 1
                linked = os.path.normpath(os.path.join(os.path.dirname(doc), target)) if target else doc
                if not os.path.exists(linked):
                    problems.append(f"{rel}:{line} links to {target}, which does not exist")
                elif anchor and linked.endswith(".md") and anchor not in anchors(linked):
                    problems.append(f"{rel}:{line} links to {match.group(1)}, but "
                                    f"{os.path.relpath(linked, repo)} has no such heading")
    report.check("paths", problems, f"{seen} repository paths and links in {len(doc_files(repo))} documents exist")


# --- SPDX identifiers and the licence ---------------------------------------------------------

def comment_style(repo, path):
    if re.search(r"(^|/)corpus/", path):
        return None
    name = os.path.basename(path)
    if name.endswith(C_STYLE):
        return "//"
    if name.endswith(HASH_STYLE) or name == "CMakeLists.txt":
        return "#"
    if name.endswith(DATA):
        return None
    with open(os.path.join(repo, path), "rb") as f:
        return "#" if f.read(2) == b"#!" else None


def check_spdx(report, repo):
    problems, count = [], 0
    for path in tracked_files(repo):
        full = os.path.join(repo, path)
        if os.path.islink(full) or not os.path.isfile(full):
            continue
        style = comment_style(repo, path)
        if not style:
            continue
        count += 1
        with open(full, errors="replace") as f:
            head = [f.readline() for _ in range(3)]
        if f"{style} {IDENTIFIER}\n" not in head:
            problems.append(f"{path}: no '{style} {IDENTIFIER}' line at the top (tests/deploy/add_spdx.sh adds it)")
    with open(os.path.join(repo, "LICENSE")) as f:
        licence = f.read()
    if "Apache License" not in licence or "Version 2.0, January 2004" not in licence or \
            "END OF TERMS AND CONDITIONS" not in licence:
        problems.append("LICENSE is not the full text of the Apache License, Version 2.0")
    shown = problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else [])
    report.check("spdx", shown, f"{count} source files carry '{IDENTIFIER}'; LICENSE is Apache-2.0")


def check_contact(report, repo):
    problems = []
    with open(os.path.join(repo, "cmake", "DtrainPackaging.cmake")) as f:
        cmake = re.search(r'set\(DTRAIN_PACKAGE_MAINTAINER "([^"]+)"', f.read())
    with open(os.path.join(repo, "slurm", "packaging", "dtrain.spec")) as f:
        spec = f.read()
    with open(os.path.join(repo, "SECURITY.md")) as f:
        security = f.read()
    if not cmake:
        return report.check("contact", ["cmake/DtrainPackaging.cmake sets no DTRAIN_PACKAGE_MAINTAINER"], "")
    maintainer = cmake.group(1)
    address = re.search(r"<([^>]+)>", maintainer)
    if not address or "localhost" in maintainer or "@" not in address.group(1):
        problems.append(f"the packages' maintainer {maintainer!r} is no project address")
    else:
        if address.group(1) not in security.split("## Reporting", 1)[-1]:
            problems.append(f"SECURITY.md's reporting section does not give {address.group(1)}")
        entries = re.findall(r"^\* .*? - \S+$", spec, re.MULTILINE)
        if not entries or any(maintainer not in e for e in entries):
            problems.append(f"slurm/packaging/dtrain.spec's %changelog entries are not by {maintainer}: {entries}")
    if not re.search(r"^License:\s+Apache-2\.0$", spec, re.MULTILINE):
        problems.append("slurm/packaging/dtrain.spec's License is not Apache-2.0")
    report.check("contact", problems, f"packages and SECURITY.md name {maintainer}; the spec's License is Apache-2.0")


# --- text about the project only --------------------------------------------------------------

def check_text(report, repo):
    me = os.path.relpath(os.path.abspath(__file__), repo)
    docs = {os.path.relpath(p, repo) for p in doc_files(repo)}
    problems, count = [], 0
    for path in sorted(set(tracked_files(repo)) | docs):
        if path == me or re.search(r"(^|/)corpus/", path):
            continue
        full = os.path.join(repo, path)
        if not os.path.isfile(full):
            continue
        text = read_text(full)
        if text is None:
            continue
        count += 1
        rules = DOC_ONLY_FORBIDDEN if path in docs else []
        for pattern, what in rules:
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f"{path}:{line}: {what}: {text.splitlines()[line - 1].strip()[:120]}")
    report.check("text", problems, f"{count} tracked text files read, no document names a path outside the repository")


# --- add_spdx.sh on a scratch repository ------------------------------------------------------

def check_spdx_script(report, repo):
    script = os.path.join(repo, "tests", "deploy", "add_spdx.sh")
    scratch = tempfile.mkdtemp(prefix="spdx-", dir=os.environ.get("DTRAIN_TEST_WORKDIR"))
    files = {
        "a.sh": ("#!/usr/bin/env bash\necho hi\n", 0o755),
        "b.cpp": ("#include <cstdio>\nint main() {}\n", 0o644),
        "c.py": ("#!/usr/bin/python3\n# -*- coding: utf-8 -*-\n\"\"\"Doc.\"\"\"\n", 0o755),
        "d/CMakeLists.txt": ("project(x)\n", 0o644),
        "d/e.cmake": ("set(x 1)\n", 0o644),
        "f.cu": ("__global__ void k() {}\n", 0o644),
        "g.hpp": ("// SPDX-License-Identifier: Apache-2.0\n#pragma once\n", 0o644),
        "job.sbatch": ("#!/bin/bash\n#SBATCH --nodes=1\nsrun true\n", 0o644),
        "fixtures/t.xml": ("<topology/>\n", 0o644),
        "fixtures/corpus/seed.py": ("not python\n", 0o644),
        "notes.md": ("# x\n", 0o644),
        "no_newline.sh": ("#!/bin/sh", 0o755),
    }
    expected = {
        "a.sh": "#!/usr/bin/env bash\n# SPDX-License-Identifier: Apache-2.0\necho hi\n",
        "b.cpp": "// SPDX-License-Identifier: Apache-2.0\n#include <cstdio>\nint main() {}\n",
        "c.py": "#!/usr/bin/python3\n# -*- coding: utf-8 -*-\n# SPDX-License-Identifier: Apache-2.0\n\"\"\"Doc.\"\"\"\n",
        "d/CMakeLists.txt": "# SPDX-License-Identifier: Apache-2.0\nproject(x)\n",
        "d/e.cmake": "# SPDX-License-Identifier: Apache-2.0\nset(x 1)\n",
        "f.cu": "// SPDX-License-Identifier: Apache-2.0\n__global__ void k() {}\n",
        "g.hpp": files["g.hpp"][0],
        "job.sbatch": "#!/bin/bash\n# SPDX-License-Identifier: Apache-2.0\n#SBATCH --nodes=1\nsrun true\n",
        "fixtures/t.xml": files["fixtures/t.xml"][0],
        "fixtures/corpus/seed.py": files["fixtures/corpus/seed.py"][0],
        "notes.md": files["notes.md"][0],
        "no_newline.sh": "#!/bin/sh\n# SPDX-License-Identifier: Apache-2.0\n",
    }
    problems = []
    try:
        for name, (content, mode) in files.items():
            path = os.path.join(scratch, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(content)
            os.chmod(path, mode)
        subprocess.run(["git", "init", "-q", scratch], check=True)
        subprocess.run(["git", "-C", scratch, "add", "-A"], check=True)
        before = subprocess.run([script, "--check", scratch], capture_output=True, text=True)
        if before.returncode != 1:
            problems.append(f"--check on files without the line exited {before.returncode}, not 1")
        first = subprocess.run([script, scratch], capture_output=True, text=True)
        if first.returncode != 0:
            problems.append(f"add_spdx.sh exited {first.returncode}: {first.stderr}")
        for name, want in expected.items():
            with open(os.path.join(scratch, name)) as f:
                got = f.read()
            if got != want:
                problems.append(f"{name} became {got!r}, expected {want!r}")
            if os.stat(os.path.join(scratch, name)).st_mode & 0o777 != files[name][1]:
                problems.append(f"{name} lost its mode {oct(files[name][1])}")
        snapshot = {n: open(os.path.join(scratch, n)).read() for n in files}
        second = subprocess.run([script, scratch], capture_output=True, text=True)
        again = {n: open(os.path.join(scratch, n)).read() for n in files}
        if second.returncode != 0 or again != snapshot:
            problems.append(f"a second run changed files or failed ({second.returncode}): {second.stdout}")
        after = subprocess.run([script, "--check", scratch], capture_output=True, text=True)
        if after.returncode != 0:
            problems.append(f"--check after the run exited {after.returncode}: {after.stdout}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report.check("spdx-script", problems,
                 "add_spdx.sh added the line in each syntax (after shebangs and a coding line), kept modes, "
                 "left data files and corpora alone, and a second run changed nothing")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["consistency", "spdx-script"])
    parser.add_argument("--repo", required=True, help="the repository's root")
    parser.add_argument("--build", help="a configured and built tree (consistency)")
    args = parser.parse_args()
    repo = os.path.abspath(args.repo)
    report = Report()
    if args.mode == "consistency":
        if not args.build:
            parser.error("consistency needs --build")
        work = tempfile.mkdtemp(prefix="docs-", dir=os.environ.get("DTRAIN_TEST_WORKDIR"))
        try:
            check_tools(report, repo, os.path.abspath(args.build), work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        check_plugstack(report, repo)
        check_paths(report, repo)
        check_spdx(report, repo)
        check_contact(report, repo)
        check_text(report, repo)
    else:
        check_spdx_script(report, repo)
    if report.failures:
        print(f"dtrain: check failed: {', '.join(report.failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
