#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Creates (or reuses) the virtual environment holding PyPI's torch 2.x, pytorch-lightning,
# accelerate and JAX (CPU) that tests/clients runs against the plugin's exported environment:
# per-node torchrun, Lightning and Accelerate.
#
# usage: setup_pypi_torch_venv.sh VENV_DIR
#
# With its CUDA libraries the venv is about 6 GB, so it lives outside the build tree and the clone
# (tests/clients/CMakeLists.txt: DTRAIN_PYPI_TORCH_VENV, by default named after the hash of
# requirements-pypi-torch.txt) and survives a new build directory. The venv is built by Debian's
# /usr/bin/python3. Wheels come from PyPI only. A stamp file keyed by the hash of the requirements
# (and of this script) makes a rerun a no-op.
#
# Exit status: 0 the venv is current, 77 PyPI is unreachable and the venv is not current (the
# tests that need it skip), 1 any other failure, 2 bad usage.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
readonly requirements="${script_dir}/requirements-pypi-torch.txt"
readonly python=/usr/bin/python3
readonly pypi=https://pypi.org/simple
readonly attempts=3
readonly skipped=77

log() { printf 'setup_pypi_torch_venv: %s\n' "$*"; }
fail() {
  printf 'dtrain: setup_pypi_torch_venv: %s\n' "$*" >&2
  exit 1
}

usage="usage: $(basename "$0") VENV_DIR: creates or updates VENV_DIR with the pinned wheels of
$requirements (PyPI only; about 6 GB installed).
Exit status 77 (skipped) when PyPI is unreachable and VENV_DIR is not current."
if [[ $# -eq 1 && ("$1" == -h || "$1" == --help) ]]; then
  echo "$usage"
  exit 0
fi
if [[ $# -ne 1 || "$1" == -* ]]; then
  printf 'dtrain: setup_pypi_torch_venv: expected one argument, VENV_DIR\n%s\n' "$usage" >&2
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

# Honours the proxy variables, as pip does.
pypi_reachable() {
  "$python" - "$pypi/pip/" <<'EOF' 2>/dev/null
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=30) as reply:
    sys.exit(0 if reply.status == 200 else 1)
EOF
}
skip_unreachable() {
  printf 'dtrain: skipped: PyPI (%s) is unreachable from this machine, so the venv %s with %s ' \
    "$pypi" "$venv" "$(basename "$requirements")"
  printf 'cannot be made; the tests that need it (client_torchrun_*, client_lightning_*, '
  printf 'client_accelerate_*) skip\n'
  exit "$skipped"
}
pypi_reachable || skip_unreachable

mkdir -p "$(dirname "$venv")" || fail "cannot create $(dirname "$venv"); set DTRAIN_PYPI_TORCH_VENV"
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

started=$SECONDS
for attempt in $(seq 1 "$attempts"); do
  log "installing $(grep -c '==' "$requirements") pinned packages of $requirements" \
    "($(grep -E '^(torch|pytorch-lightning|accelerate|jax|jaxlib)==' "$requirements" | xargs))" \
    "from $pypi (attempt $attempt/$attempts)"
  if pip_install -r "$requirements"; then
    echo "$wanted_hash" >"$stamp"
    log "installed in $((SECONDS - started)) s:"
    "${venv}/bin/python" -m pip list --disable-pip-version-check 2>/dev/null |
      grep -i -E '^(torch|pytorch-lightning|accelerate|jax|jaxlib|numpy) ' | sed 's/^/  /'
    log "venv size: $(du -sh "$venv" | cut -f1)"
    exit 0
  fi
  pypi_reachable || skip_unreachable
  if [[ $attempt -lt $attempts ]]; then
    log "pip failed; retrying in $((attempt * 10)) s"
    sleep $((attempt * 10))
  fi
done
fail "pip could not install $requirements into $venv after $attempts attempts;" \
  "check access to $pypi"
