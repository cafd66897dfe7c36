# SPDX-License-Identifier: Apache-2.0
# Sourced by build_runtimes.sh and build_image.sh: messages, and the Debian packages they need.
# shellcheck shell=bash

die() {
  echo "dtrain: $*" >&2
  exit 1
}

note() {
  echo "dtrain: $*" >&2
}

# ensure_debian_packages USE_APT PACKAGE...: installs the missing ones with apt-get (as root,
# updating the package lists once if the first try fails); with USE_APT=0 names them and fails.
ensure_debian_packages() {
  local use_apt=$1 package
  shift
  local missing=()
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed' || missing+=("$package")
  done
  ((${#missing[@]})) || return 0
  ((use_apt)) || die "missing Debian packages: ${missing[*]}; install them or drop --no-apt"
  ((EUID == 0)) || die "missing Debian packages: ${missing[*]}; install them as root (apt-get install ${missing[*]})"
  note "installing Debian packages: ${missing[*]}"
  if ! apt_get_install "${missing[@]}"; then
    note "apt-get install failed; updating the package lists and trying again"
    apt-get update -q -o DPkg::Lock::Timeout=600 >&2 || die "apt-get update failed"
    apt_get_install "${missing[@]}" || die "cannot install the Debian packages ${missing[*]}"
  fi
}

apt_get_install() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -o DPkg::Lock::Timeout=600 "$@" >&2
}
