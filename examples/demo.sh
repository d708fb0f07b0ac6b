#!/usr/bin/env bash
# The mend demo on the bundled examples. Called by `make demo` with MEND and PY set.
set -u
MEND=${MEND:-mend}
PY=${PY:-python}
cd "$(dirname "$0")/.."

step() { printf '\n\033[1m== %s\033[0m\n$ %s\n' "$1" "$2"; }

step "Find: the static analyzer (no torch import)" "mend check examples/"
$MEND check examples/
echo "(exit code $?: 1 means findings)"
