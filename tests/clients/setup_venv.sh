#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Creates (or reuses) the virtual environment holding the real PaddlePaddle and TensorFlow
# clients that tests/clients runs against the plugin's exported environment.
#
# usage: setup_venv.sh VENV_DIR
#
# The venv is built by Debian's /usr/bin/python3 so that it matches the interpreter the
# torch client uses. Wheels come from PyPI only. A stamp file keyed by the hash of
# requirements.txt (and of this script) makes a rerun a no-op; pip's own cache
# (PIP_CACHE_DIR, default ~/.cache/pip) makes a rebuild after deleting the venv quick.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
readonly requirements="${script_dir}/requirements.txt"
readonly python=/usr/bin/python3
readonly pypi=https://pypi.org/simple
readonly attempts=3

log() { printf 'setup_venv: %s\n' "$*"; }
fail() {
  printf 'dtrain: setup_venv: %s\n' "$*" >&2
  exit 1
}

usage="usage: $(basename "$0") VENV_DIR: creates or updates VENV_DIR with the pinned wheels of
$requirements (PyPI only)"
if [[ $# -eq 1 && ("$1" == -h || "$1" == --help) ]]; then
  echo "$usage"
  exit 0
fi
if [[ $# -ne 1 || "$1" == -* ]]; then
  printf 'dtrain: setup_venv: expected one argument, VENV_DIR\n%s\n' "$usage" >&2
  exit 2
fi
readonly venv="$1"
readonly stamp="${venv}/.dtrain-requirements.sha256"

[[ -x "$python" ]] ||
  fail "$python not found; install Debian's python3 (apt-get install -y python3)"
"$python" -c 'import ensurepip, venv' 2>/dev/null ||
  fail "$python cannot create virtual environments; install: apt-get install -y python3-venv"

wanted_hash="$(cat "$requirements" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$wanted_hash" && -x "${venv}/bin/python" ]]; then
  log "up to date: $venv (requirements hash ${wanted_hash:0:12})"
  exit 0
fi

if [[ ! -x "${venv}/bin/python" ]]; then
  log "creating venv $venv with $python ($("$python" --version 2>&1))"
  "$python" -m venv "$venv"
else
  log "reusing venv $venv; requirements changed, reinstalling"
fi
rm -f "$stamp"

# PyPI and nothing else: drop any index, extra index or find-links configured for this user.
pip_install() {
  env -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_FIND_LINKS -u PIP_NO_INDEX \
    "${venv}/bin/python" -m pip install --index-url "$pypi" --retries 5 --timeout 120 \
    --disable-pip-version-check --progress-bar off "$@"
}

for attempt in $(seq 1 "$attempts"); do
  log "installing $(grep -c '==' "$requirements") pinned packages of $requirements" \
    "($(grep -E '^(paddlepaddle|tensorflow-cpu)==' "$requirements" | xargs)) from $pypi" \
    "(attempt $attempt/$attempts)"
  if pip_install -r "$requirements"; then
    echo "$wanted_hash" >"$stamp"
    log "installed:"
    "${venv}/bin/python" -m pip list --disable-pip-version-check 2>/dev/null |
      grep -i -E '^(paddlepaddle|tensorflow[-_]cpu|numpy|protobuf) ' | sed 's/^/  /'
    log "venv size: $(du -sh "$venv" | cut -f1)"
    exit 0
  fi
  if [[ $attempt -lt $attempts ]]; then
    log "pip failed; retrying in $((attempt * 10)) s"
    sleep $((attempt * 10))
  fi
done
fail "pip could not install $requirements into $venv after $attempts attempts;" \
  "check access to $pypi"
