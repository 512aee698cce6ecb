# The hostile-file suite (tests/hostile/, written by make_hostile.py): one file per malformed case
# for every reader. Each case must exit 3 (input error) with a message on stderr that names the
# file (or the data name it was found under) and matches the expected pattern; a crash, a
# sanitizer report (the ASan build) or any other exit code fails. Prints one line per case.
. "$(dirname "$0")/lib_cli.sh"
S=${PARITY_SRC:?}
n=0
while IFS=$'\t' read -r file cmd expect; do
    case $file in '#'*|'') continue ;; esac
    n=$((n + 1))
    H=$S/tests/hostile/$file
    D=$tmp/data.$n
    T=$tmp/scratch.$n
    mkdir -p "$D" "$T"
    # a command is parity's arguments, or (when it sets up $PARITY_DATA) a whole command line
    case $cmd in ln\ *) line=$cmd ;; *) line="\"\$P\" $cmd" ;; esac
    out=$(cd "$T" && P=$P H=$H S=$S D=$D T=$T bash -c "$line" 2>&1 >/dev/null)
    rc=$?
    base=$(basename "$file")
    stem=${base%%.*} # a sidecar's message names X.mask.npy for the case X.npy
    named=0
    case $out in *"$stem"*|*gpt2_encoder.json*|*gpt2_vocab.bpe*|*"no sequence in common"*|*"empty dump"*|*"nothing to compare"*) named=1 ;; esac
    if [ $rc -ne 3 ]; then bad "$file: exit $rc, expected 3: $out"
    elif ! printf '%s' "$out" | grep -Eq -- "$expect"; then bad "$file: message does not match /$expect/: $out"
    elif [ $named -ne 1 ]; then bad "$file: the message does not name the file: $out"
    elif printf '%s' "$out" | grep -q 'Sanitizer'; then bad "$file: sanitizer report: $out"
    else ok; echo "ok $file: $(printf '%s' "$out" | head -1 | cut -c1-200)"
    fi
done <"$S/tests/hostile/cases.tsv"
[ $n -ge 90 ] || bad "only $n cases read from tests/hostile/cases.tsv"
echo "hostile files: $pass passed, $fail failed of $n"
exit $((fail > 0))
