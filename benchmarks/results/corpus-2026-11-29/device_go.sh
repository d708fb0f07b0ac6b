#!/bin/bash
# corpus helper: zoo (transformers) + torchvision on the device's CPU cores; results tarred into $OUT
B=$(cd "$(dirname "$0")" && pwd)
LIMIT=${LIMIT:-330}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl || exit 1
cp -r $B/sitex/* /tmp/site/
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=
cd $B/src && for p in analyzers rewriter compiler bench cli imports; do ln -sfn ../$p mend/$p; done
python3 -c "import torch, transformers, torchvision, timm, mend.rewriter.api; print('versions', torch.__version__, transformers.__version__, torchvision.__version__, timm.__version__, transformers.__file__)" || exit 1
R=/tmp/res; mkdir -p $R
nproc; date -u
timeout $LIMIT python3 -m benchmarks.corpus transformers --subset breaking --sources original,safe,unsafe --scope traced --jobs ${ZJ:-11} --timeout 150 --json $R/transformers.json --cache-dir /tmp/cache --out /tmp/o-tf > $R/transformers.log 2>&1 &
timeout $LIMIT python3 -m benchmarks.corpus torchvision --scope traced --jobs ${TJ:-5} --timeout 120 --json $R/torchvision.json --cache-dir /tmp/cache --out /tmp/o-tv > $R/torchvision.log 2>&1 &
wait
date -u
tail -n 3 $R/*.log
ls -la $R
tar czf $OUT/results.tgz -C $R .
