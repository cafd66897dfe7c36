#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Checks the hardening of a built spank_dtrain.so with readelf and nm (binutils):
# exported symbols, RELRO + BIND_NOW, position independence, non-executable stack, stack
# protector and FORTIFY. Prints one line per check; exits 1 when any check fails, 2 on usage.
set -u

usage() {
  cat <<'USAGE'
Usage: tests/plugin/check_hardening.sh PATH/TO/spank_dtrain.so

Checks, one line each:
  exports       only slurm_spank_*, plugin_name, plugin_type and plugin_version are exported
  relro         GNU_RELRO segment and BIND_NOW (full RELRO: -Wl,-z,relro,-z,now)
  pic           ELF type DYN and no text relocations (-fPIC)
  noexecstack   GNU_STACK segment without the execute flag (-Wl,-z,noexecstack)
  stack-protector  __stack_chk_fail is referenced (-fstack-protector-strong)
  fortify       some __*_chk function is referenced (-D_FORTIFY_SOURCE=2 with optimisation)
A sanitizer build (DTRAIN_SANITIZE=ON) has no FORTIFY by design; check a release build.
USAGE
}

case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  "") usage >&2; exit 2 ;;
esac
if [ "$#" -ne 1 ]; then
  usage >&2
  exit 2
fi
plugin=$1
if [ ! -r "$plugin" ]; then
  echo "dtrain: cannot read '$plugin'; build it first (ninja spank_dtrain) or fix the path" >&2
  exit 2
fi
for tool in readelf nm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "dtrain: $tool not found; install binutils" >&2
    exit 2
  fi
done
export LC_ALL=C

if ! header=$(readelf -hW "$plugin" 2>&1); then
  echo "dtrain: '$plugin' is not an ELF file: $header" >&2
  exit 2
fi
segments=$(readelf -lW "$plugin")
dynamic=$(readelf -dW "$plugin")
defined=$(nm -D --defined-only "$plugin" | awk '{ print $NF }' | sed 's/@.*//')
undefined=$(nm -D --undefined-only "$plugin" | awk '{ print $NF }' | sed 's/@.*//')

failures=0
pass() { echo "ok   $1: $2"; }
fail() {
  echo "dtrain: FAIL $1: $2${3:+ $3}"
  failures=$((failures + 1))
}

# exports: Slurm needs exactly these; anything else leaks dtrain's (and its static
# libraries') symbols into slurmstepd's namespace.
unexpected=$(printf '%s\n' "$defined" |
  grep -Ev '^(slurm_spank_[A-Za-z0-9_]+|plugin_name|plugin_type|plugin_version)$' | grep -v '^$')
missing=
for required in slurm_spank_init plugin_name plugin_type plugin_version; do
  printf '%s\n' "$defined" | grep -qx "$required" || missing="$missing $required"
done
if [ -n "$unexpected" ]; then
  fail exports "unexpected exported symbols: $(printf '%s' "$unexpected" | tr '\n' ' ')" \
    "(fix: spank/exports.map and -Wl,--exclude-libs,ALL)"
elif [ -n "$missing" ]; then
  fail exports "missing required symbols:$missing"
else
  pass exports "$(printf '%s' "$defined" | tr '\n' ' ' | sed 's/ $//')"
fi

# relro: the GOT is read-only after relocation only when every symbol is bound at load time.
has_relro=no
printf '%s\n' "$segments" | grep -q 'GNU_RELRO' && has_relro=yes
has_now=no
printf '%s\n' "$dynamic" | grep -Eq '\(BIND_NOW\)|\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*[[:space:]]NOW' &&
  has_now=yes
if [ "$has_relro" = yes ] && [ "$has_now" = yes ]; then
  pass relro "GNU_RELRO and BIND_NOW (full RELRO)"
else
  fail relro "GNU_RELRO=$has_relro BIND_NOW=$has_now (fix: link with -Wl,-z,relro -Wl,-z,now)"
fi

# pic
elf_type=$(printf '%s\n' "$header" | awk -F: '/^ *Type:/ { sub(/^ +/, "", $2); print $2 }')
textrel=no
printf '%s\n' "$dynamic" | grep -Eq '\(TEXTREL\)|\(FLAGS\).*TEXTREL' && textrel=yes
case "$elf_type" in
  DYN*)
    if [ "$textrel" = no ]; then
      pass pic "ELF type $elf_type, no TEXTREL"
    else
      fail pic "text relocations present (fix: compile every object with -fPIC)"
    fi
    ;;
  *) fail pic "ELF type is '$elf_type', not DYN" ;;
esac

# noexecstack
stack=$(printf '%s\n' "$segments" | awk '$1 == "GNU_STACK" { print $(NF - 1) }')
case "$stack" in
  "") fail noexecstack "no GNU_STACK segment: the loader would assume an executable stack" ;;
  *E*) fail noexecstack "GNU_STACK flags '$stack' (fix: link with -Wl,-z,noexecstack)" ;;
  *) pass noexecstack "GNU_STACK flags $stack" ;;
esac

# stack-protector
if printf '%s\n' "$undefined" | grep -qx '__stack_chk_fail'; then
  pass stack-protector "__stack_chk_fail referenced"
else
  fail stack-protector "__stack_chk_fail not referenced (fix: compile with -fstack-protector-strong)"
fi

# fortify
fortified=$(printf '%s\n' "$undefined" | grep -E '^__[A-Za-z0-9_]+_chk$' | grep -vx '__stack_chk_fail' |
  tr '\n' ' ' | sed 's/ $//')
if [ -n "$fortified" ]; then
  pass fortify "$fortified"
else
  fail fortify "no __*_chk function referenced (fix: -D_FORTIFY_SOURCE=2 with -O1 or higher)"
fi

if [ "$failures" -ne 0 ]; then
  echo "dtrain: $plugin fails $failures hardening check(s)"
  exit 1
fi
echo "ok   $plugin passes every hardening check"
