#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Puts the licence identifier line "SPDX-License-Identifier: Apache-2.0" (https://spdx.org/licenses/)
# at the top of every source file git tracks in a repository, in the file's comment syntax.
#
#   tests/deploy/add_spdx.sh [--check] [REPO]      REPO: default, the repository of this script
#
# Source files: *.cpp *.hpp *.cu *.h ("// ..."), *.py *.sh *.cmake CMakeLists.txt and any other
# file whose first line is a shebang ("# ..."). The line goes first, after a shebang and a Python
# coding declaration where there are any. Files under a corpus/ folder (fuzzer inputs) and data
# files (XML, JSON, text fixtures) are left alone, and so is a file that already has an SPDX
# line among its first three lines, so running the script twice changes nothing. File modes are
# kept. --check changes nothing: it lists the source files without the line and exits 1 if any.
# tests/deploy/check_docs.py checks the same (ctest -R docs_consistency).
set -euo pipefail

readonly identifier="SPDX-License-Identifier: Apache-2.0"
check_only=0
repo=""
while (($#)); do
  case "$1" in
    --check) check_only=1 ;;
    -h | --help) awk 'NR > 1 && !/^#/ {exit} NR > 1 && !/^# SPDX-License-Identifier:/ {
                   sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) echo "dtrain: add_spdx.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) [[ -z $repo ]] || { echo "dtrain: add_spdx.sh: one repository only (see --help)" >&2; exit 2; }
       repo=$1 ;;
  esac
  shift
done
if [[ -z $repo ]]; then
  repo=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
fi
cd "$repo" || { echo "dtrain: add_spdx.sh: cannot enter '$repo'" >&2; exit 2; }
git rev-parse --git-dir >/dev/null 2>&1 ||
  { echo "dtrain: add_spdx.sh: '$repo' is not a git repository" >&2; exit 2; }

# The comment marker of a tracked file, or nothing for a file that is not source code.
comment_of() {
  local path=$1
  case "$path" in
    corpus/* | */corpus/*) return ;;
  esac
  case "${path##*/}" in
    *.cpp | *.hpp | *.cu | *.h) echo "//" ;;
    *.py | *.sh | *.cmake | CMakeLists.txt) echo "#" ;;
    *.xml | *.json | *.txt | *.md | *.svg) ;;
    *) if [[ $(head -c 2 -- "$path") == "#!" ]]; then echo "#"; fi ;;
  esac
  return 0
}

added=0 present=0 missing=0
while IFS= read -r -d '' path; do
  [[ -f $path && ! -L $path ]] || continue
  comment=$(comment_of "$path")
  [[ -n $comment ]] || continue
  if head -n 3 -- "$path" | grep -Eq '^[[:space:]]*(#|//|/\*)[[:space:]]*SPDX-License-Identifier:'; then
    present=$((present + 1))
    continue
  fi
  if ((check_only)); then
    echo "dtrain: add_spdx.sh: no SPDX line: $path"
    missing=$((missing + 1))
    continue
  fi
  # Lines that must stay first: a shebang, then (Python, PEP 263) a coding declaration.
  keep=0
  first=$(head -n 1 -- "$path")
  [[ $first == "#!"* ]] && keep=1
  if [[ $comment == "#" ]]; then
    declaration=$(sed -n "$((keep + 1))p" -- "$path")
    [[ $declaration =~ ^[[:space:]]*#.*coding[:=] ]] && keep=$((keep + 1))
  fi
  temp=$(mktemp)
  {
    # sed adds the newline a kept last line may lack.
    ((keep == 0)) || head -n "$keep" -- "$path" | sed -e '$a\'
    printf '%s %s\n' "$comment" "$identifier"
    tail -n "+$((keep + 1))" -- "$path"
  } >"$temp"
  # Written through the existing file, so its mode and owner stay.
  cat -- "$temp" >"$path"
  rm -f -- "$temp"
  echo "dtrain: add_spdx.sh: added: $path"
  added=$((added + 1))
done < <(git ls-files -z)

if ((check_only)); then
  echo "dtrain: add_spdx.sh: $present source files have the SPDX line, $missing do not"
  ((missing == 0))
else
  echo "dtrain: add_spdx.sh: added the SPDX line to $added source files; $present had it already"
fi
