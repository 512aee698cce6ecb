#!/usr/bin/env bash
# The repository alone is enough (data/README.md): nothing outside docs that tell the history
# names the steering repository's data folder, every file that the code, the tests or the benches
# look up in the data folders ships in data/, and SHA256SUMS lists each shipped file.
set -u
S=${PARITY_SRC:?PARITY_SRC must point at the source tree}
cd "$S" || exit 1
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Built from two halves so that this file does not match itself.
  pat="shared""/data"
  hits=$(git grep -n "$pat" -- ':!docs' ':!data/README.md' || true)
  [ -z "$hits" ] && ok || bad "files outside docs name the old data folder:"$'\n'"$hits"
else
  echo "note: not a git checkout; the grep for the old data folder is skipped"
fi

# Every name passed to parity_data_path in src/ programs/ tests/ is a shipped file.
names=$(grep -rhoE 'parity_data_path\("[^"]+"' src programs tests 2>/dev/null | sed -E 's/.*\("//; s/"$//' | sort -u)
[ -n "$names" ] && ok || bad "no parity_data_path call found (the grep is broken)"
for f in $names; do
  [ -f "data/$f" ] && ok || bad "data/$f is looked up but does not ship"
done
# SHA256SUMS covers every shipped data file but the README and itself.
for f in data/*; do
  b=$(basename "$f")
  case "$b" in README.md|SHA256SUMS) continue ;; esac
  grep -q "  $b\$" data/SHA256SUMS && ok || bad "data/$b is not in data/SHA256SUMS"
done

echo "cli_standalone: $pass passed, $fail failed"
[ "$fail" = 0 ]
