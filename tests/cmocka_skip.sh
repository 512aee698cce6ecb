# CTest's command for the cmocka programs (tests/test_*.c): runs one and maps cmocka's skip() to
# CTest's skip. cmocka counts a skipped test as passed (exit 0); when the program passed and its
# summary says "[  SKIPPED ]", this exits 77 (SKIP_RETURN_CODE), so `ctest` shows "Skipped"
# with the reasons above it in the output (each skip() prints why first). Failures stay failures.
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q '^\[  SKIPPED \]'; then
    n=$(printf '%s\n' "$out" | sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' | tail -1)
    echo "SKIPPED: ${n:-some} test(s) of $(basename "$1") could not run (reasons above); the others passed"
    exit 77
fi
exit $rc
