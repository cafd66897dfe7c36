#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds Slurm 25.11 from the third-party tarball into a cache outside the clone, once per machine.
#
# The cluster tests run dtrain's plugin against a current Slurm as well as Debian's 22.05. Building
# Slurm takes long, so the installation is kept in a prefix outside any build tree (CI machines keep
# it between runs) and rebuilt only when the tarball or the configure options change: the prefix
# holds a stamp with both. The installation appears atomically (built and installed into a staging
# directory next to the prefix, then renamed), so a killed build never leaves a half prefix that a
# later run would take for a finished one.
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo_root=$(cd "$script_dir/../.." && pwd -P)
readonly script_dir repo_root
readonly slurm_version=25.11.7

usage() {
  cat <<EOF
Usage: $(basename "$0") [--prefix DIR] [--tarball FILE] [--check] [-j N]

Builds Slurm $slurm_version from its source tarball and installs it into DIR, unless DIR already
holds a build of the same tarball with the same configure options (a stamp file says so). Prints
the prefix on its last line of standard output.

Options:
  --prefix DIR    installation prefix (default: \$DTRAIN_SLURM25_PREFIX, else
                  /var/cache/dtrain/slurm-$slurm_version); the build happens next to it, in
                  DIR.build, and is removed afterwards
  --tarball FILE  Slurm source (default: \$DTRAIN_SLURM25_TARBALL, else
                  <repo>/../shared/third_party/slurm-$slurm_version.tar.gz)
  --check         build nothing: exit 0 if DIR holds a current build, 1 if not
  -j N            parallel make jobs (default: the number of CPUs)
  -h, --help      print this help

Needs the Debian packages build-essential pkg-config libmunge-dev libpmix-dev libhwloc-dev
libjson-c-dev libyaml-dev libhttp-parser-dev.
EOF
}

die() {
  echo "dtrain: $*" >&2
  exit 1
}

note() {
  echo "dtrain: $*" >&2
}

prefix="${DTRAIN_SLURM25_PREFIX:-/var/cache/dtrain/slurm-$slurm_version}"
tarball="${DTRAIN_SLURM25_TARBALL:-$repo_root/../shared/third_party/slurm-$slurm_version.tar.gz}"
check_only=0
jobs=$(nproc)

while (($#)); do
  case "$1" in
    --prefix | --tarball | -j)
      (($# >= 2)) || die "option $1 needs a value; see --help"
      case "$1" in
        --prefix) prefix="$2" ;;
        --tarball) tarball="$2" ;;
        -j) jobs="$2" ;;
      esac
      shift
      ;;
    -j[0-9]*) jobs="${1#-j}" ;;
    --check) check_only=1 ;;
    -h | --help)
      usage
      exit 0
      ;;
    *) die "unknown argument '$1'; see --help" ;;
  esac
  shift
done

[[ "$jobs" =~ ^[1-9][0-9]{0,2}$ ]] || die "-j '$jobs' is not a number of jobs in 1-999"
[[ -f "$tarball" ]] || die "Slurm source '$tarball' not found; pass --tarball FILE or set DTRAIN_SLURM25_TARBALL"
prefix=$(realpath -m -- "$prefix")
[[ "$prefix" != / ]] || die "--prefix / is not allowed; pick a directory of its own"

# PMIx: Debian installs it under a directory of its own. Slurm's mpi/pmix plugin is what Open MPI
# tasks of the cluster tests bootstrap through, so a Slurm without it is of no use here.
pmix_dir=/usr/lib/x86_64-linux-gnu/pmix2
[[ -f "$pmix_dir/include/pmix.h" ]] || die "PMIx headers not found in $pmix_dir; install the Debian package libpmix-dev"

# Only what the local cluster runs is built; everything else is switched off so that a missing
# optional library can never change what gets built between machines. pkg-config: dtrain's CMake
# finds this Slurm through its slurm.pc. --enable-multiple-slurmd: the local cluster runs four
# slurmd on one machine with one munged, which sees every node's copy of a step's credential; a
# Slurm built without it takes the second copy for a replay attack and fails every multi-node
# launch ("_verify_signature: failed decode", srun: "Header lengths are longer than data
# received"). http-parser: 25.11's daemons load it at start and log errors without it.
configure_options=(
  "--prefix=$prefix"
  --sysconfdir="$prefix/etc"
  --disable-debug
  --disable-static
  --disable-dependency-tracking
  --disable-silent-rules
  --enable-pkgconfig
  --disable-slurmrestd
  --disable-sview
  --disable-x11
  --disable-pam
  --enable-multiple-slurmd
  --with-munge=/usr
  --with-hwloc=/usr
  "--with-pmix=$pmix_dir"
  --without-mysql_config
  --without-hdf5
  --without-ucx
  --without-nvml
  --without-rsmi
  --without-oneapi
  --without-freeipmi
  --without-rdkafka
  --without-s2n
  --without-jwt
  --with-http-parser=/usr
  --without-lua
  --without-ofed
  --without-hpe-slingshot
  --without-lz4
)

tarball_sha=$(sha256sum <"$tarball" | cut -d' ' -f1)
stamp_text="slurm $slurm_version
tarball-sha256 $tarball_sha
configure ${configure_options[*]}"
stamp_file="$prefix/.dtrain-slurm-build"

is_current() {
  [[ -f "$stamp_file" && -x "$prefix/sbin/slurmstepd" ]] && [[ "$(cat "$stamp_file")" == "$stamp_text" ]]
}

if ((check_only)); then
  if is_current; then
    echo "$prefix"
    exit 0
  fi
  note "no current Slurm $slurm_version build in $prefix"
  exit 1
fi

mkdir -p "$(dirname "$prefix")" || die "cannot create $(dirname "$prefix"); pass another --prefix or set DTRAIN_SLURM25_PREFIX"
# Two test runs on one machine must not build into the same staging directory at once; the
# second waits and then finds the first one's build.
exec 9>"$prefix.lock"
flock 9 || die "cannot lock $prefix.lock"

if is_current; then
  note "Slurm $slurm_version already built in $prefix"
  echo "$prefix"
  exit 0
fi

for tool in cc make tar pkg-config; do
  command -v "$tool" >/dev/null || die "'$tool' not found; install the Debian packages build-essential pkg-config"
done
for header in munge.h hwloc.h json-c/json.h yaml.h http_parser.h; do
  [[ -f "/usr/include/$header" ]] || die "/usr/include/$header not found; install the Debian packages libmunge-dev libhwloc-dev libjson-c-dev libyaml-dev libhttp-parser-dev"
done

build_dir="$prefix.build"
stage_dir="$prefix.stage"
rm -rf "$build_dir" "$stage_dir"
mkdir -p "$build_dir" "$stage_dir"
note "building Slurm $slurm_version into $prefix (log: $build_dir/build.log)"
started=$SECONDS
tar -xzf "$tarball" -C "$build_dir" --strip-components=1 || die "cannot unpack $tarball"
# The tarball is a `git archive` of a release tag, which carries the generated configure script;
# no autoreconf is needed.
[[ -x "$build_dir/configure" ]] || die "$tarball has no configure script; it is not a Slurm release tree"
(
  cd "$build_dir"
  ./configure "${configure_options[@]}"
  make -j"$jobs"
  make install DESTDIR="$stage_dir"
) >"$build_dir/build.log" 2>&1 || {
  tail -n 40 "$build_dir/build.log" >&2
  die "building Slurm $slurm_version failed; see the log tail above and $build_dir/build.log"
}
grep -q '^#define HAVE_PMIX' "$build_dir/config.h" ||
  die "Slurm's configure did not find PMIx in $pmix_dir; see $build_dir/config.log"
compgen -G "$stage_dir$prefix/lib/slurm/mpi_pmix_v*.so" >/dev/null ||
  die "Slurm built without its mpi/pmix plugin; see $build_dir/build.log"
printf '%s\n' "$stamp_text" >"$stage_dir$prefix/.dtrain-slurm-build"

# The prefix is compiled into the binaries (slurmd execs PREFIX/sbin/slurmstepd, plugins load from
# PREFIX/lib/slurm), so the staged tree is moved into place rather than installed elsewhere.
rm -rf "$prefix.old"
[[ ! -e "$prefix" ]] || mv "$prefix" "$prefix.old"
mv "$stage_dir$prefix" "$prefix"
rm -rf "$prefix.old" "$stage_dir" "$build_dir"
note "Slurm $slurm_version built and installed into $prefix in $((SECONDS - started))s"
echo "$prefix"
