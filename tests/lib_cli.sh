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
# preload_sanitizers BRIDGE: a sanitizer build's Python bridge needs the sanitizer runtimes first
# in the process (as python/tests/run_pytest.sh does), else Python aborts at `import parity`;
# nothing for a plain build.
preload_sanitizers() {
  if ldd "$1" 2>/dev/null | grep -q libasan; then
    local rt
    rt=$(ldd "$1" | awk '/libasan|libubsan/ && /=>/ {print $3}' | sort | paste -sd: -)
    export LD_PRELOAD="$rt${LD_PRELOAD:+:$LD_PRELOAD}"
    export ASAN_OPTIONS="detect_leaks=0:handle_segv=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  fi
}
