"""mend's helper functions (:mod:`mend.rewriter.helpers`) as plain functions: each one's eager answer is the
original expression's, and under torch.compile (Dynamo's ``eager`` backend) the same, in one graph where the
helper promises it."""

from __future__ import annotations

import sys
import types

import pytest

torch = pytest.importorskip("torch")

from mend.rewriter import helpers as h  # noqa: E402 - after torch is known to be there


def _compiled(fn, *args):
    """``fn(*args)`` under torch.compile: (result, graph breaks)."""
    counters = torch._dynamo.utils.counters
    torch._dynamo.reset()
    counters.clear()
    out = torch.compile(fn, backend="eager")(*args)
    return out, sum(counters["graph_break"].values())


@pytest.mark.parametrize("cond", [True, False])
def test_where_selects_as_the_if_does(cond) -> None:
    a, b = torch.arange(3.0), -torch.arange(3.0)
    c = torch.tensor(cond)
    assert torch.equal(h.where(c, a, b), a if cond else b)
    assert h.where(c, (a, b), (b, a))[0] is not None
    assert h.where(c, None, None) is None
    out, breaks = _compiled(lambda c, a, b: h.where(c, a, b) * 2, c, a, b)
    assert torch.equal(out, (a if cond else b) * 2) and breaks == 0


def test_where_falls_back_to_the_selection_for_other_values() -> None:
    assert h.where(torch.tensor(True), 1, 2) == 1
    assert h.where(torch.tensor(False), torch.ones(2), torch.ones(3)).shape == (3,)


def test_same_is_the_object_itself_when_both_sides_are_it() -> None:
    assert h.same(torch.tensor(True), torch.float32, torch.float32) is torch.float32
    assert h.same(False, torch.float16, torch.float32) is torch.float32


def test_elif_and_truth_and_any() -> None:
    t, f = torch.tensor(True), torch.tensor(False)
    assert bool(h.elif_(f, t)) and not bool(h.elif_(t, t)) and not bool(h.elif_(f, f))
    h.truth(torch.tensor([1.0]))  # one element: nothing to ask
    with pytest.raises(RuntimeError):
        h.truth(torch.ones(2))  # as `if torch.ones(2):` raises
    assert bool(h.any_(torch.tensor([0, 2]))) and not bool(h.any_(torch.tensor([0, 2]), every=True))
    assert bool(h.any_([0, 1])) is True


def test_masked_reductions_and_stores_equal_the_originals() -> None:
    t = torch.arange(6.0).reshape(3, 2)
    mask = torch.tensor([True, False, True])
    assert torch.equal(h.masked_sum(t, mask), t[mask].sum())
    assert torch.equal(h.masked_mean(t, mask), t[mask].mean())
    for fn in (h.masked_sum, h.masked_mean):
        out, breaks = _compiled(fn, t, mask)
        assert torch.allclose(out, fn(t, mask)) and breaks == 0
    a, b = t.clone(), t.clone()
    rows = torch.full_like(t, 9.0)
    a[mask] = rows[mask]
    h.routed_store(b, mask, rows)
    assert torch.equal(a, b)
    assert bool(h.tensor_equal(t, t.clone())) and not bool(h.tensor_equal(t, t + 1))
    assert h.tolist_len(torch.ones(4, 2)) == 4


def test_emit_makes_the_call_in_its_module_eagerly_and_from_a_graph(capsys) -> None:
    module = types.ModuleType("mend_test_emit_caller")
    sys.modules[module.__name__] = module
    lines: list[str] = []
    module.report = lambda *args, **kwargs: lines.append(" ".join(map(str, args)) + str(sorted(kwargs.items())))
    x = torch.ones(2, 3)
    h.emit(module.__name__, "report:sep 1.tuple 2.format.1", "shape", x, "n={}", 5, "-")
    assert lines == ["shape (2, 3) n=5[('sep', '-')]"]

    def f(x):
        h.emit(module.__name__, "report 0.when", x.sum() > 100, "never")
        h.emit(module.__name__, "report 0.when", x.sum() > 0, "positive")
        return x * 2

    out, breaks = _compiled(f, x)
    assert torch.equal(out, x * 2) and breaks == 0
    assert lines[1:] == ["positive[]"]


def test_emit_of_a_tensor_that_requires_grad_is_made_as_written() -> None:
    module = types.ModuleType("mend_test_emit_grad")
    sys.modules[module.__name__] = module
    seen: list = []
    module.report = seen.append
    w = torch.ones(2, requires_grad=True)
    h.emit(module.__name__, "report", w * 2)
    assert seen and seen[0].grad_fn is not None  # its text names the grad_fn, as the original's does


def test_restore_exceptions_gives_back_the_original_type() -> None:
    def f(x):
        raise RuntimeError("[mend:ValueError] bad size")

    with pytest.raises(ValueError, match="bad size"):
        h.restore_exceptions(f)(1)


def _loop_drawn(x):
    for _ in range(3):
        x = h.drawn(x)
        if x.sum() > 0:  # noqa: MND201 - breaks in a loop: Dynamo skips the whole frame
            x = x - 1
    return x


def _loop_where(x):
    for _ in range(3):
        x = h.where(x.sum() > 100, x * 2, x)
        if x.sum() > 0:  # noqa: MND201
            x = x - 1
    return x


def _loop_masked_sum(x):
    for _ in range(3):
        x = x + h.masked_sum(x, x > 0)
        if x.sum() > 0:  # noqa: MND201
            x = x - 1
    return x


def _loop_emit(x):
    for _ in range(3):
        h.emit(__name__, "print", x.shape[0])
        if x.sum() > 0:  # noqa: MND201
            x = x - 1
    return x


@pytest.mark.parametrize("loop", [_loop_drawn, _loop_where, _loop_masked_sum, _loop_emit])
def test_a_helper_called_from_a_skipped_frame_runs_as_python(loop, capsys) -> None:
    """Where Dynamo skips the caller's frame, a helper runs as the original lines it stands for did: no
    compiled graph of its own per call (a LayerDrop loop that still breaks got one more graph per run)."""
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    counter = CompileCounter()
    out = torch.compile(loop, backend=counter)(torch.ones(3))
    compiled_printed = capsys.readouterr().out
    assert torch.equal(out, loop(torch.ones(3))) and capsys.readouterr().out == compiled_printed
    assert counter.frame_count == 0


def test_a_helper_called_from_compiled_code_is_traced_inline() -> None:
    def step(x):
        u = h.drawn(torch.rand([]))
        return h.where(x.sum() > 100, x * 2, x) + 0 * u

    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    counter = CompileCounter()
    torch.manual_seed(0)
    out = torch.compile(step, backend=counter)(torch.ones(3))
    after_compiled = torch.rand(2)
    torch.manual_seed(0)
    assert torch.equal(out, step(torch.ones(3))) and torch.equal(after_compiled, torch.rand(2))
    assert counter.frame_count == 1


def _experts(token_states, weights, counts):
    """Rows grouped by expert, each group's product stored into its slice (aria's sequential_experts_gemm)."""
    output = torch.zeros(token_states.shape[0], weights.shape[-1])
    bounds = torch.cat((torch.zeros(1, dtype=torch.long), torch.cumsum(counts, 0)))
    for e in range(weights.shape[0]):
        start, end = bounds[e], bounds[e + 1]
        rows = h.captured(lambda: token_states[start:end])  # noqa: B023 - called at once
        output[h.index(start):h.index(end)] = rows @ weights[e]
    return output


@pytest.mark.parametrize("active", [True, False])
def test_index_captures_a_stored_slice_bound_only_where_torch_can_store_into_it(active, monkeypatch) -> None:
    """torch 2.13 traces a store into a slice of captured bounds; torch 2.11 fails at the store
    (``constrain_as_size_example``): there ``index`` hands the tensor on and the store breaks as the original."""
    from torch._dynamo.testing import CompileCounter

    monkeypatch.setattr(h.index, "active", active)
    x = torch.randn(10, 4, requires_grad=True)
    w, counts = torch.randn(3, 4, 5, requires_grad=True), torch.tensor([3, 3, 4])
    torch._dynamo.reset()
    counter = CompileCounter()
    counters = torch._dynamo.utils.counters
    counters.clear()
    out = torch.compile(_experts, backend=counter)(x, w, counts)
    out.sum().backward()
    assert torch.allclose(out, _experts(x, w, counts))
    assert sum(counters["graph_break"].values()) == 0 or not active
    assert counter.frame_count == 1 or not active
    kind = torch.compile(lambda t: isinstance(h.index(t), torch.Tensor), backend="eager", fullgraph=False)
    torch._dynamo.reset()
    assert kind(torch.tensor(3)) == (not active)  # a captured number, or the tensor handed on

def test_index_is_active_from_torch_2_13() -> None:
    assert h.index.active == (tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 13))
