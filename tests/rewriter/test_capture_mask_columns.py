"""A boolean mask among other indices (``edge_index[:, mask]``, torch_geometric's ``remove_self_loops`` and
``add_remaining_self_loops``) is captured for the site under ``--unsafe-fixes`` like a single mask index, also
where the result is then given to ``isinstance`` (a type query, no branch on the data): the break goes, and
the compiled output is eager's."""

from __future__ import annotations

import textwrap
from pathlib import Path

from mend.analyzers import static
from mend.rewriter import FixOptions, fix_source

SOURCE = textwrap.dedent("""
    import torch
    from torch import nn


    class EdgeIndex(torch.Tensor):
        pass


    class M(nn.Module):
        def forward(self, x, edge_index):
            mask = edge_index[0] != edge_index[1]
            edge_index = edge_index[:, mask]
            if isinstance(edge_index, EdgeIndex):
                edge_index = edge_index.as_subclass(torch.Tensor)
            out = torch.zeros_like(x).index_add(0, edge_index[1], x.index_select(0, edge_index[0]))
            return out * 2
""")


def _fixed(unsafe: bool = True):
    config = static.load_config(["."], isolated=True)
    diags = [d for d in static.check_source(SOURCE, "t.py", config) if d.code == "MND305"]
    assert [d.line for d in diags] == [13]
    return fix_source(SOURCE, "t.py", diags, FixOptions(unsafe=unsafe))


def test_the_mask_among_other_indices_is_captured() -> None:
    res = _fixed()
    assert [a.code for a in res.applied] == ["MND305"]
    assert "edge_index = _mend_captured(lambda: edge_index[:, mask])" in res.fixed
    assert _fixed(unsafe=False).applied == []  # capture is unsafe


def _graphs(source: str, folder: Path, name: str):
    import torch
    from torch._dynamo.testing import CompileCounterWithBackend

    import mend.rewriter.helpers as helpers

    path = folder / f"{name}.py"
    path.write_text(source.replace("from _mend import", "from mend.rewriter.helpers import"), encoding="utf-8")
    ns = {"__name__": name}
    exec(compile(path.read_text(), str(path), "exec"), ns)  # noqa: S102 - the test's own program
    assert helpers
    torch.manual_seed(0)
    x, edge_index = torch.randn(6, 3), torch.tensor([[0, 1, 2, 2, 4, 5], [0, 2, 1, 2, 3, 1]])
    eager = ns["M"]()(x, edge_index)
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("eager")
    out = torch.compile(ns["M"](), backend=counter)(x, edge_index)
    torch.testing.assert_close(out, eager, rtol=0, atol=0)
    return counter.frame_count


def test_the_capture_removes_the_break(tmp_path: Path) -> None:
    assert _graphs(SOURCE, tmp_path, "before") > 1
    assert _graphs(_fixed().fixed, tmp_path, "after") == 1


TOPK = textwrap.dedent("""
    import torch
    from torch import nn


    class M(nn.Module):
        def forward(self, x, k):
            values, perm = torch.sort(x, descending=True)
            batch, batch_perm = perm.sort()
            mask = values[batch_perm] > k
            return perm[batch_perm[mask]] * 2
""")


def test_names_unpacked_from_a_tensor_tuple_are_tensors() -> None:
    """``values, perm = torch.sort(x)`` and ``a, b = t.sort()`` bind tensors (torch_geometric's top-k pooling):
    indexing ``perm`` is a tensor's indexing, not a Python sequence's, and the mask is captured."""
    import libcst as cst

    from mend.rewriter.analysis import FunctionFacts, ImportMap

    module = cst.parse_module(TOPK + "\n\ndef f(x):\n    a, b = g(x)\n    c, d = x.sort()\n    return a\n")
    forward = next(n for n in module.body if isinstance(n, cst.ClassDef)).body.body[0]
    facts = FunctionFacts(forward, ImportMap(module))
    assert {"values", "perm", "batch", "batch_perm"} <= facts.tensor_names
    other = FunctionFacts(module.body[-1], ImportMap(module))
    assert "a" not in other.tensor_names and "b" not in other.tensor_names  # `g` may return anything
    config = static.load_config(["."], isolated=True)
    diags = [d for d in static.check_source(TOPK, "t.py", config) if d.code == "MND305"]
    res = fix_source(TOPK, "t.py", diags, FixOptions(unsafe=True))
    assert [a.code for a in res.applied] == ["MND305"], [r.reason for r in res.remaining]
    assert "return perm[_mend_captured(lambda: batch_perm[mask])] * 2" in res.fixed
