"""The library suites' rows run on the inputs the harness gives them (a row that cannot run on its input
measures nothing). Needs torchvision: the corpus environment (docs/corpus.md); skipped elsewhere."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")


@pytest.mark.parametrize(("row", "mode"), [("raft_small", "eval"), ("s3d", "eval"), ("vit_h_14", "eval"),
                                           ("inception_v3", "train")])
def test_torchvision_rows_that_need_larger_inputs_run_eagerly(row, mode):
    from benchmarks.zoo.libraries import LibrarySuite

    case = LibrarySuite("torchvision").case(row, mode, "fp32", "tiny")
    case.model.train(mode == "train")
    with torch.set_grad_enabled(mode == "train"):
        out = case.model(*case.args, **case.kwargs)
        if mode == "train":
            case.loss(out)[0].backward()  # (loss, what it was made from)
