#!/usr/bin/env bash
# Every command of README.md's tour, run as printed, in order, in a scratch folder that looks like
# the repository's root (build/ is this suite's build, examples/ and include/ the sources'), so the
# files a line makes (libmine.so, in.safetensors, trainer.jsonl, train.json, ...) are the ones the
# later lines read. A line must exit 0, or 1 where its comment says "exit 1" (a verdict that fails,
# as the tour means it to). Lines that cannot run here are skipped with the reason: "on a GPU" where
# no GPU is, and a Python line whose interpreter lacks torch. Nothing is read from a list kept here:
# edit the README and this test follows it.
. "$(dirname "$0")/lib_cli.sh"
SRC=${PARITY_SRC:?}
B=${PARITY_BUILD:?}
mkdir "$tmp/root"
ln -s "$B" "$tmp/root/build"
ln -s "$SRC/examples" "$tmp/root/examples"
ln -s "$SRC/include" "$tmp/root/include"
# The tour: the lines starting with "$ " of the first console block after "## A short tour".
awk '/^## A short tour/ {t = 1} t && /^```console/ {c = 1; next} c && /^```/ {exit} c && /^\$ / {print substr($0, 3)}' \
  "$SRC/README.md" >"$tmp/tour.txt"
n=$(wc -l <"$tmp/tour.txt")
[ "$n" -ge 10 ] && ok || bad "README.md's tour has $n lines: the block was not found"
gpu=0
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU && gpu=1
skipped=0
i=0
while IFS= read -r line; do
  i=$((i + 1))
  if [ $gpu = 0 ] && [[ "$line" == *"on a GPU"* ]]; then
    echo "skip (line $i, no GPU here): $line"; skipped=$((skipped + 1)); continue
  fi
  first=${line%% *}
  if [[ "$first" == *python* ]] && ! "$first" -c 'import torch' 2>/dev/null; then
    echo "skip (line $i, $first cannot import torch; Debian: apt-get install python3-torch): $line"
    skipped=$((skipped + 1)); continue
  fi
  want=0
  [[ "$line" == *"exit 1"* ]] && want=1
  t0=$(date +%s)
  (cd "$tmp/root" && timeout 900 bash -c "$line" </dev/null) >"$tmp/out.$i" 2>&1
  rc=$?
  echo "line $i: exit $rc in $(($(date +%s) - t0)) s: $line"
  if [ $rc = $want ]; then ok; else bad "line $i: exit $rc, want $want: $line"; tail -20 "$tmp/out.$i"; fi
done <"$tmp/tour.txt"
# What the lines made is what the later ones read: a few spot checks that they made it.
for f in libmine.so r.json in.safetensors out.safetensors trainer.jsonl server2.jsonl drift.html train.json serve.json; do
  [ -s "$tmp/root/$f" ] && ok || bad "the tour did not make $f"
done
echo "$pass passed, $fail failed ($skipped tour line(s) skipped, reasons above)"
[ $fail = 0 ]
