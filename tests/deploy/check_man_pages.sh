#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Renders man pages as man(1) shows them on an 80-column terminal and fails on any groff
# warning, an empty page or a line wider than 80 columns: check_man_pages.sh PAGE...
# PAGE may be gzip-compressed, as installed.
set -euo pipefail

if ! command -v man >/dev/null; then
  echo "dtrain: 'man' not found; install the Debian package man-db" >&2
  exit 1
fi
if (($# == 0)); then
  echo "dtrain: usage: $(basename "$0") PAGE..." >&2
  exit 2
fi
export MANWIDTH=80 LC_ALL=C.UTF-8
warnings_file=$(mktemp)
trap 'rm -f "$warnings_file"' EXIT
failed=0
for page in "$@"; do
  problems=()
  if ! text=$(man --warnings -l "$page" 2>"$warnings_file"); then
    problems+=("man -l failed: $(cat "$warnings_file")")
  elif [[ -s "$warnings_file" ]]; then
    problems+=("groff warnings: $(cat "$warnings_file")")
  fi
  if ! grep -q '^NAME' <<<"$text" || (($(wc -l <<<"$text") < 10)); then
    problems+=("renders without a NAME section, or almost empty")
  fi
  while IFS= read -r line; do
    if ((${#line} > 80)); then
      problems+=("a rendered line is ${#line} columns wide (limit 80): $line")
    fi
  done <<<"$text"
  if ((${#problems[@]})); then
    for problem in "${problems[@]}"; do
      echo "dtrain: $page: $problem" >&2
    done
    failed=1
  else
    echo "dtrain: ok: $page renders cleanly ($(wc -l <<<"$text") lines)"
  fi
done
exit "$failed"
