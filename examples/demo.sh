#!/usr/bin/env bash
# The mend demo on the bundled examples: find, record, repair, verify, prove.
# Called by `make demo` with MEND and PY set. The repository's examples/ are never modified: the
# repair happens in a copy under .mend/demo/.
set -u
MEND=${MEND:-mend}
PY=${PY:-python}
cd "$(dirname "$0")/.."

WORK=.mend/demo
rm -rf "$WORK" && mkdir -p "$WORK"
cp -r examples "$WORK/examples"
rm -f "$WORK/examples/demo.sh"
export TORCHINDUCTOR_COMPILE_THREADS=1

step() { printf '\n\033[1m== %s\033[0m\n$ %s\n' "$1" "$2"; }
FAILED=0
# expect WANT GOT: a step that exits with another code than the demo expects fails the demo (at the end)
expect() {
    if [ "$2" != "$1" ]; then
        echo "demo: expected exit code $1, got $2" >&2
        FAILED=1
    fi
}
code() { echo "(exit code $1: $2)"; }

step "1. Find: the static analyzer reads the source, no torch import" "mend check examples/"
$MEND check examples/
rc=$?; code $rc "1 means findings"; expect 1 $rc

step "2. Record: what Dynamo really does when the program runs" "mend run --data-file $WORK/before.json examples/run_all.py"
$MEND run --data-file "$WORK/before.json" examples/run_all.py
expect 0 $?
step "   Report: breaks and recompiles by source site" "mend report --data-file $WORK/before.json"
$MEND report --data-file "$WORK/before.json"
expect 0 $?
step "   Gate: CI fails over budget (default budget: 0 breaks, 0 recompiles)" "mend gate --data-file $WORK/before.json"
$MEND gate --data-file "$WORK/before.json"
rc=$?; code $rc "1 means over budget"; expect 1 $rc

step "3. Repair (preview): the rewrite as a diff, nothing written" "mend fix --diff $WORK/examples"
$MEND fix --diff "$WORK/examples"

step "   Verify before writing: original vs repaired, same outputs, fewer graphs" \
     "mend fix --unsafe-fixes --verify $WORK/examples/transformer_block.py:harness $WORK/examples"
$MEND fix --quiet --unsafe-fixes --verify "$WORK/examples/transformer_block.py:harness" "$WORK/examples"
expect 0 $?

step "   Repair in place (safe fixes, then the unsafe ones we opt into)" "mend fix --unsafe-fixes $WORK/examples"
$MEND fix --unsafe-fixes "$WORK/examples"
rc=$?; code $rc "1 means findings remain: loss.backward() in a compiled step has no automatic repair"; expect 1 $rc

step "4. Record again after the repair" "mend run --data-file $WORK/after.json $WORK/examples/run_all.py"
$MEND run --data-file "$WORK/after.json" "$WORK/examples/run_all.py"
expect 0 $?
$MEND report --data-file "$WORK/after.json"
expect 0 $?
step "   Gate again: the same budget now passes" "mend gate --data-file $WORK/after.json"
$MEND gate --data-file "$WORK/after.json"
rc=$?; code $rc "0 means within budget"; expect 0 $rc

step "5. Prove: time before vs after on eager, Dynamo and the bundled mend compiler" \
     "mend bench examples/transformer_block.py:harness --fixed $WORK/examples ..."
$MEND bench examples/transformer_block.py:harness --fixed "$WORK/examples" --device cpu \
    -b eager -b dynamo-eager -b mend --threads 1 --rounds 3 --calls 5 --warmup 1 \
    --json "$WORK/bench.json" --html "$WORK/bench.html"
expect 0 $?

printf '\nArtifacts in %s: before.json / after.json (run data), bench.json, bench.html\n' "$WORK"
exit $FAILED
