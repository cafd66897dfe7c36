# Shell helpers shared by the cluster check scripts (sourced, not run).

fail() {
  echo "dtrain: $*" >&2
  exit 1
}

expect_equal() {
  local what="$1" actual="$2" expected="$3"
  [[ "$actual" == "$expected" ]] || fail "$what is '$actual', expected '$expected'"
  echo "ok: $what = $actual"
}

# expect_line WHAT PATTERN TEXT: some line of TEXT matches the extended regex PATTERN.
expect_line() {
  local what="$1" pattern="$2" text="$3"
  grep -Eq -- "$pattern" <<<"$text" || fail "$what: no line matches /$pattern/ in:"$'\n'"$text"
  echo "ok: $what: $(grep -Em1 -- "$pattern" <<<"$text" | cut -c1-160)"
}
