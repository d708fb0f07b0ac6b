#!/usr/bin/env bash
# The promises of docs/results.md "Promises checked on public repositories", on fetched repositories.
#
#   benchmarks/results/promises-2026-11-29/promises.sh CHECKOUTS WORK
#
# CHECKOUTS: the corpus checked out by benchmarks/corpus/checkout.py (each repository at its manifest
# commit); WORK: an empty folder for copies. Run from the repository root with the dev venv; PYTHONPATH
# must hold einops, einx, loguru and torch-einops-utils (the repositories' own dependencies) and the
# stand-in `torchvision` (vit-pytorch imports `torchvision.transforms` at import; no row uses it). Each
# section's transcript (command, output, exit code) goes to OUT (default: this folder).
set -u
CHECKOUTS=$(realpath "$1")
WORK=$(realpath "$2")
HERE=$(dirname "$(realpath "$0")")
OUT=${OUT:-$HERE}
MEND=$(realpath .venv/bin/mend)
PY=$PWD/.venv/bin/python  # not resolved: the link is what finds the venv
export TORCHINDUCTOR_COMPILE_THREADS=1

run() {  # run CMD...: print it, its output and its exit code
  echo "\$ $*"
  "$@" 2>&1 | grep -v -e "^W[0-9]* " -e "Failed to initialize NumPy" -e "_conversion_method_template"
  echo "[exit ${PIPESTATUS[0]}]"
  echo
}

copy() {  # copy REPO-DIR NAME: a fresh copy of a checkout under WORK
  rm -rf "$WORK/$2" && cp -r "$CHECKOUTS/$1" "$WORK/$2"
}

mkdir -p "$WORK" && cd "$WORK" || exit 2

# --- 0: a message in a submodule's forward, kept under compile ----------------------------------------
{
  echo "# nanoGPT (karpathy/nanoGPT) with a logger.warning and a print added to Block.forward, compiled from"
  echo "# GPT (inductor, the default backend; eval, no_grad), two calls: the original's lines against the"
  echo "# repaired copy's (mend fix, default options)"
  rm -rf p0 && mkdir -p p0/original && cp "$CHECKOUTS/karpathy+nanoGPT/model.py" p0/original/
  "$PY" "$HERE/add_logging.py" p0/original/model.py
  cp -r p0/original p0/repaired
  run diff -u "$CHECKOUTS/karpathy+nanoGPT/model.py" p0/original/model.py
  run "$MEND" fix --isolated p0/repaired
  run "$PY" "$HERE/nanogpt_messages.py" p0/original inductor
  run "$PY" "$HERE/nanogpt_messages.py" p0/repaired inductor
  "$PY" "$HERE/nanogpt_messages.py" p0/original inductor 2>/dev/null | grep -v "^number of" > p0/original.out
  "$PY" "$HERE/nanogpt_messages.py" p0/repaired inductor 2>/dev/null | grep -v "^number of" > p0/repaired.out
  run diff p0/original.out p0/repaired.out
  run "$MEND" run -q --data-file p0/original.json "$HERE/nanogpt_messages.py" p0/original inductor
  run "$MEND" run -q --data-file p0/repaired.json "$HERE/nanogpt_messages.py" p0/repaired inductor
  run "$PY" -c "import json; d=json.load(open('p0/original.json')); print('original: breaks', [(b['path'].split('/')[-1], b['line'], b['gb_type']) for b in d['breaks']])"
  run "$PY" -c "import json; d=json.load(open('p0/repaired.json')); print('repaired: breaks', [(b['path'].split('/')[-1], b['line'], b['gb_type']) for b in d['breaks']])"
} > "$OUT/p0_messages.txt"

# --- 1: --verify proves it ran the repaired code, the harness outside the tree --------------------------
{
  echo "# x-transformers (lucidrains/x-transformers), the corpus's 'options' row in training mode (layer"
  echo "# dropout draws random.random()); the harness lives in another folder and imports the package from"
  echo "# MEND_TREE. --torch-rng --unsafe-fixes repairs the draw (MND105)."
  copy lucidrains+x-transformers xt
  mkdir -p elsewhere && cp "$HERE/xt_harness.py" elsewhere/harness.py
  echo "## the harness imports the tree being fixed"
  MEND_TREE=$WORK/xt run "$MEND" fix --isolated --unsafe-fixes --torch-rng --select MND105 --verify "$WORK/elsewhere/harness.py:harness" xt/x_transformers/x_transformers.py
  echo "## the harness imports another checkout (the repaired modules are never loaded): verify must fail"
  MEND_TREE=$CHECKOUTS/lucidrains+x-transformers run "$MEND" fix --isolated --unsafe-fixes --torch-rng --select MND105 --verify "$WORK/elsewhere/harness.py:harness" xt/x_transformers/x_transformers.py
  echo "## the whole package: a repaired file the harness never imports fails the verdict too"
  MEND_TREE=$WORK/xt run "$MEND" fix --isolated --unsafe-fixes --torch-rng --select MND105 --verify "$WORK/elsewhere/harness.py:harness" xt/x_transformers
} > "$OUT/p1_verify.txt"

# --- 2: --from-run writes only under the paths given ----------------------------------------------------
{
  echo "# a run recorded on the checkout of x-transformers; mend fix --from-run of that run on a copy"
  copy lucidrains+x-transformers xt2
  cp -r "$CHECKOUTS/lucidrains+x-transformers" recorded
  run bash -c "cd recorded && MEND_TREE=. $MEND run -q --data-file ../run.json $HERE/xt_train.py"
  (cd recorded && find . -name "*.py" -print0 | sort -z | xargs -0 sha256sum) > recorded.before
  run "$MEND" fix --isolated --from-run run.json --unsafe-fixes --torch-rng xt2/x_transformers/x_transformers.py
  (cd recorded && find . -name "*.py" -print0 | sort -z | xargs -0 sha256sum) > recorded.after
  run bash -c "diff recorded.before recorded.after && echo 'the recorded checkout: every .py file byte for byte as before'"
  run diff -r "$CHECKOUTS/lucidrains+x-transformers/x_transformers" xt2/x_transformers
} > "$OUT/p2_from_run.txt"

# --- 3: check's fixable count is what fix applies; 0 after the fix -------------------------------------
{
  for repo in karpathy+nanoGPT lucidrains+vit-pytorch lucidrains+x-transformers openai+whisper milesial+Pytorch-UNet facebookresearch+segment-anything; do
    echo "## $repo"
    copy "$repo" "p3-$repo"
    run bash -c "$MEND check --isolated p3-$repo | tail -2"
    run bash -c "$MEND fix --isolated --unsafe-fixes --diff p3-$repo | tail -1"
    run bash -c "$MEND fix --isolated --diff p3-$repo | tail -1"
    run bash -c "$MEND check --isolated p3-$repo | tail -2"
    run bash -c "$MEND fix --isolated p3-$repo | tail -1"
    run bash -c "$MEND check --isolated p3-$repo | tail -2"
    run bash -c "$MEND fix --isolated --unsafe-fixes p3-$repo | tail -1"
    run bash -c "$MEND check --isolated p3-$repo | tail -2"
    run bash -c "$MEND fix --isolated --unsafe-fixes --diff p3-$repo | tail -1"
  done
} > "$OUT/p3_fixable.txt"

# --- 4: no repair that only moves a break ---------------------------------------------------------------
{
  echo "# vit-pytorch: adaptive token sampling (ats_vit.py: torch.unique per row, then pad_sequence) and NaViT"
  echo "# (na_vit.py: repeat_interleave per image in a loop, appended, then pad_sequence): the capture is declined"
  copy lucidrains+vit-pytorch vp
  run bash -c "$MEND fix --isolated --unsafe-fixes --diff vp/vit_pytorch/ats_vit.py vp/vit_pytorch/na_vit.py | grep -v '^[-+@ ]'"
  echo "# the declined capture, written by hand, on torch: the break goes to pad_sequence"
  rm -rf p4 && mkdir -p p4/original p4/captured && cp -r vp/vit_pytorch p4/original/ && cp -r vp/vit_pytorch p4/captured/
  : > p4/original/vit_pytorch/__init__.py && : > p4/captured/vit_pytorch/__init__.py
  "$PY" - <<'EOF'
from pathlib import Path
p = Path("p4/captured/vit_pytorch/ats_vit.py")
s = p.read_text()
site = "torch.unique(t, sorted = True)"
assert s.count(site) == 1
s = s.replace(site, f"_mend_captured(lambda: {site})").replace("import torch\n", "import torch\nfrom mend.rewriter.helpers import captured as _mend_captured\n", 1)
p.write_text(s)
EOF
  run diff -u p4/original/vit_pytorch/ats_vit.py p4/captured/vit_pytorch/ats_vit.py
  for v in original captured; do
    run "$MEND" run -q --data-file "p4/$v.json" "$HERE/ats_vit.py" "p4/$v"
    run "$PY" -c "import json; d=json.load(open('p4/$v.json')); print('$v: break sites', sorted({(b['path'].split('/')[-1], b['line'], b['gb_type'], b['frame_skip']) for b in d['breaks'] if 'ats_vit' in b['path']}))"
  done
} > "$OUT/p4_moved.txt"

# --- 5: messages: the user's lines, one line per site, reasons that say what the code does -------------
{
  echo "# not-fixed lines of x-transformers (fixes above them add lines to the repaired file): each line number"
  echo "# is the original file's, and the line shown is the code the finding names"
  copy lucidrains+x-transformers xt5
  run bash -c "$MEND fix --isolated --unsafe-fixes --diff xt5/x_transformers/autoregressive_wrapper.py | grep -v '^[-+@ ]'"
  "$MEND" fix --isolated --unsafe-fixes --diff xt5/x_transformers/autoregressive_wrapper.py xt5/x_transformers/continuous.py \
    xt5/x_transformers/up_wrapper.py 2>/dev/null | grep -E "(would fix|not fixed)" > p5.lines
  run cat p5.lines
  while IFS=: read -r path line _; do
    echo "$path:$line: $(sed -n "${line}p" "$path" | sed 's/^ *//')"
  done < p5.lines
  echo
  echo "# a site recorded at run time that mend check also finds is listed once (vit-pytorch ats_vit.py:88)"
  copy lucidrains+vit-pytorch vp5
  : > vp5/vit_pytorch/__init__.py
  run "$MEND" run -q --data-file ats.json "$HERE/ats_vit.py" vp5
  run bash -c "$MEND fix --isolated --unsafe-fixes --diff --from-run ats.json vp5/vit_pytorch/ats_vit.py | grep -v '^[-+@ ]'"
} > "$OUT/p5_messages.txt"
