#!/bin/bash
# device run: import hook benchmark (sequential, first), then corpora in parallel: RUNS="suite:jobs:extra args;..." ; results into $OUT
D=$(cd "$(dirname "$0")" && pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $D/whl/*.whl || exit 1
printf "def dep_version_check(pkg, hint=None):\n    pass\n" > /tmp/site/transformers/dependency_versions_check.py
rm -rf /tmp/new && mkdir -p /tmp/new && cp -r $D/../analyzers $D/../rewriter $D/../compiler $D/../bench $D/../cli $D/../imports $D/../mend $D/../benchmarks /tmp/new/
for p in analyzers rewriter compiler bench cli imports; do rm -rf /tmp/new/mend/$p; ln -sfn ../$p /tmp/new/mend/$p; done
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=
nproc --all; python3 --version; date -u
export PYTHONPATH=/tmp/site:/tmp/new
if [ -n "$HOOK" ]; then
  cd /tmp/new && timeout ${HOOK_LIMIT:-170} python3 benchmarks/import_hook.py --runs 3 --cold-runs ${COLD:-2} > $OUT/import_hook.txt 2>&1; tail -8 $OUT/import_hook.txt
  date -u
fi
cd /tmp/new && python3 -c "import torch, transformers, torchvision, libcst, mend.rewriter.api; print('versions', torch.__version__, transformers.__version__, torchvision.__version__)" || exit 1
IFS=';' read -ra RS <<< "$RUNS"
for r in "${RS[@]}"; do
  name=$(echo "$r" | cut -d: -f1); jobs=$(echo "$r" | cut -d: -f2); extra=$(echo "$r" | cut -d: -f3-)
  tag=${TAG:-$name}; [ -n "$extra" ] && tag=$name-$(echo "$extra" | md5sum | cut -c1-4)
  timeout ${LIMIT:-380} python3 -m benchmarks.corpus $name $extra --scope traced --jobs $jobs --timeout ${ROWT:-150} --json $OUT/$tag.json --cache-dir /tmp/cache-$tag --out /tmp/o-$tag > $OUT/$tag.log 2>&1 &
done
wait
date -u
if [ -n "$DIFF" ]; then cp -r /tmp/site/torchvision /tmp/tvcopy 2>/dev/null || cp -r $(python3 -c "import torchvision,os;print(os.path.dirname(torchvision.__file__))") /tmp/tvcopy; cd /tmp && python3 -c "from mend.cli.app import main; main()" fix --diff --isolated /tmp/tvcopy/models/detection/ssd.py > $OUT/ssd_diff.txt 2>&1; head -60 $OUT/ssd_diff.txt; fi
for f in $OUT/*.log; do echo "== $f"; tail -n 6 $f; done
