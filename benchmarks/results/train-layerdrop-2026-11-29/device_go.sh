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
M=bart,mbart,pegasus,m2m_100,plbart,blenderbot,marian,opt,xglm,biogpt,whisper,speech_to_text,t5
timeout $LIMIT python3 -m benchmarks.zoo --models $M --no-variants --modes train --sources original,safe --scope traced --jobs 14 --timeout 150 --json $R/zoo-layerdrop.json --cache-dir /tmp/cache --out /tmp/o-zoo > $R/zoo-layerdrop.log 2>&1 &
timeout $LIMIT python3 benchmarks/fix_properties.py --examples 60 --minutes 3 --compiled-every 2 --seed 72 > $R/fix_properties.log 2>&1 &
wait
date -u
tail -n 5 $R/*.log
