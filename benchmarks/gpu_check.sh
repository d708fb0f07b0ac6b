#!/usr/bin/env bash
# The bundled compiler on a bare GPU machine, from a checkout of this repository (mend need not be installed:
# links inside the checkout's mend/ map mend.* to the source folders, as pyproject's package-dir does).
#
#   bash benchmarks/gpu_check.sh 1   # the GPU zoo in bf16: 15 architectures, inference
#   bash benchmarks/gpu_check.sh 2   # GPU tests, micro-benchmarks (tall reduction, matmul epilogues), zoo fp32
#   bash benchmarks/gpu_check.sh 3   # (optional) the zoo's training rows, fp32 then bf16; bf16 matmul tuning
#                                    # in the background against at the first launch (micro-benchmark, in the log)
#   bash benchmarks/gpu_check.sh 5   # the repair zoo on the machine's own transformers: every type, original
#   FROM=fixzoo_all_bf16.json bash benchmarks/gpu_check.sh 6   # its breaking rows: original, safe, unsafe
#                                    # (SOURCES=original,unsafe, ZOO_ARGS=--no-second-fix: less to fit the limit)
#   ROWS=gpt2,bert bash benchmarks/gpu_check.sh 7   # host time per call: what the wrapper's calls cost, then
#                                    # each row under Inductor, mend and mend's switches (COMPILERS), and the GPU tests
#                                    # (TESTS=0: none)
#   ROWS=bert,vit bash benchmarks/gpu_check.sh 8   # the zoo's ROWS in DTYPES (ZOO_ARGS: more options, e.g.
#                                    # --sizes 8x512,64x512; TF_OLD=DIR: again with the transformers in DIR first,
#                                    # under $OUT/tf_old), then `mend bench --repair-value` twice (does a run repeat?)
#
# PROFILE=0 leaves out the zoo's per-model kernel profile (more rows fit a part).
# Each part stops starting work at its deadline (PART_SECONDS, default 520) so the command ends within 9
# minutes; the zoo lists the models it had no time for as skipped. Logs and tables go to $OUT (default
# /tmp/mend_gpu_check), at most 5 files per part:
#   part 1: check1.log (everything), zoo_bf16.txt, zoo_bf16.json
#   part 2: check2.log, gpu_tests.log, bench_micro.txt, zoo_fp32.txt, zoo_fp32.json
#   part 3: check3.log, zoo_fp32.txt, zoo_fp32.json, zoo_bf16.txt, zoo_bf16.json (training rows only)
set -u
PART=${1:-1}
OUT=${OUT:-/tmp/mend_gpu_check}
PART_SECONDS=${PART_SECONDS:-520}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-python}
mkdir -p "$OUT"
START=$(date +%s)
left() { echo $(( PART_SECONDS - ($(date +%s) - START) )); }
exec > >(tee -a "$OUT/check$PART.log") 2>&1

# --- mend without installing it: links mend/<sub> -> the folder pyproject maps mend.<sub> to, made inside
# the checkout's own mend/ package (Python finds it first from the repository root) and removed at the end
LINKS=$("$PY" - "$ROOT" <<'PYEOF'
import os, re, sys
root = sys.argv[1]
text = open(os.path.join(root, "pyproject.toml")).read()
section = text.split("[tool.setuptools.package-dir]", 1)[1].split("\n[", 1)[0]
for pkg, folder in re.findall(r'"([\w.]+)"\s*=\s*"([\w./-]+)"', section):
    link = os.path.join(root, "mend", pkg.split(".", 1)[-1])
    if pkg.count(".") == 1 and os.path.isdir(os.path.join(root, folder)) and not os.path.lexists(link):
        os.symlink(os.path.join("..", folder), link)
        print(link)
PYEOF
)
trap 'for l in $LINKS; do rm -f "$l"; done' EXIT
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export TRANSFORMERS_VERBOSITY=error TOKENIZERS_PARALLELISM=false
cd "$ROOT"

echo "== mend gpu_check part $PART, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
"$PY" -c "import torch, triton, sys; import transformers as t; import mend.compiler.backend; \
print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, \
'transformers', t.__version__, 'cuda', torch.cuda.is_available(), 'mend from', mend.compiler.__file__)" \
    || { echo "FATAL: torch, triton, transformers or mend (from the checkout) do not import"; exit 2; }

zoo() {  # dtype, rows, seconds to leave for what follows
    echo "== GPU zoo $1 $2 ($(left) s left)"
    "$PY" benchmarks/compiler_zoo.py --device cuda --dtype "$1" --models "$2" --jobs 2 --rounds "${ROUNDS:-3}" \
        $([ "${PROFILE:-1}" = 0 ] || echo --profile) ${ZOO_ARGS:-} \
        --budget-s $(( $(left) - $3 - 90 )) --deadline-s $(( $(left) - $3 - 10 )) --out "${ZOO_OUT:-$OUT}"
}

case "$PART" in
1)
    zoo bf16 inference 0
    ;;
2)
    echo "== GPU tests ($(left) s left)"
    if "$PY" -c "import pytest" 2>/dev/null; then
        timeout 220 "$PY" -m pytest -q -p no:cacheprovider -o addopts="-ra" \
            tests/compiler/test_triton_gpu.py tests/compiler/test_gpu_models.py > "$OUT/gpu_tests.log" 2>&1
        echo "pytest exit $?"; tail -25 "$OUT/gpu_tests.log"
    else
        echo "pytest is not installed: GPU tests skipped" | tee "$OUT/gpu_tests.log"
    fi
    echo "== micro-benchmarks ($(left) s left)"
    {
        "$PY" benchmarks/compiler.py --device cuda --compile-workers 16 --rounds 5 --cases tall_colmean,gelu_mlp_bf16
        echo "-- gelu_mlp_bf16 with matmul epilogues off (MEND_MATMUL_EPILOGUE=0)"
        MEND_MATMUL_EPILOGUE=0 "$PY" benchmarks/compiler.py --device cuda --compile-workers 16 --rounds 5 \
            --cases gelu_mlp_bf16
    } > "$OUT/bench_micro.txt" 2>&1
    grep -v "^\s*$" "$OUT/bench_micro.txt" | tail -30
    zoo fp32 inference 0
    ;;
3)
    zoo fp32 training $(( PART_SECONDS / 2 + 60 ))
    zoo bf16 training 120
    echo "== bf16 matmul kernels: background tuning (default) against tuning at the first launch ($(left) s left)"
    for lazy in 1 0; do
        echo "-- MEND_MATMUL_LAZY_TUNE=$lazy"
        MEND_MATMUL_LAZY_TUNE=$lazy timeout $(( $(left) / 2 > 55 ? 55 : $(left) / 2 )) "$PY" benchmarks/compiler.py --device cuda \
            --compile-workers 16 --rounds 5 --cases gelu_mlp_bf16 2>&1 | grep -v "^\s*$" | sed -n '2p;4p'
    done
    ;;
4)
    set -- ${DTYPES:-bf16 fp32}
    while [ $# -gt 0 ]; do zoo "$1" "${ROWS:?ROWS=a,b names the rows}" $(( ($# - 1) * $(left) / $# )); shift; done
    ;;
5)
    # the repair zoo (python -m benchmarks.zoo) on this machine's own transformers, every model type, original
    # source only: which rows break (DTYPE, default bf16); needs libcst (carried as a wheel)
    "$PY" -c "import libcst" || { echo "FATAL: libcst does not import (carry it as a wheel)"; exit 2; }
    D=${DTYPE:-bf16}
    timeout $(( $(left) - 15 )) "$PY" -m benchmarks.zoo --sources original --device cuda --dtype "$D" \
        --jobs "${JOBS:-14}" --timeout 240 --json "$OUT/fixzoo_all_$D.json" > "$OUT/fixzoo_all_$D.txt" 2>&1
    echo "zoo exit $?"; grep -v "^\[" "$OUT/fixzoo_all_$D.txt" | tail -40
    ;;
6)
    # the rows that break (FROM: part 5's json), original against the safe and the unsafe repair
    "$PY" -c "import libcst" || { echo "FATAL: libcst does not import (carry it as a wheel)"; exit 2; }
    D=${DTYPE:-bf16}
    timeout $(( $(left) - 15 )) "$PY" -m benchmarks.zoo --subset breaking --from-json "${FROM:?FROM=part 5 json}" \
        --sources "${SOURCES:-original,safe,unsafe}" --scope traced --device cuda --dtype "$D" --jobs "${JOBS:-14}" \
        --timeout 240 ${ZOO_ARGS:-} --json "$OUT/fixzoo_breaking_$D.json" > "$OUT/fixzoo_breaking_$D.txt" 2>&1
    echo "zoo exit $?"; grep -v "^\[" "$OUT/fixzoo_breaking_$D.txt" | tail -60
    ;;
7)
    "$PY" benchmarks/host_profile.py --primitives
    timeout $(( $(left) - ${TESTS_SECONDS:-150} )) "$PY" benchmarks/host_profile.py "${ROWS:?ROWS=a,b names the rows}" \
        --dtype "${DTYPE:-bf16}" --compilers "${COMPILERS:-inductor,mend,mend:MEND_FOLD=0}" --top "${TOP:-0}"
    [ "${TESTS:-1}" = 0 ] && exit 0
    echo "== GPU tests ($(left) s left)"
    timeout $(( $(left) - 10 )) "$PY" -m pytest -q -p no:cacheprovider -o addopts="-ra" tests/compiler/test_triton_gpu.py \
        tests/compiler/test_gpu_models.py tests/compiler/test_gpu_zoo_split.py > "$OUT/gpu_tests.log" 2>&1
    echo "pytest exit $?"; tail -5 "$OUT/gpu_tests.log"
    ;;
8)
    # the zoo's ROWS first (they leave BENCH_S seconds for each of two bench runs), then the two bench runs
    set -- ${DTYPES:-bf16}
    reserve=$(( 2 * ${BENCH_S:-150} ))
    n=$#
    [ -n "${TF_OLD:-}" ] && n=$(( n * 2 ))
    for d in "$@"; do
        n=$(( n - 1 )); zoo "$d" "${ROWS:?ROWS=a,b names the rows}" $(( reserve + n * ($(left) - reserve) / (n + 1) ))
        if [ -n "${TF_OLD:-}" ]; then
            mkdir -p "$OUT/tf_old"; n=$(( n - 1 ))
            PYTHONPATH="$TF_OLD:$PYTHONPATH" ZOO_OUT="$OUT/tf_old" zoo "$d" "$ROWS" $(( reserve + n * ($(left) - reserve) / (n + 1) ))
        fi
    done
    for i in 1 2; do
        echo "== mend bench --repair-value, run $i ($(left) s left)"
        timeout $(( $(left) / (3 - i) - 5 )) "$PY" -m mend.cli bench benchmarks/repair_value/encoder.py:harness \
            --fixed benchmarks/repair_value/fixed --repair-value --processes "${PROCESSES:-2}" --rounds 10 --calls 10 \
            --json "$OUT/bench_rv_$i.json"
        echo "mend bench exit $?"
    done
    "$PY" - "$OUT/bench_rv_1.json" "$OUT/bench_rv_2.json" <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
print("run to run: cell, median ms in run 1 and run 2, run 2 / run 1")
for r1, r2 in zip(a["results"], b["results"]):
    if r1["status"] == r2["status"] == "ok":
        m1, m2 = r1["latency_ms"]["median"], r2["latency_ms"]["median"]
        print(f"{r1['variant']}/{r1['backend']:<10} {m1:8.3f} {m2:8.3f} {m2 / m1:6.3f}")
for v1, v2 in zip(a["versus"], b["versus"]):
    print(f"{v1['cell']} against {v1['baseline']}: {v1['warm']['ratio']:.3f} ({v1['warm']['verdict']}), then "
          f"{v2['warm']['ratio']:.3f} ({v2['warm']['verdict']})")
PYEOF
    ;;
*)
    echo "usage: gpu_check.sh 1|2|3|4|5|6|7|8"; exit 2
    ;;
esac
echo "== done in $(( $(date +%s) - START )) s"
