#!/bin/bash
# device run: zoo (transformers, LayerDrop families) eval+train, torch_geometric corpus, property tests; results into $OUT
D=$(cd "$(dirname "$0")" && pwd)
LIMIT=${LIMIT:-500}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $D/whl/*.whl || exit 1
printf "def dep_version_check(pkg, hint=None):\n    pass\n" > /tmp/site/transformers/dependency_versions_check.py   # 4.52.4 beside the machine's newer tokenizers
export PYTHONPATH=/tmp/site:$D/.. PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=
cd $D/.. && cp -r $D/overlay/. . && for p in analyzers rewriter compiler bench cli imports; do ln -sfn ../$p mend/$p; done
python3 -c "import torch, transformers, torch_geometric, libcst, mend.rewriter.api; print('versions', torch.__version__, transformers.__version__, torch_geometric.__version__)" || exit 1
R=$OUT; date -u
timeout $LIMIT python3 benchmarks/fix_properties.py --examples 80 --minutes 6 --compiled-every 2 --seed 71 > $R/fix_properties.log 2>&1
date -u
tail -n 5 $R/*.log
