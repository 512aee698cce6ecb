# Sourced by the tests/cli_*.sh scripts (not a test itself): the parity binary ($PARITY, set by
# CTest), a scratch folder removed on exit, and the pass/fail counters with ok / bad.
set -u
P=${PARITY:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
