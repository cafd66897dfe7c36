#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the container image of the container tests, a Debian 12 (bookworm) root filesystem with
# python3 and Debian's PyTorch, into a cache outside the clone, once per machine.
#
# The machines reach Debian's mirror but no container registry, so the image is bootstrapped with
# mmdebstrap from the mirror the host's apt uses. It comes in two forms made from one tree: a
# directory (what Charliecloud's ch-run runs) and a squashfs file (what `enroot create` and pyxis'
# --container-image=/path take). The squashfs carries the files that `enroot import` writes into
# images it converts from Docker (/etc/rc, /etc/rc.local, /etc/environment, /etc/fstab), so that
# it behaves like an imported image, pyxis' /etc/rc.local hook included. The image is rebuilt only
# when the package list or the recipe changes: a stamp file holds both and is written last, after
# the new tree and file were renamed into place, so a killed build is never taken for a finished
# one.
set -euo pipefail

readonly image_name=debian12-torch suite=bookworm variant=apt
# What goes into the image (with their dependencies; python3-torch pulls python3-numpy).
# Open MPI's and the bootstrap's libraries let dtrain-bench and dtrain-check, built on the host
# (the same Debian release), run inside the container from a bind mount.
readonly packages=(python3 python3-torch python3-numpy libopenmpi3 libpmix2 libhwloc15 libxxhash0)
# Bump when the way the image is built changes.
readonly recipe_version=3
# enroot's own default is "-comp lzo -noD"; zstd keeps the file small, and the squashfuse and
# unsquashfs of Debian 12 read it. Level 3: on 2 CPUs 7 s for 404 MB, where level 15 takes 150 s
# for 350 MB and gzip 141 s for 392 MB.
readonly squash_options=(-comp zstd -Xcompression-level 3 -noappend -no-progress)

usage() {
  cat <<EOF
Usage: $(basename "$0") [--prefix DIR] [--check] [--no-apt] [-j N]

Builds a Debian 12 ($suite) root filesystem with ${packages[*]} and writes it as
  DIR/image/$image_name/       a directory image (ch-run DIR/image/$image_name -- CMD)
  DIR/image/$image_name.sqsh   a squashfs image of the same tree (enroot create, pyxis)
unless they are there already, built from the same package list (the stamp file
DIR/image/.dtrain-$image_name says so). Prints the two paths on the last two lines of standard
output.

Options:
  --prefix DIR  cache directory (default: \$DTRAIN_CONTAINERS_PREFIX, else
                /var/cache/dtrain/containers); the build happens inside it
  --check       build nothing: exit 0 if DIR holds a current image, 1 if not
  --no-apt      do not install missing Debian packages; fail and name them instead
  -j N          processors for mksquashfs (default: the number of CPUs)
  -h, --help    print this help

Needs root (mmdebstrap's root mode) and the Debian packages mmdebstrap and squashfs-tools, which
it installs with apt-get when missing. The packages come from the Debian mirrors that the host's
apt is configured with (those of origin Debian for $suite in \`apt-cache policy\`).
EOF
}

# shellcheck source=tests/containers/build_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/build_common.sh"

prefix="${DTRAIN_CONTAINERS_PREFIX:-/var/cache/dtrain/containers}"
check_only=0
use_apt=1
jobs=$(nproc)

while (($#)); do
  case "$1" in
    --prefix | -j)
      (($# >= 2)) || die "option $1 needs a value; see --help"
      case "$1" in
        --prefix) prefix="$2" ;;
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

[[ "$jobs" =~ ^[1-9][0-9]{0,2}$ ]] || die "-j '$jobs' is not a number of processors in 1-999"
prefix=$(realpath -m -- "$prefix")
[[ "$prefix" != / ]] || die "--prefix / is not allowed; pick a directory of its own"

image_dir="$prefix/image"
tree="$image_dir/$image_name"
sqsh="$image_dir/$image_name.sqsh"
stamp_file="$image_dir/.dtrain-$image_name"
stamp_text="recipe $recipe_version
image $image_name
suite $suite
variant $variant
packages ${packages[*]}
mksquashfs ${squash_options[*]}"

is_current() {
  [[ -f "$stamp_file" && -x "$tree/usr/bin/python3" && -f "$sqsh" ]] &&
    [[ "$(cat "$stamp_file")" == "$stamp_text" ]]
}

print_paths() {
  echo "$tree"
  echo "$sqsh"
}

if ((check_only)); then
  if is_current; then
    print_paths
    exit 0
  fi
  note "no current $image_name image in $image_dir"
  exit 1
fi

if is_current; then
  note "image $image_name already built in $image_dir"
  print_paths
  exit 0
fi

((EUID == 0)) || die "building the image needs root (mmdebstrap's root mode)"
mkdir -p "$image_dir" || die "cannot create $image_dir; pass another --prefix or set DTRAIN_CONTAINERS_PREFIX"
# Two test runs on one machine must not build into the same staging directory at once; the
# second waits and then finds the first one's image.
exec 9>"$image_dir/.$image_name.lock"
flock 9 || die "cannot lock $image_dir/.$image_name.lock"

if is_current; then
  note "image $image_name already built in $image_dir"
  print_paths
  exit 0
fi

ensure_debian_packages "$use_apt" mmdebstrap squashfs-tools

# The host's Debian mirrors for the suite, whatever the format of its sources (one-line .list or
# deb822 .sources): apt-cache policy lists each as "PRIO URI SUITE/COMPONENT ARCH Packages",
# followed by its release line. Only those of origin Debian are taken; one line per URI and suite.
mirrors=()
mapfile -t mirrors < <(
  apt-cache policy | awk -v suite="$suite" '
    $2 ~ /:\/\// && $4 != "" { uri = $2; split($3, sc, "/"); s = sc[1]; c = sc[2]; next_is_release = 1; next }
    next_is_release && $1 == "release" {
      next_is_release = 0
      if ($0 ~ /(^|[ ,])o=Debian(,|$)/ && (s == suite || index(s, suite "-") == 1)) {
        key = uri " " s
        if (!(key in comps)) order[n++] = key
        if (index(" " comps[key] " ", " " c " ") == 0) comps[key] = comps[key] (comps[key] == "" ? "" : " ") c
      }
      next
    }
    { next_is_release = 0 }
    END { for (i = 0; i < n; i++) print "deb " order[i] " " comps[order[i]] }'
)
((${#mirrors[@]})) || die "apt-cache policy lists no Debian mirror for $suite; configure one in /etc/apt/sources.list.d (and run apt-get update)"

stage_dir="$image_dir/.$image_name.stage"
# mmdebstrap's root mode mounts file systems (proc, sysfs, device nodes) inside the tree while it
# runs; a build killed then leaves them, and rm must not descend into them.
remove_stage() {
  local target
  findmnt -rn -o TARGET | { grep -F "$stage_dir/" || true; } | sort -r | while read -r target; do
    umount -l "$target" || die "cannot unmount $target, left mounted by an earlier build"
  done
  rm -rf --one-file-system "$stage_dir"
}
remove_stage
mkdir -p "$stage_dir"
log="$stage_dir/build.log"
note "building image $image_name into $image_dir from ${mirrors[*]} (log: $log)"
started=$SECONDS

include=$(
  IFS=,
  echo "${packages[*]}"
)
# Documentation, manual pages and translations are left out; apt's lists and caches are removed
# by mmdebstrap's own cleanup.
mmdebstrap --mode=root --variant="$variant" --include="$include" \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-include=/usr/share/locale/locale.alias' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  "$suite" "$stage_dir/$image_name" "${mirrors[@]}" >"$log" 2>&1 || {
  tail -n 40 "$log" >&2
  die "mmdebstrap failed; see the log tail above and $log"
}
staged_tree="$stage_dir/$image_name"
chroot "$staged_tree" python3 -c 'import torch, numpy' >>"$log" 2>&1 ||
  die "python3 in the new image cannot import torch and numpy; see $log"

# What `enroot import` writes into an image it converts from Docker (docker::configure in enroot's
# src/docker.sh), for an image whose configuration has PATH in Env and Cmd ["bash"]: /etc/rc runs
# the command given to `enroot start` (pyxis makes it exec the task through /etc/rc.local).
# /etc/hosts, /etc/hostname and /etc/resolv.conf are mount points for both runtimes, which bind
# the host's files there; mmdebstrap leaves copies of the build host's in the tree.
cat >"$staged_tree/etc/rc" <<'EOF'
mkdir -p "/" 2> /dev/null
cd "/" && unset OLDPWD || exit 1

if [ -s /etc/rc.local ]; then
    . /etc/rc.local
fi

if [ $# -gt 0 ]; then
    exec  "$@"
else
    exec 'bash'
fi
EOF
cat >"$staged_tree/etc/rc.local" <<'EOF'
# This file is sourced by /etc/rc when the container starts.
# It can be used to manipulate the entrypoint or the command of the container.
EOF
# PYTORCH_VERSION, as NGC's PyTorch images set it: pyxis and enroot's 50-slurm-pytorch.sh hook
# give such images PyTorch's variables of their own, which is what dtrain must not lose to.
torch_version=$(chroot "$staged_tree" python3 -c 'import torch; print(torch.__version__)') ||
  die "cannot read the image's PyTorch version"
printf '%s\n' 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  "PYTORCH_VERSION=$torch_version" >"$staged_tree/etc/environment"
: >"$staged_tree/etc/fstab"
rm -f "$staged_tree/etc/resolv.conf"
: >"$staged_tree/etc/resolv.conf"
echo localhost >"$staged_tree/etc/hostname"
[[ -e "$staged_tree/etc/hosts" ]] || echo '127.0.0.1 localhost' >"$staged_tree/etc/hosts"
chmod 755 "$staged_tree"

mksquashfs "$staged_tree" "$stage_dir/$image_name.sqsh" "${squash_options[@]}" -processors "$jobs" >>"$log" 2>&1 || {
  tail -n 20 "$log" >&2
  die "mksquashfs failed; see the log tail above and $log"
}
unsquashfs -s "$stage_dir/$image_name.sqsh" >/dev/null 2>&1 ||
  die "$stage_dir/$image_name.sqsh is not a squashfs file that unsquashfs reads"

# Into place: the stamp goes first and comes back last, so that a run killed in between rebuilds.
rm -f "$stamp_file"
rm -rf "$stage_dir/old"
mkdir "$stage_dir/old"
[[ ! -e "$tree" ]] || mv "$tree" "$stage_dir/old/"
[[ ! -e "$sqsh" ]] || mv "$sqsh" "$stage_dir/old/"
mv "$staged_tree" "$tree"
mv "$stage_dir/$image_name.sqsh" "$sqsh"
printf '%s\n' "$stamp_text" >"$stamp_file.new"
mv "$stamp_file.new" "$stamp_file"
remove_stage

note "image $image_name built into $image_dir in $((SECONDS - started))s: directory $(du -sh "$tree" | cut -f1), squashfs $(du -h "$sqsh" | cut -f1)"
print_paths
