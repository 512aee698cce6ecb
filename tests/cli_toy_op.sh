#!/usr/bin/env bash
# Adding an op is one folder and one line (issue #39; docs/architecture.md, "Adding an op"): a
# scratch copy of the library, the ops and the CLI gets the made-up op of tests/toy_op/ as the
# folder ops/toy/ and one PARITY_OP line in ops/ops.def, and nothing else (checked with diff);
# it builds with -Werror, and the CLI lists the op, prints its workloads' parameters, lists its
# catalog, judges its kernels as they deserve and prices it, beside the 13 shipped ops.
. "$(dirname "$0")/lib_cli.sh"
S=${PARITY_SRC:?}
command -v cmake >/dev/null || { echo "SKIP: cmake not found"; exit 77; }
T=$tmp/tree
mkdir -p "$T"
for p in CMakeLists.txt cmake include src ops programs; do cp -r "$S/$p" "$T/"; done
cp -r "$T" "$tmp/orig"
# the folder and the line
mkdir "$T/ops/toy"
cp "$S/tests/toy_op/toy_rowsum.c" "$T/ops/toy/"
sed -i 's/^#undef PARITY_OP$/PARITY_OP(toy, toy_rowsum)\n&/' "$T/ops/ops.def"
diff -r "$tmp/orig" "$T" >"$tmp/diff"
if [ "$(grep -c '^Only in' "$tmp/diff")" = 1 ] && grep -q "^Only in $T/ops: toy$" "$tmp/diff" &&
   [ "$(grep -c '^[<>]' "$tmp/diff")" = 1 ] && grep -q '^> PARITY_OP(toy, toy_rowsum)$' "$tmp/diff"; then ok
else bad "the change is not one folder and one line:"; cat "$tmp/diff"; fi
if ! cmake -S "$T" -B "$T/build" -DCMAKE_BUILD_TYPE=Release -DPARITY_WERROR=ON -DBUILD_TESTING=OFF \
     -DPARITY_CHECK_MPI=OFF >"$tmp/configure.log" 2>&1; then
  bad "configure failed"; tail -20 "$tmp/configure.log"; echo "cli_toy_op: $pass passed, $fail failed"; exit 1
fi
if ! cmake --build "$T/build" --target parity -j2 >"$tmp/build.log" 2>&1; then
  bad "build failed"; grep -E 'error|warning' "$tmp/build.log" | head -20; echo "cli_toy_op: $pass passed, $fail failed"; exit 1
fi
X="$T/build/parity"
n_ops=$("$P" ops | wc -l)
[ "$("$X" ops | wc -l)" = $((n_ops + 1)) ] && "$X" ops | grep -q '^toy_rowsum ' && ok || bad "parity ops does not list toy_rowsum beside the $n_ops shipped ops"
"$X" ops toy_rowsum --workloads >"$tmp/wl" 2>&1 && grep -q 'x=normal\*1' "$tmp/wl" && grep -q 'x=gradscale\*1' "$tmp/wl" &&
  ok || { bad "parity ops toy_rowsum --workloads"; cat "$tmp/wl"; }
"$X" kernels toy_rowsum >"$tmp/k" 2>&1 && [ "$(grep -c 'builtin:\|fp32\|bf16_acc\|drop_last' "$tmp/k")" -ge 3 ] &&
  ok || { bad "parity kernels toy_rowsum"; cat "$tmp/k"; }
"$X" check toy_rowsum --kernel builtin:all --quick --seed 1 -q --no-cache --json "$tmp/c.json" >"$tmp/c.txt" 2>&1
rc=$?
[ "$rc" = 1 ] && ok || { bad "check toy_rowsum exit $rc, want 1 (two unfaithful kernels)"; cat "$tmp/c.txt"; }
verdicts=$(python3 - "$tmp/c.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join("%s=%s" % (k["name"].split(":")[-1], k["verdict"]) for k in d["kernels"]))
PY
)
[ "$verdicts" = "fp32=faithful bf16_acc=unfaithful drop_last=unfaithful" ] && ok ||
  bad "toy_rowsum verdicts: $verdicts"
# the shipped ops are untouched: one of them still judges its catalog as before
"$X" check rmsnorm_fwd --kernel builtin:all --quick --seed 1 -q --no-cache --json "$tmp/r1.json" >/dev/null 2>&1
"$P" check rmsnorm_fwd --kernel builtin:all --quick --seed 1 -q --no-cache --json "$tmp/r2.json" >/dev/null 2>&1
cmp -s "$tmp/r1.json" "$tmp/r2.json" && ok || bad "rmsnorm_fwd's report differs with toy_rowsum added"
echo "cli_toy_op: $pass passed, $fail failed"
[ "$fail" = 0 ]
