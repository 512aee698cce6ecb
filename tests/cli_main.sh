#!/usr/bin/env bash
# The `parity` dispatcher: help on stdout with exit 0, usage errors on stderr with exit 2 and a
# hint of what to type instead, --version, `parity help COMMAND` for every command.
. "$(dirname "$0")/lib_cli.sh"
t() { # want-rc stream(out|err) pattern cmd...
  local want=$1 stream=$2 pat=$3; shift 3
  "$@" >/tmp/parity_main_out.$$ 2>/tmp/parity_main_err.$$; local rc=$?
  local f=/tmp/parity_main_$stream.$$
  if [ $rc = "$want" ] && grep -q -- "$pat" "$f"; then ok; else bad "$* -> exit $rc (want $want), $stream lacks '$pat'"; fi
}
t 0 out "usage: parity COMMAND" "$P" --help
t 0 out "commands:" "$P" -h
t 2 err "usage: parity COMMAND" "$P"
t 2 err "try: parity --help" "$P" frobnicate
t 0 out "^parity [0-9]" "$P" --version
t 2 err "no command" "$P" help frobnicate
for c in $("$P" --help | awk '/^commands:/{on=1; next} on && /^  [a-z]/{print $1}'); do
  t 0 out "usage: parity $c" "$P" help "$c"
  t 0 out "usage: parity $c" "$P" "$c" --help
done
rm -f /tmp/parity_main_out.$$ /tmp/parity_main_err.$$
echo "$pass passed, $fail failed"
[ $fail = 0 ]
