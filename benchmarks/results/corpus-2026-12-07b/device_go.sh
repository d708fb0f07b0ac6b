#!/bin/bash
# device run: corpora in parallel on the CPU cores: RUNS="suite:jobs:extra args;..." ; results into $OUT
D=$(cd "$(dirname "$0")" && pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $D/whl/*.whl || exit 1
printf "def dep_version_check(pkg, hint=None):\n    pass\n" > /tmp/site/transformers/dependency_versions_check.py
rm -rf /tmp/new && mkdir -p /tmp/new && cp -r $D/../analyzers $D/../rewriter $D/../compiler $D/../bench $D/../cli $D/../imports $D/../mend $D/../benchmarks /tmp/new/
for p in analyzers rewriter compiler bench cli imports; do rm -rf /tmp/new/mend/$p; ln -sfn ../$p /tmp/new/mend/$p; done
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=
nproc --all; python3 --version; date -u
export PYTHONPATH=/tmp/site:/tmp/new
cd /tmp/new && python3 -c 'import torch, transformers, torchvision, libcst, mend.rewriter.api, importlib.metadata as m, importlib.util as u; print("versions", torch.__version__, transformers.__version__, torchvision.__version__, *[p + " " + m.version(p) for p in ("timm", "diffusers") if u.find_spec(p)])' || exit 1
IFS=';' read -ra RS <<< "$RUNS"
for r in "${RS[@]}"; do
  name=$(echo "$r" | cut -d: -f1); jobs=$(echo "$r" | cut -d: -f2); extra=$(echo "$r" | cut -d: -f3- | sed "s#@CORPUS#$D/corpus#g")
  tag=$name-$(echo "$extra" | md5sum | cut -c1-4)
  timeout ${LIMIT:-480} python3 -m benchmarks.corpus $name $extra --jobs $jobs --json $OUT/$tag.json --cache-dir /tmp/cache-$tag --out /tmp/o-$tag > $OUT/$tag.log 2>&1 &
done
wait
date -u
for f in $OUT/*.json; do gzip -f $f; done
for f in $OUT/*.log; do echo "== $f"; grep -n "rows worse\|eager outputs\|break sites original\|recall" $f | head -12; tail -n 3 $f; done
