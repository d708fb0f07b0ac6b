#!/bin/bash
# device run for mend fix at scale: base (this checkout, main) vs new (.dev/i39); results into $OUT
D=$(cd "$(dirname "$0")" && pwd)
STAGE=${STAGE:-package}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $D/whl/*.whl || exit 1
printf "def dep_version_check(pkg, hint=None):\n    pass\n" > /tmp/site/transformers/dependency_versions_check.py
rm -rf /tmp/base /tmp/new; mkdir -p /tmp/base /tmp/new
cp -r $D/../analyzers $D/../rewriter $D/../compiler $D/../bench $D/../cli $D/../imports $D/../mend $D/../benchmarks /tmp/base/
cp -r $D/i39/. /tmp/new/
for t in /tmp/base /tmp/new; do for p in analyzers rewriter compiler bench cli imports; do rm -rf $t/mend/$p; ln -sfn ../$p $t/mend/$p; done; done
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=
nproc; python3 --version; date -u
cd /tmp; for t in base new; do PYTHONPATH=/tmp/site:/tmp/$t python3 -c "import mend.rewriter.api, mend.cli.app, typer, rich, libcst; print('$t ok')" || exit 1; done
TF=/tmp/site/transformers
if [ "$STAGE" = package ]; then
  # 1. the whole transformers package, new code: check vs fix, cold and warm
  cd /tmp && PYTHONPATH=/tmp/site:/tmp/new timeout ${PKG_LIMIT:-540} python3 /tmp/new/benchmarks/fix_scale.py --tree $TF --repeat ${REPEAT:-2} > $OUT/fix_scale_package.txt 2>&1; tail -12 $OUT/fix_scale_package.txt
fi
if [ "$STAGE" = t12 ]; then
  # 2. twelve model folders: main vs new, interleaved
  rm -rf /tmp/t12 && mkdir /tmp/t12 && for m in bart whisper t5 opt llama bert vit gpt2 mbart pegasus m2m_100 deformable_detr; do cp -r $TF/models/$m /tmp/t12/; done
  for rep in 1 2; do for t in base new; do
    rm -rf /tmp/w && cp -r /tmp/t12 /tmp/w && cd /tmp/w
    s=$(date +%s%N); PYTHONPATH=/tmp/site:/tmp/$t timeout 200 python3 -m mend.cli check --isolated --no-cache -q . > /dev/null 2>&1; e=$(date +%s%N)
    PYTHONPATH=/tmp/site:/tmp/$t timeout 200 python3 -m mend.cli fix --isolated --unsafe-fixes -q . > /tmp/fix_$t.txt 2>&1; e2=$(date +%s%N)
    echo "rep $rep $t check_cold $(( (e - s) / 1000000 )) ms fix_cold $(( (e2 - e) / 1000000 )) ms: $(tail -1 /tmp/fix_$t.txt)" | tee -a $OUT/t12.txt
    find /tmp/w -name "*.py" -not -name "_mend.py" | sort | xargs sha256sum | sed "s#/tmp/w/##" > $OUT/t12_$t.sha
    cd /tmp
  done; done
  diff $OUT/t12_base.sha $OUT/t12_new.sha > /dev/null && echo "t12: base and new wrote the same files" | tee -a $OUT/t12.txt || echo "t12: FILES DIFFER" | tee -a $OUT/t12.txt
fi
if [ "$STAGE" = t12 ]; then
  cd /tmp && PYTHONPATH=/tmp/site:/tmp/new timeout 200 python3 $D/prof_fix.py $TF > $OUT/prof_fix.txt 2>&1; head -20 $OUT/prof_fix.txt
fi
if [ "$STAGE" = curve ]; then
  cd /tmp && PYTHONPATH=/tmp/site:/tmp/new timeout 400 python3 /tmp/new/benchmarks/fix_scale.py --skip-package --curve --sizes 0.5,1,2,5 > $OUT/fix_scale_curve.txt 2>&1; tail -12 $OUT/fix_scale_curve.txt
  date -u
  for t in base new; do cd /tmp/$t && PYTHONPATH=/tmp/site:/tmp/$t timeout 90 python3 benchmarks/import_hook.py --runs 3 --cold-runs 2 > $OUT/import_hook_$t.txt 2>&1; tail -6 $OUT/import_hook_$t.txt; done
fi
date -u
