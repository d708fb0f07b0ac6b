#!/usr/bin/env bash
# The bundled compiler on a bare GPU machine, from a checkout of this repository (mend need not be installed:
# a package shim on PYTHONPATH maps mend.* to the source folders, as pyproject's package-dir does).
#
#   bash benchmarks/gpu_check.sh 1   # GPU tests, micro-benchmarks (tall reduction, matmul epilogues), zoo bf16
#   bash benchmarks/gpu_check.sh 2   # zoo fp32 (inference), then the training rows
#
# Each part stops starting work at its deadline (PART_SECONDS, default 520) so the command ends within 9
# minutes; the zoo lists the models it had no time for as skipped. Logs and tables go to $OUT (default
# /tmp/mend_gpu_check), at most 5 files per part:
#   part 1: check1.log (everything), gpu_tests.log, bench_micro.txt, zoo_bf16.txt, zoo_bf16.json
#   part 2: check2.log, zoo_fp32.txt, zoo_fp32.json
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

# --- mend without installing it: mend/<sub> -> the source folder pyproject maps it to
SHIM=$(mktemp -d)/site
mkdir -p "$SHIM/mend"
"$PY" - "$ROOT" "$SHIM/mend" <<'EOF'
import os, re, sys
root, dest = sys.argv[1], sys.argv[2]
text = open(os.path.join(root, "pyproject.toml")).read()
section = text.split("[tool.setuptools.package-dir]", 1)[1].split("\n[", 1)[0]
for pkg, folder in re.findall(r'"([\w.]+)"\s*=\s*"([\w./-]+)"', section):
    src = os.path.join(root, folder)
    if pkg == "mend":
        for f in os.listdir(src):
            os.symlink(os.path.join(src, f), os.path.join(dest, f))
    elif pkg.count(".") == 1 and os.path.isdir(src):
        os.symlink(src, os.path.join(dest, pkg.split(".", 1)[1]))
EOF
export PYTHONPATH="$SHIM${PYTHONPATH:+:$PYTHONPATH}"
export TRANSFORMERS_VERBOSITY=error TOKENIZERS_PARALLELISM=false
cd "$ROOT"

echo "== mend gpu_check part $PART, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
"$PY" -c "import torch, triton, sys; import transformers as t; import mend.compiler.backend; \
print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, \
'transformers', t.__version__, 'cuda', torch.cuda.is_available(), 'mend from', mend.compiler.__file__)" \
    || { echo "FATAL: torch/triton/transformers or the mend shim do not import"; exit 2; }

if [ "$PART" = "1" ]; then
    echo "== GPU tests ($(left) s left)"
    if "$PY" -c "import pytest" 2>/dev/null; then
        timeout 240 "$PY" -m pytest -q -p no:cacheprovider -o addopts="-ra" \
            tests/compiler/test_triton_gpu.py tests/compiler/test_gpu_models.py > "$OUT/gpu_tests.log" 2>&1
        echo "pytest exit $?"; tail -25 "$OUT/gpu_tests.log"
    else
        echo "pytest is not installed: GPU tests skipped" | tee "$OUT/gpu_tests.log"
    fi
    echo "== micro-benchmarks ($(left) s left)"
    {
        "$PY" benchmarks/compiler.py --device cuda --compile-workers 16 --rounds 10 \
            --cases tall_colmean,gelu_mlp_bf16,pointwise,softmax
        echo "-- the same with matmul epilogues off (MEND_MATMUL_EPILOGUE=0)"
        MEND_MATMUL_EPILOGUE=0 "$PY" benchmarks/compiler.py --device cuda --compile-workers 16 --rounds 10 \
            --cases gelu_mlp_bf16
    } > "$OUT/bench_micro.txt" 2>&1
    cat "$OUT/bench_micro.txt" | grep -v "^\s*$" | tail -30
    DTYPE=bf16 ROWS=inference
else
    DTYPE=fp32 ROWS=inference,training
fi

echo "== GPU zoo $DTYPE ($(left) s left)"
"$PY" benchmarks/compiler_zoo.py --device cuda --dtype "$DTYPE" --models "$ROWS" --jobs 2 --rounds 3 --profile \
    --budget-s $(( $(left) - 100 )) --deadline-s $(( $(left) - 15 )) --out "$OUT"
echo "== done in $(( $(date +%s) - START )) s"
