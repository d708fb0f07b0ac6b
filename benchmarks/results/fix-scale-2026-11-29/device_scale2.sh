#!/bin/bash
# device run, issue 39: fix_scale on the whole transformers package, then the import hook benchmark; results into $OUT
D=$(cd "$(dirname "$0")" && pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $D/whl/*.whl || exit 1
printf "def dep_version_check(pkg, hint=None):\n    pass\n" > /tmp/site/transformers/dependency_versions_check.py
rm -rf /tmp/new && mkdir -p /tmp/new && cp -r $D/../analyzers $D/../rewriter $D/../compiler $D/../bench $D/../cli $D/../imports $D/../mend $D/../benchmarks /tmp/new/
for p in analyzers rewriter compiler bench cli imports; do rm -rf /tmp/new/mend/$p; ln -sfn ../$p /tmp/new/mend/$p; done
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=
nproc --all; python3 --version; date -u
cd /tmp && PYTHONPATH=/tmp/site:/tmp/new python3 -c "import mend.rewriter.api, mend.cli.app; print('ok')" || exit 1
cd /tmp && PYTHONPATH=/tmp/site:/tmp/new timeout ${PKG_LIMIT:-330} python3 /tmp/new/benchmarks/fix_scale.py --tree /tmp/site/transformers --repeat ${REPEAT:-1} > $OUT/fix_scale_package.txt 2>&1; tail -14 $OUT/fix_scale_package.txt
date -u
cd /tmp/new && PYTHONPATH=/tmp/site:/tmp/new timeout ${HOOK_LIMIT:-150} python3 benchmarks/import_hook.py --runs 3 --cold-runs 2 > $OUT/import_hook.txt 2>&1; tail -8 $OUT/import_hook.txt
date -u
