#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the container runtimes that sites run next to dtrain (NVIDIA enroot and its SPANK plugin
# pyxis) from the third-party tarballs into a cache outside the clone, once per machine.
#
# The container tests start Slurm steps in enroot containers through pyxis, as sites do. enroot is
# built with FORCE_GLIBC=1 (its musl, makeself and linux-headers submodules are not in the tarball;
# Debian's makeself and linux-libc-dev stand in for them) and pyxis against the Slurm headers in
# /usr/include/slurm (Debian 12's 22.05). The installation is rebuilt only when a tarball, the Slurm
# version or the build options change: the prefix holds a stamp with all of them, written last.
# Everything is built and installed into a staging directory inside the prefix and then renamed
# into place, so a killed build never leaves a half installation that a later run would take for
# a finished one.
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo_root=$(cd "$script_dir/../.." && pwd -P)
readonly script_dir repo_root
readonly enroot_version=4.1.2 pyxis_version=0.24.0
# Bump when the way this script builds or configures the runtimes changes.
readonly recipe_version=3

usage() {
  cat <<EOF
Usage: $(basename "$0") [--prefix DIR] [--third-party DIR] [--check] [--no-apt] [-j N]

Builds enroot $enroot_version and pyxis $pyxis_version and installs them into DIR/enroot (run
DIR/enroot/bin/enroot; its libexec and configuration live under DIR/enroot too) and
DIR/pyxis/spank_pyxis.so, unless DIR already holds a build of the same sources with the same
options (the stamp file DIR/.dtrain-runtimes-build says so). Prints the two paths on the last two
lines of standard output.

Options:
  --prefix DIR       cache directory (default: \$DTRAIN_CONTAINERS_PREFIX, else
                     /var/cache/dtrain/containers); the build happens inside it and is removed
                     afterwards
  --third-party DIR  where the tarballs are (default: \$DTRAIN_THIRD_PARTY, else
                     <repo>/../shared/third_party)
  --check            build nothing: exit 0 if DIR holds a current build, 1 if not
  --no-apt           do not install missing Debian packages; fail and name them instead
  -j N               parallel make jobs (default: the number of CPUs)
  -h, --help         print this help

Installs with apt-get, when missing and run as root, the Debian packages
  build: build-essential makeself linux-libc-dev libbsd-dev libslurm-dev
  enroot at run time: bash curl gawk jq parallel passwd squashfs-tools zstd pigz bsdextrautils
    util-linux libcap2-bin squashfuse fuse-overlayfs
  Charliecloud: charliecloud-runtime (ch-run; ch-convert is in charliecloud-builders, which
    depends on docker.io and buildah and is not installed)

pyxis starts "enroot" through PATH, and enroot starts its helpers (enroot-mount,
enroot-switchroot, enroot-nsenter) through PATH too: put DIR/enroot/bin on the PATH of slurmd.
The installed configuration keeps every enroot directory in /tmp/enroot-<uid>/ (see
DIR/enroot/etc/enroot/enroot.conf.d/10-dtrain-node-local.conf), which is private to each emulated
node of the local cluster; ENROOT_* variables in the environment override it.
EOF
}

# shellcheck source=tests/containers/build_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/build_common.sh"

prefix="${DTRAIN_CONTAINERS_PREFIX:-/var/cache/dtrain/containers}"
third_party="${DTRAIN_THIRD_PARTY:-$repo_root/../shared/third_party}"
check_only=0
use_apt=1
jobs=$(nproc)

while (($#)); do
  case "$1" in
    --prefix | --third-party | -j)
      (($# >= 2)) || die "option $1 needs a value; see --help"
      case "$1" in
        --prefix) prefix="$2" ;;
        --third-party) third_party="$2" ;;
        -j) jobs="$2" ;;
      esac
      shift
      ;;
    -j[0-9]*) jobs="${1#-j}" ;;
    --check) check_only=1 ;;
    --no-apt) use_apt=0 ;;
    -h | --help)
      usage
      exit 0
      ;;
    *) die "unknown argument '$1'; see --help" ;;
  esac
  shift
done

[[ "$jobs" =~ ^[1-9][0-9]{0,2}$ ]] || die "-j '$jobs' is not a number of jobs in 1-999"
enroot_tarball="$third_party/enroot-$enroot_version.tar.gz"
pyxis_tarball="$third_party/pyxis-$pyxis_version.tar.gz"
for tarball in "$enroot_tarball" "$pyxis_tarball"; do
  [[ -f "$tarball" ]] || die "'$tarball' not found; pass --third-party DIR or set DTRAIN_THIRD_PARTY"
done
prefix=$(realpath -m -- "$prefix")
[[ "$prefix" != / ]] || die "--prefix / is not allowed; pick a directory of its own"

enroot_dir="$prefix/enroot"
pyxis_so="$prefix/pyxis/spank_pyxis.so"
stamp_file="$prefix/.dtrain-runtimes-build"
slurm_version_h=/usr/include/slurm/slurm_version.h

# What the stamp must match. The Slurm version is read from the header pyxis compiles against, so
# that a Slurm upgrade rebuilds pyxis.
stamp_text() {
  local slurm_version=none
  if [[ -f "$slurm_version_h" ]]; then
    slurm_version=$(sed -n 's/^#define SLURM_VERSION_NUMBER[[:space:]]*\(0x[0-9a-fA-F]*\).*/\1/p' "$slurm_version_h")
  fi
  printf '%s\n' \
    "recipe $recipe_version" \
    "prefix $prefix" \
    "enroot $enroot_version sha256 $(sha256sum <"$enroot_tarball" | cut -d' ' -f1) make FORCE_GLIBC=1 libbsd" \
    "pyxis $pyxis_version sha256 $(sha256sum <"$pyxis_tarball" | cut -d' ' -f1)" \
    "slurm-headers $slurm_version"
}

is_current() {
  [[ -f "$stamp_file" && -x "$enroot_dir/bin/enroot" && -f "$pyxis_so" ]] &&
    [[ "$(cat "$stamp_file")" == "$(stamp_text)" ]]
}

print_paths() {
  echo "$enroot_dir/bin/enroot"
  echo "$pyxis_so"
}

if ((check_only)); then
  if is_current; then
    print_paths
    exit 0
  fi
  note "no current enroot/pyxis build in $prefix"
  exit 1
fi

# Fast path: no lock, no package check.
if is_current; then
  note "enroot $enroot_version and pyxis $pyxis_version already built in $prefix"
  print_paths
  exit 0
fi

mkdir -p "$prefix" || die "cannot create $prefix; pass another --prefix or set DTRAIN_CONTAINERS_PREFIX"
# Two test runs on one machine must not build into the same staging directory at once; the
# second waits and then finds the first one's build.
exec 9>"$prefix/.runtimes.lock"
flock 9 || die "cannot lock $prefix/.runtimes.lock"

if is_current; then
  note "enroot $enroot_version and pyxis $pyxis_version already built in $prefix"
  print_paths
  exit 0
fi

# Debian packages: for the build, for enroot at run time (its Debian package's Depends and
# Recommends, plus squashfuse and fuse-overlayfs for starting a .sqsh without unpacking it), and
# Charliecloud's ch-run.
packages=(
  build-essential makeself linux-libc-dev libbsd-dev libslurm-dev
  bash curl gawk jq parallel passwd squashfs-tools zstd pigz bsdextrautils util-linux libcap2-bin
  squashfuse fuse-overlayfs
  charliecloud-runtime
)
ensure_debian_packages "$use_apt" "${packages[@]}"
[[ -f /usr/include/slurm/spank.h && -f "$slurm_version_h" ]] ||
  die "Slurm headers not found in /usr/include/slurm; install the Debian package libslurm-dev"
[[ -f /usr/include/bsd/string.h ]] || die "/usr/include/bsd/string.h not found; install the Debian package libbsd-dev"
[[ -f /usr/share/makeself/makeself-header.sh ]] ||
  die "/usr/share/makeself/makeself-header.sh not found; install the Debian package makeself"

build_dir="$prefix/.runtimes.build"
stage_dir="$prefix/.runtimes.stage"
rm -rf "$build_dir" "$stage_dir"
mkdir -p "$build_dir/enroot" "$build_dir/pyxis" "$stage_dir"
log="$build_dir/build.log"
note "building enroot $enroot_version and pyxis $pyxis_version into $prefix (log: $log)"
started=$SECONDS

# enroot. The stage path is compiled into the enroot script and enroot.conf by `make install`
# (its Makefile substitutes $(DESTDIR)$(sysconfdir)); it is removed afterwards, as enroot's own
# `make dist` does. Its deps/Makefile expects git submodules: Debian's makeself (the same 2.4.5,
# with its header at an absolute path) becomes deps/makeself/makeself.sh, and the linux-headers
# step is marked done with an empty include directory, so that linux-libc-dev's headers are used.
# GIT_CEILING_DIRECTORIES keeps its `git submodule update` from finding a repository above.
# strlcpy and strlcat, which enroot-mount and enroot-switchroot call, come with musl but only with
# glibc 2.38 and later (Debian 12 has 2.36): Debian's libbsd provides them. The variables go
# through the environment because enroot's Makefile appends the environment's CPPFLAGS and
# LDFLAGS to its own; -D_GNU_SOURCE= (defined empty, as the sources define it) because the forced
# header is read before the sources' own #define. --no-as-needed: LDFLAGS come before the objects.
enroot_src="$build_dir/enroot"
tar -xzf "$enroot_tarball" -C "$enroot_src" --strip-components=1 || die "cannot unpack $enroot_tarball"
[[ -f "$enroot_src/enroot.in" && -f "$enroot_src/deps/Makefile" ]] || die "$enroot_tarball is not an enroot source tree"
mkdir -p "$enroot_src/deps/makeself" "$enroot_src/deps/dist/linux/include"
install -m 755 "$(command -v makeself)" "$enroot_src/deps/makeself/makeself.sh"
touch "$enroot_src/deps/linux-headers/.stamp"
enroot_make=(make -C "$enroot_src" FORCE_GLIBC=1 "prefix=$enroot_dir")
(
  export GIT_CEILING_DIRECTORIES="$build_dir"
  export CPPFLAGS="-D_GNU_SOURCE= -include bsd/string.h"
  export LDFLAGS="-Wl,--no-as-needed -l:libbsd.so.0 -Wl,--as-needed"
  "${enroot_make[@]}" -j"$jobs" all
  "${enroot_make[@]}" install "DESTDIR=$stage_dir"
) >"$log" 2>&1 || {
  tail -n 40 "$log" >&2
  die "building enroot $enroot_version failed; see the log tail above and $log"
}
staged_enroot="$stage_dir$enroot_dir"
sed -i "s;$stage_dir;;g" "$staged_enroot/bin/enroot" "$staged_enroot/etc/enroot/enroot.conf"
if grep -rlF "$stage_dir" "$staged_enroot" >&2; then
  die "the staging path $stage_dir is left in the files above"
fi
grep -qF "config::init \"$enroot_dir/etc/enroot/enroot.conf\"" "$staged_enroot/bin/enroot" ||
  die "the built enroot does not read $enroot_dir/etc/enroot/enroot.conf"
# Node-local defaults: the emulated nodes of the local cluster share /root and /run but each has a
# /tmp of its own, and pyxis names a step's container pyxis_<job>.<step> on every node, so the
# upstream defaults ($HOME/.local/share/enroot, /run/enroot) would make the nodes of one step race
# for one root filesystem. pyxis clears the environment of the enroot it starts (PATH passes, and
# the job's variables except ENROOT_{LIBRARY,SYSCONF,RUNTIME,CACHE,DATA,TEMP}_PATH and a few
# more), so slurmd's environment cannot set these; the configuration file can.
cat >"$staged_enroot/etc/enroot/enroot.conf.d/10-dtrain-node-local.conf" <<'EOF'
# dtrain tests: every enroot directory in the node's own /tmp (private to each emulated node).
# ENROOT_* variables in the environment of enroot override these.
ENROOT_RUNTIME_PATH /tmp/enroot-${UID}/runtime
ENROOT_CACHE_PATH   /tmp/enroot-${UID}/cache
ENROOT_DATA_PATH    /tmp/enroot-${UID}/data
ENROOT_CONFIG_PATH  /tmp/enroot-${UID}/config
ENROOT_TEMP_PATH    /tmp
EOF
# enroot's optional Slurm hook for PyTorch (share/enroot/hooks.d; pyxis's own tests assume it): for
# images that set PYTORCH_VERSION it adds MASTER_ADDR, MASTER_PORT, WORLD_SIZE and OMP_NUM_THREADS
# of its own, the values dtrain's must win over. Its PMIx hook (50-slurm-pmi.sh) stays off: it
# mounts SlurmdSpoolDir as `scontrol show config` prints it, and the local cluster's, shared by
# four slurmd, holds an unexpanded %n; the tests mount the spool directory themselves.
cp "$staged_enroot/share/enroot/hooks.d/50-slurm-pytorch.sh" "$staged_enroot/etc/enroot/hooks.d/" ||
  die "enroot $enroot_version has no hook 50-slurm-pytorch.sh"

# pyxis, against /usr/include/slurm (found on the default include path).
pyxis_src="$build_dir/pyxis"
tar -xzf "$pyxis_tarball" -C "$pyxis_src" --strip-components=1 || die "cannot unpack $pyxis_tarball"
[[ -f "$pyxis_src/pyxis_slurmstepd.c" ]] || die "$pyxis_tarball is not a pyxis source tree"
make -C "$pyxis_src" -j"$jobs" >>"$log" 2>&1 || {
  tail -n 40 "$log" >&2
  die "building pyxis $pyxis_version failed; see the log tail above and $log"
}
install -D -m 644 "$pyxis_src/spank_pyxis.so" "$stage_dir/pyxis/spank_pyxis.so"

# Into place: the stamp goes first and comes back last, so that a run killed in between rebuilds.
rm -f "$stamp_file"
rm -rf "$prefix/.enroot.old" "$prefix/.pyxis.old"
[[ ! -e "$enroot_dir" ]] || mv "$enroot_dir" "$prefix/.enroot.old"
[[ ! -e "$prefix/pyxis" ]] || mv "$prefix/pyxis" "$prefix/.pyxis.old"
mv "$staged_enroot" "$enroot_dir"
mv "$stage_dir/pyxis" "$prefix/pyxis"
# enroot creates its directories when it starts: point them into the build directory.
ENROOT_RUNTIME_PATH="$build_dir/run" ENROOT_CACHE_PATH="$build_dir/run" ENROOT_DATA_PATH="$build_dir/run" \
  ENROOT_CONFIG_PATH="$build_dir/run" "$enroot_dir/bin/enroot" version >/dev/null ||
  die "the installed $enroot_dir/bin/enroot does not run"
stamp_text >"$stamp_file.new"
mv "$stamp_file.new" "$stamp_file"
rm -rf "$prefix/.enroot.old" "$prefix/.pyxis.old" "$stage_dir" "$build_dir"
note "enroot $enroot_version and pyxis $pyxis_version built and installed into $prefix in $((SECONDS - started))s"
print_paths
