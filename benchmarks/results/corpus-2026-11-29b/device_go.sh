#!/bin/bash
# device run: corpora (eval + train; original, safe, unsafe) on the CPU cores; SUITES="name:jobs ..."; results into $OUT
D=$(cd "$(dirname "$0")" && pwd)
LIMIT=${LIMIT:-540}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $D/whl/*.whl || exit 1
printf "def dep_version_check(pkg, hint=None):\n    pass\n" > /tmp/site/transformers/dependency_versions_check.py
export PYTHONPATH=/tmp/site:$D/.. PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=
cd $D/.. && for p in analyzers rewriter compiler bench cli imports; do ln -sfn ../$p mend/$p; done
python3 -c "import torch, transformers, torchvision, timm, libcst, mend.rewriter.api; print('versions', torch.__version__, transformers.__version__, torchvision.__version__, timm.__version__)" || exit 1
R=$OUT; date -u; git log --oneline -1 2>/dev/null
for s in $SUITES; do
  name=${s%%:*}; jobs=${s##*:}
  x=""; [ $name = transformers ] && x="--subset breaking"; timeout $LIMIT python3 -m benchmarks.corpus $name $x $EXTRA --scope traced --jobs $jobs --timeout ${ROWT:-150} --json $R/$name.json --cache-dir /tmp/cache-$name --out /tmp/o-$name > $R/$name.log 2>&1 &
done
wait
date -u
for f in $R/*.log; do echo "== $f"; tail -n 4 $f; done
