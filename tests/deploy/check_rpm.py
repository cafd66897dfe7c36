#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Builds the RPM with cpack in a build tree and checks it with rpm -qp, without installing it.

Usage:
  check_rpm.py BUILD_DIR SPEC --version V

R is the Slurm release of the headers the build used (SLURM_INCLUDE_DIR/slurm/slurm_version.h)
and DIR the build's DTRAIN_RPM_PLUGIN_DIR (default /usr/lib64/slurm), both from its CMakeCache.txt.

Checks, against the Debian package cpack makes from the same build tree:
  - the RPM holds the same files with the same modes and bytes as the DEB, except that the
    plugin is in DIR (RHEL's Slurm PluginDir) instead of Debian's and the drop-in names it there;
  - the drop-in is %config(noreplace), loads nothing as shipped and names DIR/spank_dtrain.so;
  - the RPM requires exactly `slurm = R` (and at most the soname of the build's libslurm, for
    the tools that link it), its plugin links no libslurm, and it owns none of Slurm's or the
    system's directories;
  - it is not relocatable, and has no scriptlets or triggers: installing it edits no Slurm
    configuration and restarts no daemon;
  - its License is Apache-2.0, it holds the repository's LICENSE, and a man page for every page
    in slurm/man/.
And SPEC (slurm/packaging/dtrain.spec), which cannot be built here (its build dependencies are
RHEL packages): its version is V, its License Apache-2.0, it requires slurm = R and builds against slurm-devel = R, it
refuses to parse without a slurm-devel, its %files cover exactly the files the RPM holds, and
`rpmbuild -ts` finds it inside a source tarball and writes a source RPM.
Needs Debian's rpm package (rpmbuild, rpmspec, rpm2archive) and dpkg-deb.
"""
import fnmatch
import glob
import hashlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
from checklib import CheckFailed, Parser, expect  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "dtrain"
DROP_IN = "/etc/slurm/plugstack.conf.d/dtrain.conf"
TOOLS = ("dtrain-plan", "dtrain-check", "dtrain-bench", "dtrain-trainer")
MAN_PAGES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(HERE, "..", "..", "slurm", "man", "*.[18]")))
LICENSE = "Apache-2.0"  # SPDX identifier of LICENSE




def run(cmd, check=True, timeout=300, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise CheckFailed(f"{shlex.join(cmd)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def cpack(build_dir, generator, out_dir, pattern):
    started = time.monotonic()
    proc = run(["cpack", "-G", generator, "--config", os.path.join(build_dir, "CPackConfig.cmake"), "-B", out_dir],
               check=False)
    expect(proc.returncode == 0, f"cpack -G {generator} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    made = glob.glob(os.path.join(out_dir, pattern))
    expect(len(made) == 1, f"cpack -G {generator} made {made}, expected one {pattern}")
    return made[0], time.monotonic() - started


def rpm_entries(rpm):
    """{path: (permissions, rpm file flags)} of every file and directory in the package."""
    out = run(["rpm", "-qp", "--qf", "[%{FILENAMES}\t%{FILEMODES:perms}\t%{FILEFLAGS:fflags}\n]", rpm]).stdout
    entries = {}
    for line in out.splitlines():
        path, perms, flags = line.split("\t")
        entries[path] = (perms, flags)
    return entries


def deb_entries(deb):
    """{path: permissions} of every file and directory in the Debian package."""
    entries = {}
    for line in run(["dpkg-deb", "-c", deb]).stdout.splitlines():
        fields = line.split(None, 5)
        path = "/" + fields[5].split(" -> ")[0].removeprefix("./").rstrip("/")
        if path != "/":
            entries[path] = fields[0]
    return entries


def archive_contents(cmd, stdin=None):
    """{path: sha256 of a file, or '-> target' of a link} of the tar stream cmd writes."""
    data = subprocess.run(cmd, stdin=stdin, capture_output=True, timeout=300)
    expect(data.returncode == 0, f"{shlex.join(cmd)} exited {data.returncode}: {data.stderr.decode(errors='replace')}")
    contents = {}
    with tarfile.open(fileobj=io.BytesIO(data.stdout)) as archive:
        for member in archive.getmembers():
            path = "/" + member.name.removeprefix("./")
            if member.isfile():
                contents[path] = hashlib.sha256(archive.extractfile(member).read()).hexdigest()
            elif member.issym():
                contents[path] = "-> " + member.linkname
    return contents


def rpm_member(rpm, path):
    """The text of one file of the package (rpm2archive writes the payload as a tar stream)."""
    with open(rpm, "rb") as f:
        data = subprocess.run(["rpm2archive", "-"], stdin=f, capture_output=True, timeout=300, check=True)
    with tarfile.open(fileobj=io.BytesIO(data.stdout)) as archive:
        member = archive.extractfile("." + path)
        expect(member is not None, f"{path} is not a regular file in {rpm}")
        return member.read().decode()


def check_drop_in(text, plugin):
    """Loads nothing as shipped; its one commented plugin line names the packaged plugin."""
    lines = text.splitlines()
    active = [l for l in lines if l.strip() and not l.lstrip().startswith("#")]
    expect(not active, f"{DROP_IN} in the RPM is active as shipped: {active}")
    candidates = [l.lstrip("#").strip() for l in lines if re.match(r"#\s*(optional|required)\s+/", l)]
    expect(len(candidates) == 1, f"{DROP_IN} in the RPM should hold one commented plugin line, has {candidates}")
    expect(candidates[0].split()[1] == plugin, f"the RPM's drop-in names {candidates[0].split()[1]}, not {plugin}")


def check_package(build_dir, args, out_dir):
    rpm, rpm_seconds = cpack(build_dir, "RPM", out_dir, f"{PACKAGE}-*.rpm")
    deb, _ = cpack(build_dir, "DEB", out_dir, f"{PACKAGE}_*.deb")

    nvr = run(["rpm", "-qp", "--qf", "%{NAME} %{VERSION} %{RELEASE}", rpm]).stdout.split()
    expect(nvr[:2] == [PACKAGE, args.version], f"the RPM is {nvr}, expected {PACKAGE} {args.version}")
    expect(f"slurm{args.slurm_release}" in nvr[2], f"the RPM's release {nvr[2]} does not name Slurm {args.slurm_release}")

    entries = rpm_entries(rpm)
    rpm_files = {p: perms for p, (perms, _) in entries.items() if not perms.startswith("d")}
    deb_files = {p: perms for p, perms in deb_entries(deb).items() if not perms.startswith("d")}
    plugin = f"{args.rpm_plugin_dir}/spank_dtrain.so"
    deb_plugins = [p for p in deb_files if p.endswith("/spank_dtrain.so")]
    expect(len(deb_plugins) == 1, f"the DEB holds plugins {deb_plugins}")
    expected = dict(deb_files)
    expected[plugin] = expected.pop(deb_plugins[0])
    expect(rpm_files == expected,
           "the RPM's files differ from the DEB's (plugin moved to " + plugin + "):\n"
           f"  only in the RPM: {sorted(set(rpm_files) - set(expected))}\n"
           f"  only in the DEB: {sorted(set(expected) - set(rpm_files))}\n"
           f"  other modes: {sorted(p for p in set(rpm_files) & set(expected) if rpm_files[p] != expected[p])}")
    # The same bytes too: only the drop-in differs, in the plugin path it names.
    deb_content = archive_contents(["dpkg-deb", "--fsys-tarfile", deb])
    with open(rpm, "rb") as f:
        rpm_content = archive_contents(["rpm2archive", "-"], stdin=f)
    deb_content[plugin] = deb_content.pop(deb_plugins[0])
    differ = sorted(p for p in expected if p != DROP_IN and rpm_content.get(p) != deb_content.get(p))
    expect(not differ, f"these files of the RPM differ from the DEB's: {differ}")
    for tool in TOOLS:
        expect(f"/usr/bin/{tool}" in rpm_files, f"/usr/bin/{tool} is not in the RPM")
    pages = sorted(os.path.basename(p)[:-3] for p in rpm_files if re.search(r"^/usr/share/man/man[18]/[^/]+\.[18]\.gz$", p))
    expect(pages == MAN_PAGES, f"the RPM holds man pages {pages}, slurm/man/ has {MAN_PAGES}")
    license_file = "/usr/share/doc/dtrain/LICENSE"
    expect(license_file in rpm_files, f"{license_file} is not in the RPM")
    with open(os.path.join(HERE, "..", "..", "LICENSE")) as f:
        expect(rpm_member(rpm, license_file) == f.read(), f"{license_file} in the RPM is not the repository's LICENSE")
    license_field = run(["rpm", "-qp", "--qf", "%{LICENSE}", rpm]).stdout
    expect(license_field == LICENSE, f"the RPM's License is {license_field!r}, not {LICENSE}")

    config = {p for p, (_, flags) in entries.items() if "c" in flags}
    expect(config == {DROP_IN}, f"the RPM's configuration files are {sorted(config)}, expected only {DROP_IN}")
    expect("n" in entries[DROP_IN][1], f"{DROP_IN} is %config without noreplace (flags {entries[DROP_IN][1]!r})")
    check_drop_in(rpm_member(rpm, DROP_IN), plugin)

    # Directories: its own, and the drop-in directory, which Slurm's RPMs do not create.
    dirs = sorted(p for p, (perms, _) in entries.items() if perms.startswith("d"))
    foreign = [d for d in dirs if "dtrain" not in d and d != os.path.dirname(DROP_IN)]
    expect(not foreign, f"the RPM owns directories of Slurm or the system: {foreign}")

    # Exactly the release built against; besides, the tools that link libslurm (dtrain-plan)
    # need its soname, which rpm finds itself. The plugin links none: srun and slurmstepd
    # provide its Slurm symbols.
    requires = run(["rpm", "-qp", "--requires", rpm]).stdout.splitlines()
    slurm = {r for r in requires if re.match(r"slurm\b", r) or "libslurm" in r}
    pin = f"slurm = {args.slurm_release}"
    allowed = {pin, f"{args.libslurm_soname}()(64bit)"}
    expect(pin in slurm and slurm <= allowed,
           f"the RPM's Slurm requirements are {sorted(slurm)}; expected {pin}, and at most {args.libslurm_soname}")
    plugin_requires = [line for line in run(["rpm", "-qp", "--filerequire", rpm]).stdout.splitlines()
                       if line.startswith(plugin + "\t")]
    expect(len(plugin_requires) == 1 and "libslurm" not in plugin_requires[0],
           f"the plugin's requirements: {plugin_requires}; it must not link libslurm")
    prefixes = run(["rpm", "-qp", "--qf", "%{PREFIXES}", rpm]).stdout.strip()
    expect(prefixes == "(none)", f"the RPM is relocatable (prefixes {prefixes}); the drop-in names a fixed plugin path")
    scripts = run(["rpm", "-qp", "--scripts", "--triggers", rpm]).stdout.strip()
    expect(scripts == "", f"the RPM runs scriptlets or triggers:\n{scripts}")
    return rpm, rpm_seconds, rpm_files, plugin, len(dirs)


def spec_files_patterns(spec, slurm_release):
    """The %files entries of the spec as rpmspec expands them, without their directives."""
    text = run(["rpmspec", "-P", "--define", f"slurm_version {slurm_release}", spec]).stdout
    section = re.search(r"^%files\s*\n(.*?)(?=^%\w+\s*$|\Z)", text, re.MULTILINE | re.DOTALL)
    expect(section, f"{spec} has no %files section")
    patterns = []
    for line in section.group(1).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        patterns.append(re.sub(r"^(%\w+(\([^)]*\))?\s+)+", "", line))
    return patterns


def check_spec(spec, args, rpm_files, work):
    query = ["rpmspec", "-q", "--define", f"slurm_version {args.slurm_release}"]
    version = run(query + ["--qf", "%{VERSION}\n", spec]).stdout.split()[0]
    expect(version == args.version, f"{spec} has Version {version}; the project (CMakeLists.txt) is {args.version}")
    license_field = run(query + ["--qf", "%{LICENSE}\n", spec]).stdout.split("\n")[0]
    expect(license_field == LICENSE, f"{spec} has License {license_field!r}, not {LICENSE}")
    requires = run(query + ["--requires", spec]).stdout.splitlines()
    expect(f"slurm = {args.slurm_release}" in requires, f"{spec} requires {requires}, not slurm = {args.slurm_release}")
    build_requires = run(query + ["--buildrequires", spec]).stdout.splitlines()
    expect(f"slurm-devel = {args.slurm_release}" in build_requires,
           f"{spec} builds against {build_requires}, not slurm-devel = {args.slurm_release}")
    if run(["rpm", "-q", "slurm-devel"], check=False).returncode != 0:
        unset = run(["rpmspec", "-P", spec], check=False)
        expect(unset.returncode != 0 and "slurm-devel" in unset.stderr,
               f"{spec} parses without slurm-devel and without slurm_version:\n{unset.stderr}")

    # Built on RHEL, the files land where rpm's macros say; the RPM made here has this build's
    # library directory. Every file must match one %files entry and every entry some file, or
    # rpmbuild stops ("unpackaged file" / "file not found").
    libdir = run(["rpm", "--eval", "%{_libdir}"]).stdout.strip()
    files = {re.sub(rf"^{re.escape(args.packaged_libdir)}/", f"{libdir}/", f) for f in rpm_files}
    patterns = spec_files_patterns(spec, args.slurm_release)

    def matches(path, pattern):
        return fnmatch.fnmatchcase(path, pattern) or path.startswith(pattern.rstrip("/") + "/")

    unmatched = sorted(f for f in files if not any(matches(f, p) for p in patterns))
    expect(not unmatched, f"{spec}'s %files misses files the build installs: {unmatched}")
    unused = [p for p in patterns if not any(matches(f, p) for f in files)]
    expect(not unused, f"{spec}'s %files names what the build does not install: {unused}")

    # rpmbuild -ta reads the spec from inside the tarball; -ts stops after the source RPM.
    top = f"{PACKAGE}-{args.version}"
    tarball = os.path.join(work, f"{top}.tar.gz")
    relative = os.path.relpath(spec, os.path.dirname(os.path.dirname(HERE)))
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(spec, arcname=f"{top}/{relative}")
    topdir = os.path.join(work, "rpmbuild")
    run(["rpmbuild", "-ts", "--define", f"_topdir {topdir}", "--define", f"slurm_version {args.slurm_release}", tarball])
    srpms = glob.glob(os.path.join(topdir, "SRPMS", "*.src.rpm"))
    expect(len(srpms) == 1, f"rpmbuild -ts made {srpms}")
    srpm_requires = run(["rpm", "-qp", "--requires", srpms[0]]).stdout.splitlines()
    expect(f"slurm-devel = {args.slurm_release}" in srpm_requires,
           f"the source RPM builds against {srpm_requires}, not slurm-devel = {args.slurm_release}")
    return os.path.basename(srpms[0]), len(patterns)


def cache_value(build_dir, name):
    path = os.path.join(build_dir, "CMakeCache.txt")
    with open(path) as f:
        for line in f:
            match = re.match(rf"{re.escape(name)}:[A-Z]+=(.*)$", line.rstrip("\n"))
            if match:
                return match.group(1)
    raise CheckFailed(f"{path} has no {name}")


def slurm_release(include_dir):
    """The release of slurm_version.h, written the way Slurm names releases (22.05.8)."""
    path = os.path.join(include_dir, "slurm", "slurm_version.h")
    with open(path) as f:
        match = re.search(r"#define\s+SLURM_VERSION_NUMBER\s+0x([0-9a-fA-F]{2})([0-9a-fA-F]{2})([0-9a-fA-F]{2})", f.read())
    expect(match, f"{path} defines no SLURM_VERSION_NUMBER")
    major, minor, micro = (int(g, 16) for g in match.groups())
    return f"{major}.{minor:02d}.{micro}"


def main():
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir", help="configured and built tree (CPackConfig.cmake, CMakeCache.txt)")
    parser.add_argument("spec", help="slurm/packaging/dtrain.spec")
    parser.add_argument("--version", required=True, help="the project's version")
    args = parser.parse_args()
    args.slurm_release = slurm_release(cache_value(args.build_dir, "SLURM_INCLUDE_DIR"))
    args.rpm_plugin_dir = cache_value(args.build_dir, "DTRAIN_RPM_PLUGIN_DIR")
    installed_libdir = cache_value(args.build_dir, "CMAKE_INSTALL_LIBDIR")
    args.packaged_libdir = installed_libdir if installed_libdir.startswith("/") else f"/usr/{installed_libdir}"
    library = cache_value(args.build_dir, "SLURM_LIBRARY")
    soname = re.search(r"\(SONAME\)\s+Library soname: \[(libslurm\.so\.\d+)\]", run(["readelf", "-d", library]).stdout)
    expect(soname, f"{library} has no libslurm.so.N soname")
    args.libslurm_soname = soname.group(1)
    missing = [t for t in ("rpmbuild", "rpmspec", "rpm2archive", "dpkg-deb", "cpack") if not shutil.which(t)]
    expect(not missing, f"{', '.join(missing)} not found; install Debian's rpm package (apt-get install rpm)")

    work = tempfile.mkdtemp(prefix="rpm-", dir=os.environ.get("DTRAIN_TEST_WORKDIR"))
    rpm, seconds, files, plugin, dirs = check_package(args.build_dir, args, work)
    srpm, entries = check_spec(os.path.abspath(args.spec), args, files, work)
    print(f"dtrain: ok: {os.path.basename(rpm)} (cpack {seconds:.1f}s): {len(files)} files and {dirs} own "
          f"directories, the DEB's (same modes and bytes) with the plugin in {os.path.dirname(plugin)}; requires slurm = {args.slurm_release} "
          f"(and {args.libslurm_soname}); "
          f"{DROP_IN} is %config(noreplace) and names {plugin}; no scriptlets. {os.path.basename(args.spec)}: "
          f"version {args.version}, requires slurm = {args.slurm_release}, {entries} %files entries cover the same "
          f"files; rpmbuild -ts made {srpm}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except CheckFailed as e:
        print(f"dtrain: check failed: {e}", file=sys.stderr)
        sys.exit(1)
