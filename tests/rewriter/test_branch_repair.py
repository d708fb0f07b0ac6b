"""Branch repairs keep the condition, always: the SAM pattern and its neighbours, run for real.

Each case is repaired through the whole pipeline (``mend check`` findings -> ``mend fix``), then the
original and the repaired module run on inputs that take every branch: the repaired code must compute
bit for bit what the original computes, eagerly and under ``torch.compile`` (backend ``eager``), and
the compiled repair must be one graph. A case the repair cannot express is declined with its reason
and the file is left as it was.
"""

from __future__ import annotations

import textwrap
import types

import pytest
import torch

from mend.analyzers import static
from mend.rewriter import FixOptions, fix_source

SAM = """
import torch
from torch import nn


class Dec(nn.Module):
    def __init__(self):
        super().__init__()
        self.iou_token = nn.Embedding(1, 4)

    def forward(self, image_embeddings, sparse_prompt_embeddings):
        batch_size = image_embeddings.shape[0]
        output_tokens = self.iou_token.weight.repeat(batch_size, 1, 1, 1)
        if sparse_prompt_embeddings.sum().item() != 0:
            tokens = torch.cat((output_tokens, sparse_prompt_embeddings), dim=2)
        else:
            tokens = output_tokens
        return tokens.to(self.iou_token.weight.dtype)
"""


def _module(body: str) -> str:
    """A compiled function ``f`` around ``body`` (indented statements using x and y)."""
    return "import torch\n\n\n@torch.compile\ndef f(x: torch.Tensor, y: torch.Tensor):\n" + textwrap.indent(
        textwrap.dedent(body).strip("\n"), "    ") + "\n"


def _repair(source: str, unsafe: bool = False):
    config = static.load_config(["."], isolated=True)

    def diagnose(text: str):
        return static.check_source(text, "case.py", config)

    return fix_source(source, "case.py", None, FixOptions(unsafe=unsafe), diagnose)


def _load(source: str, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(source.replace("@torch.compile\n", ""), f"<{name}>", "exec"), mod.__dict__)
    return mod


def _same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and \
            a.stride() == b.stride() and a.numpy().tobytes() == b.numpy().tobytes()
    return a == b


INPUTS = [
    (torch.tensor([1.0, 2.0]), torch.tensor([3.0, -4.0])),
    (torch.tensor([-1.0, -2.0]), torch.tensor([3.0, -4.0])),
    (torch.tensor([0.0, 0.0]), torch.tensor([0.5, 0.25])),
    (torch.tensor([1.0, -1.0]), torch.tensor([float("nan"), float("inf")])),
    (torch.tensor([0.1], dtype=torch.float16), torch.tensor([0.1], dtype=torch.float16)),
]

# (name, body, safe?) for repairs that must apply and compute exactly what the original does
FIXED = [
    ("item condition", """
        if x.sum().item() != 0:
            y = y * 2
        return y
     """, True),
    ("item compared with a constant float16 cannot hold", """
        if x.max().item() >= 0.1:
            y = y + 1
        return y
     """, True),
    ("bool() condition", """
        if bool((x > 0).any()):
            y = y - 1
        return y
     """, True),
    ("condition through a local", """
        flag = x.sum() > 0
        if flag:
            y = y * 3
        return y
     """, True),
    ("new name on both sides, read after", """
        if x.mean() > 0:
            z = y * 2
        else:
            z = y - 1
        return z + 1
     """, True),
    ("name read through an attribute after the branch", """
        if x.sum() != 0:
            z = y * 2
        else:
            z = y
        return z.to(y.dtype)
     """, True),
    ("elif chain with a temporary", """
        if x.sum() > 1:
            t = y * 2
            y = t + 1
        elif x.sum() < -1:
            y = y - 1
        else:
            y = y * 0.5
        return y
     """, True),
    ("branches that return", """
        if x.max() > 0.5:
            return y * 2
        return y - 1
     """, True),
    ("a name assigned before the branch and read after it", """
        z = y * 3
        if x.sum() > 0:
            z = y * 2
        return z
     """, True),
    ("broadcasting between two tensors is unsafe", """
        if x.sum() > 0:
            y = y + x
        return y
     """, False),
    # `mean()` raises for an integer tensor; the `and` chain evaluated whole under compile would raise where
    # the original's short circuit never computed it (found by the property tests)
    ("a mean in the second part of an `and` chain is unsafe", """
        if y.sum() > 0 and x.mean() < 1:
            return x.abs()
        return x.abs()
     """, False),
]

# (name, body, the reason it is declined)
DECLINED = [
    ("a side that changes shape", """
        if x.sum() > 0:
            y = torch.cat((y, x))
        return y
     """, "can differ in shape"),
    ("a tuple target", """
        if x.sum() > 0:
            y, x = x, y
        return y
     """, "plain names"),
    ("a name defined on one side only", """
        if x.sum() > 0:
            z = y * 2
        return z
     """, "not assigned in every branch"),
    ("a name read before its branch assigns it", """
        if x.sum() > 0:
            z = y * 2
        else:
            y = z * 2
            z = y
        return z
     """, "read in a branch before that branch assigns it"),
]


def _compiled_graphs(fn, args) -> tuple[object, int]:
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    out = torch.compile(fn, backend=backend)(*args)
    return out, len(graphs)


@pytest.mark.parametrize("name,body,safe", FIXED, ids=[c[0] for c in FIXED])
def test_repair_computes_what_the_original_computes(name: str, body: str, safe: bool) -> None:
    source = _module(body)
    result = _repair(source, unsafe=not safe)
    assert result.error is None
    assert result.applied and {a.applicability for a in result.applied} == {"safe" if safe else "unsafe"}, \
        result.remaining
    if not safe:
        assert _repair(source).fixed == source, "an unsafe repair must not apply without --unsafe-fixes"
    assert _repair(result.fixed, unsafe=not safe).fixed == result.fixed  # fixing twice = fixing once
    original, repaired = _load(source, "orig"), _load(result.fixed, "fixed")
    for x, y in INPUTS:
        want = original.f(x.clone(), y.clone())
        assert _same(repaired.f(x.clone(), y.clone()), want)
        got, graphs = _compiled_graphs(repaired.f, (x.clone(), y.clone()))
        assert _same(got, want), (x, y, got, want)
        assert graphs == 1


@pytest.mark.parametrize("name,body,reason", DECLINED, ids=[c[0] for c in DECLINED])
def test_inexpressible_branches_are_declined(name: str, body: str, reason: str) -> None:
    source = _module(body)
    for unsafe in (False, True):
        result = _repair(source, unsafe=unsafe)
        assert result.fixed == source
        assert any(reason in r.reason for r in result.remaining), [r.reason for r in result.remaining]


def test_nested_if_repairs_the_inner_branch_only() -> None:
    """The inner ``if`` is repaired; the outer one, now holding a compound statement, is declined."""
    source = _module("""
        if x.sum() > 0:
            if y.sum() > 0:
                y = y * 2
        return y
    """)
    result = _repair(source)
    assert len(result.applied) == 1 and result.applied[0].line == 7
    assert any("nested compound statement" in r.reason for r in result.remaining)
    original, repaired = _load(source, "orig"), _load(result.fixed, "fixed")
    for x, y in INPUTS:
        want = original.f(x.clone(), y.clone())
        assert _same(repaired.f(x.clone(), y.clone()), want)
        assert _same(torch.compile(repaired.f, backend="eager")(x.clone(), y.clone()), want)


def test_sam_decoder_is_left_as_it_was() -> None:
    """The transformers SAM mask decoder: ``torch.cat`` grows dim 2 on one side only."""
    for unsafe in (False, True):
        result = _repair(SAM, unsafe=unsafe)
        assert result.fixed == SAM
        assert any("can differ in shape" in r.reason and "torch.cat" in r.reason for r in result.remaining)
    module = _load(SAM, "sam")
    torch.manual_seed(0)
    dec = module.Dec()
    image = torch.randn(2, 3)
    assert module.Dec.forward(dec, image, torch.zeros(2, 1, 0, 4)).shape == (2, 1, 1, 4)
    assert module.Dec.forward(dec, image, torch.ones(2, 1, 3, 4)).shape == (2, 1, 4, 4)


def test_eager_path_is_the_original_branch() -> None:
    """Eager runs the original ``if`` itself: its exception is raised as before."""
    source = _module("""
        if x.item() > 0:
            y = y * 2
        return y
    """)
    fixed = _repair(source).fixed
    assert "_mend_where(" in fixed
    repaired = _load(fixed, "fixed")
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"):
        repaired.f(torch.ones(2), torch.ones(2))


def test_gradient_gate_keeps_the_original_for_autograd() -> None:
    """``sqrt`` has an unbounded derivative: with grad enabled the original branch runs under compile too
    (a break, exact gradients); with grad disabled the selection is one graph. A second fix changes nothing."""
    source = _module("""
        if x.sum() > 0:
            y = torch.sqrt(y)
        return y
    """)
    fixed = _repair(source).fixed
    assert "or torch.is_grad_enabled():" in fixed
    assert _repair(fixed).fixed == fixed
    original, repaired = _load(source, "orig"), _load(fixed, "fixed")
    x, y = torch.tensor([1.0, 2.0]), torch.tensor([0.0, 4.0])
    with torch.no_grad():
        got, graphs = _compiled_graphs(repaired.f, (x, y))
    assert _same(got, original.f(x, y)) and graphs == 1
    y1 = y.clone().requires_grad_()
    y2 = y.clone().requires_grad_()
    original.f(x, y1).sum().backward()
    got, graphs = _compiled_graphs(repaired.f, (x, y2))
    got.sum().backward()
    assert graphs > 1  # the original branch, as before the repair
    assert _same(y2.grad, y1.grad)


FP16_GUARD = _module("""
    y = y * 2
    if y.dtype == torch.float16 and (torch.isinf(y).any() or torch.isnan(y).any()):
        clamp_value = torch.finfo(y.dtype).max - 1000
        y = torch.clamp(y, min=-clamp_value, max=clamp_value)
    return y + x
""")


def test_fp16_overflow_guard_is_one_graph_and_exact() -> None:
    """The BART-family encoder layer's fp16 guard: reported (only when float16), repaired safely; in
    float16 the original breaks at each `.any()` it evaluates, the repair is one graph, bit for bit the same with and without overflow."""
    result = _repair(FP16_GUARD)
    assert [(a.code, a.applicability) for a in result.applied] == [("MND201", "safe")]
    assert "elif y.dtype == torch.float16:" in result.fixed
    assert _repair(result.fixed).fixed == result.fixed
    original, repaired = _load(FP16_GUARD, "orig"), _load(result.fixed, "fixed")
    half = torch.float16
    cases = [
        (torch.zeros(3, dtype=half), torch.tensor([1.0, 40000.0, -3.0], dtype=half)),  # inf after * 2
        (torch.zeros(3, dtype=half), torch.tensor([1.0, float("nan"), -3.0], dtype=half)),
        (torch.zeros(3, dtype=half), torch.tensor([1.0, 2.0, -3.0], dtype=half)),
        (torch.zeros(3), torch.tensor([1.0, float("inf"), -3.0])),  # float32: the guard never runs
    ]
    for x, y in cases:
        want = original.f(x.clone(), y.clone())
        assert _same(repaired.f(x.clone(), y.clone()), want)
        got, graphs = _compiled_graphs(repaired.f, (x.clone(), y.clone()))
        assert _same(got, want) and graphs == 1, (y, got, want, graphs)
        _, graphs_before = _compiled_graphs(original.f, (x.clone(), y.clone()))
        assert (graphs_before > 1) == (y.dtype == half)  # a break per evaluated `.any()` test


MASKED_UPDATE = """
import torch


@torch.compile
def f(h: torch.Tensor, attention_mask=None):
    h = h.sin()
    if attention_mask is not None and not torch.all(attention_mask == 1):
        h = (h * attention_mask[:, None, :]).to(h.dtype)
    return h.cos()
"""


def test_masked_update_of_zamba_is_repaired_unsafe() -> None:
    """Zamba/Mamba's ``if not torch.all(mask == 1): h = h * mask[:, None, :]``: only the mask is
    indexed, so the product has ``h``'s shape or ``_mend_where`` falls back. Unsafe (the product of two
    tensors is computed on the side not taken); one graph under no_grad, values bit for bit the same."""
    assert _repair(MASKED_UPDATE).fixed == MASKED_UPDATE
    result = _repair(MASKED_UPDATE, unsafe=True)
    assert [(a.code, a.applicability) for a in result.applied] == [("MND201", "unsafe")]
    original, repaired = _load(MASKED_UPDATE, "orig"), _load(result.fixed, "fixed")
    h = torch.randn(2, 3, 4)
    for mask in (torch.ones(2, 4, dtype=torch.long), torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]]), None):
        want = original.f(h.clone(), mask)
        assert _same(repaired.f(h.clone(), mask), want)
        with torch.no_grad():
            got, graphs = _compiled_graphs(repaired.f, (h.clone(), mask))
            _, graphs_before = _compiled_graphs(original.f, (h.clone(), mask))
        assert _same(got, want) and graphs == 1
        assert graphs_before == (1 if mask is None else 2)


def test_masked_update_that_broadcasts_wider_falls_back_to_the_original() -> None:
    """When the mask widens ``h`` (here ``h`` is 1-d), torch.where cannot select: ``_mend_where`` keeps
    the original selection (a break), never another value."""
    result = _repair(MASKED_UPDATE, unsafe=True)
    original, repaired = _load(MASKED_UPDATE, "orig"), _load(result.fixed, "fixed")
    h, mask = torch.randn(4), torch.tensor([[1, 0, 1, 1], [1, 1, 1, 1]])
    want = original.f(h.clone(), mask)
    with torch.no_grad():
        got, graphs = _compiled_graphs(repaired.f, (h.clone(), mask))
    assert _same(got, want) and graphs > 1


T5_GUARDS = _module("""
    if y.dtype == torch.float16 and torch.isinf(y).any():
        clamp_value = torch.finfo(y.dtype).max - 1000
        y = torch.clamp(y, min=-clamp_value, max=clamp_value)
    y = y * 2
    if y.dtype == torch.float16 and torch.isinf(y).any():
        clamp_value = torch.finfo(y.dtype).max - 1000
        y = torch.clamp(y, min=-clamp_value, max=clamp_value)
    return y + x
""")


def test_temporary_reassigned_before_every_later_read_is_a_branch_temporary() -> None:
    """T5-family layers repeat the guard, each assigning ``clamp_value`` before reading it: the value
    of one guard is dead after it, so each repair computes it plainly (safe, one graph in float16)."""
    result = _repair(T5_GUARDS)
    assert [(a.code, a.applicability) for a in result.applied] == [("MND201", "safe")] * 2, result.remaining
    original, repaired = _load(T5_GUARDS, "orig"), _load(result.fixed, "fixed")
    half = torch.float16
    for y in (torch.tensor([1.0, float("inf")], dtype=half), torch.tensor([1.0, 40000.0], dtype=half),
              torch.tensor([1.0, 2.0], dtype=half)):
        x = torch.zeros(2, dtype=half)
        want = original.f(x.clone(), y.clone())
        got, graphs = _compiled_graphs(repaired.f, (x.clone(), y.clone()))
        assert _same(repaired.f(x.clone(), y.clone()), want) and _same(got, want) and graphs == 1


def test_a_temporary_another_branch_reads_first_is_not_a_temporary() -> None:
    """``t`` is read by the else branch before any assignment there: it keeps its old value on that
    path, so the chain must not compute the if-branch's ``t`` plainly."""
    source = _module("""
        t = y + 1
        if x.sum() > 0:
            t = y * 2
            z = t + 1
        else:
            z = t - 1
        return z
    """)
    result = _repair(source)
    original, repaired = _load(source, "orig"), _load(result.fixed, "fixed")
    for x, y in INPUTS:
        want = original.f(x.clone(), y.clone())
        got, _ = _compiled_graphs(repaired.f, (x.clone(), y.clone()))
        assert _same(got, want) and _same(repaired.f(x.clone(), y.clone()), want)


ZAMBA_CONV = """
import torch


@torch.compile
def f(x: torch.Tensor, attention_mask=None):
    dtype = x.dtype
    h = x.sin().to(torch.float64) if x.dtype == torch.float16 else x.sin()
    if attention_mask is not None and not torch.all(attention_mask == 1):
        dtype = h.dtype
        h = (h * attention_mask[:, :, None]).to(dtype)
    return h.to(dtype)
"""


def test_dtype_read_in_a_masked_update_is_selected_while_tracing() -> None:
    """Zamba2's convolution: the branch also assigns ``dtype = hidden_states.dtype``, a Python value
    torch.where cannot select. ``_mend_same`` keeps the old value when the new one is the same dtype
    (decided while tracing: one graph), and selects as the original did when it is not (float16 input,
    float64 ``h``: a break there, never another value)."""
    assert _repair(ZAMBA_CONV).fixed == ZAMBA_CONV  # the masked update is unsafe
    result = _repair(ZAMBA_CONV, unsafe=True)
    assert [(a.code, a.applicability) for a in result.applied] == [("MND201", "unsafe")], result.remaining
    assert "dtype = _mend_same(" in result.fixed
    assert _repair(result.fixed, unsafe=True).fixed == result.fixed
    original, repaired = _load(ZAMBA_CONV, "orig"), _load(result.fixed, "fixed")
    masks = (torch.ones(2, 3, dtype=torch.long), torch.tensor([[1, 1, 0], [1, 1, 1]]), None)
    for dtype in (torch.float32, torch.float16):
        x = torch.randn(2, 3, 4).to(dtype)
        for mask in masks:
            want = original.f(x.clone(), mask)
            assert _same(repaired.f(x.clone(), mask), want)
            with torch.no_grad():
                got, graphs = _compiled_graphs(repaired.f, (x.clone(), mask))
                _, graphs_before = _compiled_graphs(original.f, (x.clone(), mask))
            assert _same(got, want), (dtype, mask)
            assert graphs == 1 if mask is None or dtype == torch.float32 else graphs > 1, (dtype, mask, graphs)
            assert graphs_before == (1 if mask is None else 2)


def test_a_python_value_other_than_a_dtype_or_device_is_declined() -> None:
    source = _module("""
        n = 1
        if x.sum() > 0:
            n = 2
        return y * n
    """)
    result = _repair(source, unsafe=True)
    assert result.fixed == source
    assert any("cannot prove `n` holds a tensor" in r.reason for r in result.remaining), result.remaining


def _longrope(prep_short: str = "self.original_inv_freq = self.original_inv_freq.to(device)") -> str:
    from tests.rewriter.conftest import FIXTURES

    source = (FIXTURES / "where_buffer.in.py").read_text().split("\n", 1)[1]
    return source.replace("self.original_inv_freq = self.original_inv_freq.to(device)", prep_short)


def test_buffer_selection_is_found_through_the_decorator_and_repaired_unsafe() -> None:
    """LongRoPE's branch sits in a function the decorated ``forward``'s wrapper calls: the analyzer
    follows the decorator to it; the repair registers the selected buffer once (unsafe only)."""
    source = _longrope()
    safe = _repair(source)
    assert safe.fixed == source
    assert any(r.unsafe_available for r in safe.remaining), safe.remaining
    result = _repair(source, unsafe=True)
    assert [(a.code, a.applicability) for a in result.applied] == [("MND201", "unsafe")]
    assert 'self.register_buffer("inv_freq", _mend_where(seq_len > original_max_position_embeddings, ' \
           'self.long_inv_freq, self.original_inv_freq), persistent=False)' in result.fixed
    assert ".copy_(" not in result.fixed


@pytest.mark.parametrize("prep,reason", [
    ("self.calls = self.calls + 1", "cannot run on both sides"),
    ("self.long_inv_freq = self.long_inv_freq.to(device)", "which the other side reads"),
])
def test_buffer_selection_with_other_preparations_is_declined(prep: str, reason: str) -> None:
    source = _longrope(prep)
    result = _repair(source, unsafe=True)
    assert result.fixed == source
    assert any(reason in r.reason for r in result.remaining), [r.reason for r in result.remaining]


def test_buffer_selection_whose_preparation_sets_a_name_read_later_is_declined() -> None:
    """``X.a, _ = init(...)`` also assigns ``_``: compiled code would assign it on both sides."""
    source = _longrope().replace("    def wrapper(self, x, position_ids):",
                                 "        return _\n\n    def wrapper(self, x, position_ids):")
    reason = "`_`, assigned by one side, is read after the `if`"
    result = _repair(source, unsafe=True)
    assert result.fixed == source
    assert any(reason in r.reason for r in result.remaining), [r.reason for r in result.remaining]


COUNT_CHECK = """
from typing import Optional

import torch


@torch.compile
def f(input_ids: Optional[torch.LongTensor], features: torch.Tensor):
    if input_ids is None:
        n_tokens = (features == 0).sum()
    else:
        n_tokens = (input_ids == 7).sum(dim=1).sum(dim=0)
    n_features = features.shape[0] * features.shape[1]
    if n_tokens != n_features:
        raise ValueError(f"Image features and image tokens do not match: tokens: {n_tokens}, features {n_features}")
    return features.sum(-1) * n_tokens
"""


def test_count_check_the_function_cannot_type_is_checked_through_as_tensor() -> None:
    """Aria's count check: the analyzer sees a tensor condition that the rewriter's facts cannot show
    (``Optional[torch.LongTensor]``, the count assigned on two paths); ``torch.as_tensor`` keeps a tensor as it is, so the check runs in
    the graph (one graph) and the boundary restores the class, with the f-string's fields as source."""
    result = _repair(COUNT_CHECK, unsafe=True)
    assert [(a.code, a.applicability) for a in result.applied] == [("MND203", "unsafe")], result.remaining
    assert "torch.as_tensor(n_tokens != n_features)" in result.fixed
    original, repaired = _load(COUNT_CHECK, "orig"), _load(result.fixed, "fixed")
    ids, feats = torch.tensor([[7, 7, 1], [7, 7, 7]]), torch.randn(5, 1, 3)
    want = original.f(ids, feats)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    inner = getattr(repaired.f, "__wrapped__", repaired.f)  # the file's own boundary, compiled here
    compiled = repaired._mend_restore_exceptions(torch.compile(inner, backend=backend))
    assert _same(compiled(ids, feats), want) and len(graphs) == 1
    with pytest.raises(ValueError, match="tokens: 5, features 4"):
        original.f(ids, feats[:4])
    with pytest.raises(ValueError, match=r"^Image features and image tokens do not match: tokens: \{n_tokens\}, "
                                         r"features \{n_features\}$"):
        compiled(ids, feats[:4])
