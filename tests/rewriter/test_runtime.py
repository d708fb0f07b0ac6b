"""Runtime proof for every fixture: graphs before > 1, after == 1, same outputs, same exceptions.

Each fixture (original and repaired) is executed in-process with its ``@torch.compile`` decorator
removed, then compiled with a counting backend (equivalent to ``backend="eager"`` for break counts).
"""

from __future__ import annotations

import sys
import types

import pytest

torch = pytest.importorskip("torch")

from mend.rewriter.runtime import restore_exceptions  # noqa: E402
from tests.rewriter.conftest import FIXTURES  # noqa: E402


def _load(name: str, kind: str, backend=None) -> dict:
    """Execute a fixture; ``@torch.compile`` compiles with ``backend`` (removed when None)."""
    src = (FIXTURES / f"{name}.{kind}.py").read_text()
    src = src.replace("@torch.compile\n", "@_mend_test_compile\n" if backend else "")
    module = types.ModuleType(f"fixture_{name}_{kind}")  # registered as an import does: kept messages find
    sys.modules[module.__name__] = module  # their callee through it
    ns: dict = module.__dict__
    ns["_mend_test_compile"] = lambda fn: torch.compile(fn, backend=backend)
    exec(compile(src, f"{name}.{kind}.py", "exec"), ns)
    return ns


def _compiled_run(name: str, kind: str, calls, inner=None, fail: bool = False):
    """Dynamo's graphs for the first call and every call's outputs (an exception as its type and text);
    ``inner``: the backend that compiles each graph (an AOTAutograd one traces it again, as Inductor does;
    default: run it as it is); ``fail``: the backend raises after ``inner`` compiled the graph."""
    from torch._dynamo.backends.registry import lookup_backend

    graphs = []
    compile_graph = lookup_backend(inner) if inner else (lambda gm, example_inputs: gm.forward)

    def backend(gm, example_inputs):
        graphs.append(gm)
        compiled = compile_graph(gm, example_inputs)
        if fail:
            raise RuntimeError("a backend failure after its trace")
        return compiled

    torch._dynamo.reset()
    fn = _load(name, kind, backend)["f"]
    outs = []
    for i, args in enumerate(calls):
        try:
            outs.append(fn(*args))
        except Exception as exc:  # compared with the eager original
            outs.append((type(exc), str(exc)))
        if i == 0:
            first = len(graphs)
    return first, outs


def _graphs_and_outputs(fn, calls):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend)
    outs = []
    for args in calls:
        try:
            outs.append(compiled(*args))
        except Exception as exc:
            outs.append((type(exc), str(exc)))
    return len(graphs), outs


def _eager(fn, calls):
    outs = []
    for args in calls:
        try:
            outs.append(fn(*args))
        except Exception as exc:
            outs.append((type(exc), str(exc)))
    return outs


def _same(a, b) -> None:
    for x, y in zip(a, b, strict=True):
        if isinstance(x, tuple):
            assert x == y
        else:
            torch.testing.assert_close(y, x, rtol=1.3e-6, atol=1e-5, equal_nan=True)


def _inf(shape, dtype=torch.float32):
    t = torch.randn(*shape).to(dtype)
    t.view(-1)[0] = float("inf")
    return t


def _key_mask(batch, n, masked_rows):
    """An additive attention mask masking the last key of every row, and every key of ``masked_rows``."""
    mask = torch.zeros(batch, n, n)
    mask[:, :, -1] = torch.finfo(torch.float32).min
    for b in masked_rows:
        mask[b] = torch.finfo(torch.float32).min
    return mask


g = torch.Generator().manual_seed(0)
torch.manual_seed(0)
INPUTS = {
    "where_else_less": lambda: [(_inf((4, 5)),), (torch.randn(4, 5),)],
    "where_elif": lambda: [(torch.randn(6) + 1, torch.randn(6)), (torch.randn(6) - 3, torch.randn(6)),
                           (torch.zeros(6), torch.randn(6))],
    "where_return": lambda: [(torch.randn(5),), (torch.rand(5) * 0.4,)],
    "where_static_prefix": lambda: [(_inf((5,), torch.float16),), (torch.randn(5),)],
    "scalars": lambda: [(torch.randn(6), torch.rand(6) > 0.5, torch.randn(5)),
                        (torch.randn(6), torch.zeros(6, dtype=torch.bool), torch.randn(5))],
    "masked": lambda: [(torch.randn(4, 3), torch.rand(4, 3) > 0.5)],
    "moe_routing": lambda: [(torch.randn(6, 8),), (torch.randn(1, 8),), (_inf((5, 8)),)],
    "grouped_experts": lambda: [(torch.randn(6, 8),), (torch.randn(1, 8),), (torch.randn(9, 8),)],
    "int_buffers": lambda: [(torch.randn(1, 2, 16),), (torch.randn(1, 2, 5),), (torch.randn(2, 2, 17),)],
    "int_buffers_attr": lambda: [(torch.randn(1, 2, 16),), (torch.randn(1, 2, 5),), (torch.randn(2, 2, 17),)],
    "small": lambda: [(torch.randn(3),)],
    "guard_print": lambda: [(torch.randn(3),)],
    "keep_warning": lambda: [(torch.randn(3),)],
    "capture_mask": lambda: [(torch.randn(3), torch.arange(5)), (torch.randn(2), torch.arange(4))],
    "mask_store": lambda: [(torch.tensor([[[1, 1], [0, 1]], [[1, 1], [1, 1]]], dtype=torch.bool),),
                           (torch.rand(3, 4, 5) > 0.2,)],
    "rnn": lambda: [(torch.randn(5, 2, 8),), (torch.randn(3, 1, 8),)],
    "eager_only_item": lambda: [(torch.tensor([[1, 7, 7], [7, 2, 3]]), torch.randn(3, 4)),
                                (torch.tensor([[7, 1]]), torch.randn(1, 5))],
    "validation_count": lambda: [(torch.tensor([[1, 7, 7], [7, 2, 3]]), torch.randn(3, 4)),
                                 (torch.tensor([[7, 1]]), torch.randn(1, 5))],
    "mask_store_param": lambda: [(torch.randn(2, 3, 2), torch.tensor([[[1, 1], [0, 1], [1, 1]]] * 2, dtype=torch.bool)),
                                 (torch.randn(1, 3, 2), torch.zeros(1, 3, 2, dtype=torch.bool))],
    "constant_method": lambda: [(torch.randn(2, 8, 8),), (torch.randn(1, 5, 8),)],
    "routed_store": lambda: [(torch.randn(2, 6, 8),), (torch.randn(1, 3, 8),), (_inf((2, 5, 8)),)],
    "mask_drop": lambda: [(torch.randn(2, 5, 8), torch.ones(2, 5, dtype=torch.bool)),
                          (torch.randn(2, 5, 8), torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)),
                          (torch.randn(1, 3, 8), torch.ones(1, 3, dtype=torch.bool))],
    "grouped_rows": lambda: [(torch.randn(5, 3, 8), torch.tensor([0, 0, 2, 1, 1])), (torch.randn(1, 4, 8), torch.tensor([1])),
                             (torch.randn(3, 2, 8), torch.tensor([2, 2, 0]))],
    "fallback_select": lambda: [(torch.randn(2, 5, 8), _key_mask(2, 5, masked_rows=())),
                                (torch.randn(2, 5, 8), _key_mask(2, 5, masked_rows=(1,))),
                                (torch.randn(3, 4, 8), None)],
    "store_mask": lambda: [(torch.randn(3, 2, 4), torch.zeros(3, 5, dtype=torch.long)),
                           (torch.randn(2, 2, 4), torch.tensor([[0, 0, 0], [1, 0, 2]])),
                           (torch.randn(2, 2, 4), torch.tensor([[1, 0], [3, 1]]))],
    "store_select": lambda: [(torch.zeros(3, 2, 4),), (torch.randn(3, 2, 4) * torch.tensor([0.0, 1.0, 0.0])[:, None, None],)],
    "tensor_check": lambda: [(torch.randn(3, 5), torch.tensor([0, 4, 2])), (torch.randn(2, 4), torch.tensor([1, 1]))],
    "kept_range": lambda: [(torch.randn(2, 5, 8), torch.randn(2, 5, 8)), (torch.randn(1, 7, 8), None)],
    "kept_values": lambda: [(torch.randn(2, 4, 4, 4), torch.randn(2, 4, 2, 2)),
                            (torch.randn(1, 4, 6, 2), torch.randn(1, 4, 3, 1))],
    "numpy_numbers": lambda: [(torch.randn(2, 8, 4),), (torch.randn(3, 30, 4),)],
    "validation": lambda: [(torch.randn(3, 4), torch.ones(3, 4, dtype=torch.bool)),
                           (torch.randn(3, 4), torch.zeros(3, 4, dtype=torch.bool))],
    "validation_fstring": lambda: [(torch.tensor([[7, 7, 1], [7, 7, 0]]), torch.randn(2, 2, 3)),
                                   (torch.tensor([[7, 1]]), torch.randn(1, 1, 3))],
    "capture": lambda: [(torch.randn(8),)],
    "capture_scoped": lambda: [(torch.randn(6), torch.tensor([True, False, True, True, False, False]),
                                torch.tensor([1, 2])),
                               (torch.randn(6), torch.tensor([False, True, False, False, False, True]),
                                torch.tensor([3, 0]))],
    "capture_stored_slice": lambda: [(torch.randn(6, 2), torch.tensor([1, 2, 3])),
                                     (torch.randn(5, 2), torch.tensor([0, 5, 0]))],
    "cond_submodule": lambda: [(torch.randn(3, 8) * 10,), (torch.randn(3, 8) * 1e-3,)],
    "cond_else": lambda: [(torch.rand(2, 4) + 0.1,), (-torch.rand(2, 4) - 0.1,)],
    "report_if": lambda: [(torch.randn(2, 3), torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])),
                          (torch.randn(2, 3), torch.zeros(2, 3)), (torch.randn(2, 3) * 1e5, torch.ones(2, 3))],
    "where_buffer": lambda: [(torch.randn(2, 6, 8), torch.arange(6)[None].expand(2, 6)),
                             (torch.randn(2, 12, 8), torch.arange(12)[None].expand(2, 12)),
                             (torch.randn(2, 6, 8), torch.arange(6)[None].expand(2, 6))],
    "mask_update": lambda: [(torch.randn(3, 4), torch.tensor([0, 3, 1])), (torch.randn(2, 5), torch.tensor([1, 2])),
                            (torch.randn(4, 4), torch.tensor([5, 0, 0, 5]))],
    "assert_not": lambda: [(torch.randn(2, 3), torch.tensor(2.0)), (torch.randn(4), torch.tensor(0.5))],
    "layerdrop_continue": lambda: [(torch.randn(2, 5, 8),), (torch.randn(1, 3, 8),)],
    "layerdrop_flag": lambda: [(torch.randn(2, 5, 8),), (torch.randn(1, 3, 8),)],
    "layerdrop_ifexp": lambda: [(torch.randn(2, 5, 8),), (torch.randn(1, 3, 8),)],
    "assert_item": lambda: [(torch.randn(2, 5), torch.tensor([3, 5]), torch.tensor([True, False])),
                            (torch.randn(3, 4), torch.tensor([1, 2, 4]), torch.tensor([False, True]))],
}


@pytest.mark.parametrize("name", ["cond_else", "cond_submodule"])
def test_cond_fixture_backward(name: str) -> None:
    """torch.cond under compile gives the original's gradients (input and parameters) on both sides."""
    cases = INPUTS[name]()
    for (x,) in cases:
        grads = []
        for kind, backend in (("in", None), ("out", "eager")):
            torch._dynamo.reset()
            ns = _load(name, kind, backend)
            xi = x.clone().requires_grad_()
            ns["f"](xi).square().sum().backward()
            module = next(v for v in ns.values() if isinstance(v, torch.nn.Module))
            grads.append([xi.grad] + [p.grad for p in module.parameters()])
        for a, b in zip(*grads, strict=True):
            assert b is not None
            if a is None:
                # Parameters of the branch not taken get zero gradients from torch.cond (not None).
                assert not b.any()
            else:
                torch.testing.assert_close(b, a, rtol=1.3e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_fixture_runtime(name: str, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONBREAKPOINT", "0")
    torch.manual_seed(0)
    calls = INPUTS[name]()
    eager = _eager(_load(name, "in")["f"], calls)
    _same(eager, _eager(_load(name, "out")["f"], calls))
    graphs_before, _ = _compiled_run(name, "in", calls)
    graphs_after, compiled = _compiled_run(name, "out", calls)
    assert graphs_before > 1
    assert graphs_after == 1
    _same(eager, compiled)


@pytest.mark.parametrize("name", ["layerdrop_continue", "layerdrop_flag", "layerdrop_ifexp"])
def test_layerdrop_guard_keeps_the_draws(name: str) -> None:
    """LayerDrop in training (``p > 0 and u < p``): with layerdrop 0.0 the repaired model compiles to one
    graph (the original breaks) and gives the original's outputs, gradients and RNG state after the call,
    also through AOTAutograd (which drops an operator nothing reads: the draw the test no longer reads is
    kept by ``_mend_drawn``); with layerdrop 0.5 (the break stays) eager outputs and RNG state are the
    original's, bit for bit."""
    from torch._dynamo.backends.registry import lookup_backend

    (x,), _ = INPUTS[name]()
    for layerdrop in (0.0, 0.5):
        results = []
        for kind, backend in (("in", None), ("out", None), ("in", "eager"), ("out", "eager"),
                              ("in", "aot_eager"), ("out", "aot_eager")):
            if backend is not None and layerdrop:
                continue
            graphs = []

            def counting(gm, example_inputs, graphs=graphs, backend=backend):
                graphs.append(gm)
                return gm.forward if backend == "eager" else lookup_backend(backend)(gm, example_inputs)

            torch._dynamo.reset()
            ns = _load(name, kind, counting if backend else None)
            module = next(v for v in ns.values() if isinstance(v, torch.nn.Module))
            assert module.training
            module.layerdrop = layerdrop
            torch.manual_seed(1)
            xi = x.clone().requires_grad_()
            out = ns["f"](xi)
            out.square().sum().backward()
            grads = [xi.grad] + [p.grad for p in module.parameters()]
            results.append((kind, backend, len(graphs), out, grads, torch.get_rng_state()))
        (_, _, _, out0, grads0, rng0), *others = results
        for kind, backend, graphs, out, grads, rng in others:
            assert torch.equal(out, out0), (kind, backend, layerdrop)
            assert all((a is None and b is None) or torch.equal(a, b)  # a dropped layer has no gradient
                       for a, b in zip(grads, grads0, strict=True)), (kind, backend, layerdrop)
            assert torch.equal(rng, rng0), (kind, backend, layerdrop)
            if backend is not None:
                assert graphs == (1 if kind == "out" else 2), (kind, graphs)
        if layerdrop:  # the draws decided: some layer was dropped, for this seed
            assert any(g is None for g in grads0)


def test_layerdrop_ifexp_compiles_as_one_graph_in_training() -> None:
    """M2M100's LayerDrop (``True if self.training and (u < p) else False``) under
    ``torch.compile(fullgraph=True)`` in train mode with backward: the original fails (data-dependent
    branching), the repaired encoder compiles, with eager's outputs, gradients and RNG state after the call."""
    from torch._dynamo.exc import Unsupported

    (x,), _ = INPUTS["layerdrop_ifexp"]()
    results = []
    for kind, compiled in (("in", False), ("out", False), ("out", True), ("in", True)):
        torch._dynamo.reset()
        encoder = _load("layerdrop_ifexp", kind)["encoder"]
        assert encoder.training
        fn = torch.compile(encoder, fullgraph=True, backend="aot_eager") if compiled else encoder
        torch.manual_seed(2)
        xi = x.clone().requires_grad_()
        if kind == "in" and compiled:
            with pytest.raises(Unsupported, match="Data-dependent branching"):
                fn(xi)
            continue
        hidden, states = fn(xi)
        (hidden.square().sum() + torch.stack(states).sum()).backward()
        results.append((hidden, [xi.grad] + [p.grad for p in encoder.parameters()], torch.get_rng_state()))
    (out0, grads0, rng0), *others = results
    for out, grads, rng in others:
        assert torch.equal(out, out0) and torch.equal(rng, rng0)
        assert all(torch.equal(a, b) for a, b in zip(grads, grads0, strict=True))


def test_layerdrop_python_draw_keeps_the_python_random_stream() -> None:
    """MusicGen's LayerDrop (``u = random.uniform(0, 1)``, ``if self.training and (u < p):``), repaired: eager
    outputs, gradients and Python's random state are the original's (p 0.0 and 0.5); compiled with
    ``fullgraph=True`` in train mode (the original raises), the same, Python's draws made by Dynamo."""
    import random

    from torch._dynamo.exc import Unsupported

    from mend.rewriter.strategies.layerdrop_guard import EXAMPLES

    example = next(e for e in EXAMPLES if "random.uniform" in e.before)
    x = torch.randn(3, 4)
    for p in (0.0, 0.5):
        results = []
        for source, compiled in ((example.before, False), (example.after, False), (example.after, True),
                                 (example.before, True)):
            torch._dynamo.reset()
            ns: dict = {}
            exec(compile(source, "layerdrop_python.py", "exec"), ns)
            torch.manual_seed(0)
            model = ns["Decoder"](p).train()
            fn = torch.compile(model, fullgraph=True, backend="aot_eager") if compiled else model
            random.seed(3)
            xi = x.clone().requires_grad_()
            if compiled and source == example.before:
                with pytest.raises(Unsupported):
                    fn(xi)
                continue
            if compiled and p:
                continue  # with LayerDrop configured the test on the draw still breaks, as before
            fn(xi).square().sum().backward()
            results.append((xi.grad, [q.grad for q in model.parameters()], random.getstate()))
        (grad0, params0, state0), *others = results
        for grad, params, state in others:
            assert torch.equal(grad, grad0) and state == state0
            assert all((a is None and b is None) or torch.equal(a, b) for a, b in zip(params, params0, strict=True))


def test_mask_update_keeps_gradients() -> None:
    """``t[mask] op= v`` -> ``_mend_mask_update``: the original's gradients, eager (bitwise) and compiled."""
    for x, ids in INPUTS["mask_update"]():
        grads = []
        for kind, backend in (("in", None), ("out", None), ("out", "eager")):
            torch._dynamo.reset()
            xi = x.clone().requires_grad_()
            _load("mask_update", kind, backend)["f"](xi, ids).square().sum().backward()
            grads.append(xi.grad)
        assert torch.equal(grads[1], grads[0])
        torch.testing.assert_close(grads[2], grads[0], rtol=0, atol=0)


@pytest.mark.parametrize(("op", "value", "dtype"), [("/", 0.0, torch.float32), ("*", 1e39, torch.float32),
                                                    ("/", 1e-10, torch.float16), ("*", 2.0, torch.float32)])
def test_mask_update_gradients_where_the_number_overflows_the_dtype(op: str, value: float, dtype) -> None:
    """Under compile the op runs on every element and ``torch.where`` keeps the masked ones; its backward sends
    zeros through the unmasked ones, times ``value`` (or over it): a number the dtype cannot hold (inf, or 0
    after rounding) makes those zeros NaN. There the helper runs the original statement: gradients are eager's."""
    from torch._dynamo.backends.registry import lookup_backend

    mask_update = _helper("_mend_mask_update")["_mend_mask_update"]
    x = torch.tensor([1.0, -2.0, 3.0, 4.0], dtype=dtype)
    mask = torch.tensor([True, False, True, False])

    def f(t):
        y = t * 1
        mask_update(y, op, mask, value)
        return y

    grads = []
    for backend in (None, "aot_eager"):
        torch._dynamo.reset()
        fn = f if backend is None else torch.compile(f, backend=lookup_backend(backend))
        xi = x.clone().requires_grad_()
        fn(xi).float().sum().backward()
        grads.append(xi.grad)
    torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=0, equal_nan=True)


def test_assert_not_fails_as_the_original_in_eager() -> None:
    """``assert not t`` -> ``assert torch.logical_not(t)``: eager raises the same AssertionError (message
    included); under compile the failing check is the graph's, a RuntimeError with the message (unsafe)."""
    x = torch.randn(3)
    for scale, message in ((torch.tensor(float("nan")), ""), (torch.tensor(float("inf")), "inf in the activations")):
        calls = [(x, scale)]
        eager = _eager(_load("assert_not", "in")["f"], calls)
        assert eager == [(AssertionError, message)]
        assert _eager(_load("assert_not", "out")["f"], calls) == eager
        graphs, outs = _compiled_run("assert_not", "out", calls)
        assert graphs == 1 and outs[0][0] is RuntimeError and message in outs[0][1]


def test_kept_warning_keeps_its_category_under_compile() -> None:
    """``warnings.warn(msg, FutureWarning)``: the category travels by name (Dynamo reorders no class), so
    the compiled call warns with the original's category and message, after one graph."""
    import warnings

    calls = INPUTS["keep_warning"]()
    for kind, backend in (("in", None), ("out", "eager")):
        torch._dynamo.reset()
        f = _load("keep_warning", kind, backend)["f"]
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            f(*calls[0])
        assert [(w.category, str(w.message)) for w in seen] == [
            (FutureWarning, "the `device` argument is deprecated")], kind


def test_rnn_flag_is_scoped_to_the_repaired_call() -> None:
    """``_mend_rnn`` turns ``allow_rnn`` on only while Dynamo traces its call: the global flag is off after
    compiling the repaired fixture, and the original's LSTM call, compiled next, still breaks the graph."""
    calls = INPUTS["rnn"]()
    graphs, _ = _compiled_run("rnn", "out", calls[:1])
    assert graphs == 1
    assert torch._dynamo.config.allow_rnn is False
    graphs, _ = _compiled_run("rnn", "in", calls[:1])  # the original, compiled after the repaired one
    assert graphs == 2


def test_buffer_fixture_stops_recompiles() -> None:
    before, after = _load("buffer", "in")["Warm"], _load("buffer", "out")["Warm"]
    xs = [(torch.randn(2, 4),) for _ in range(4)]
    torch.manual_seed(0)
    m0 = before()
    torch.manual_seed(0)
    m1 = after()
    eager = _eager(m0, xs)
    graphs_before, _ = _graphs_and_outputs(before().requires_grad_(False), xs)
    torch.manual_seed(0)
    graphs_after, compiled = _graphs_and_outputs(m1, xs)
    assert graphs_before == len(xs)  # one compile per new value of self.step
    assert graphs_after == 1
    _same(eager, compiled)


def test_buffer_selection_keeps_both_frequencies_and_compiles_once_more() -> None:
    """LongRoPE: the compiled form registers a copy of the selected frequencies, never writes into
    them (right after __init__ the buffer *is* ``original_inv_freq``: an in-place copy of the long ones
    would overwrite it). One graph per call shape; one recompile, when the lazily created
    ``long_inv_freq`` first exists (the original recompiles there too); none after that."""
    calls = INPUTS["where_buffer"]() * 2
    eager_ns = _load("where_buffer", "in")
    eager = _eager(eager_ns["f"], calls)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    ns = _load("where_buffer", "out", backend)
    short = ns["rope"].original_inv_freq.clone()
    counts = []
    for args in calls:
        with torch.no_grad():
            out = ns["f"](*args)
        counts.append(len(graphs))
        _same([eager[len(counts) - 1]], [out])
    assert torch.equal(ns["rope"].original_inv_freq, short)
    assert torch.equal(ns["rope"].inv_freq, eager_ns["rope"].inv_freq)
    assert counts[0] == 1 and counts[-1] == counts[2] and counts[-1] <= 3, counts


def test_validation_restores_exception_type_and_message() -> None:
    x, bad = torch.randn(3, 4), torch.zeros(3, 4, dtype=torch.bool)
    _, outs = _compiled_run("validation", "out", [(x, bad)])
    assert outs == [(ValueError, "every row needs one position")]
    # A boundary outside the repaired file: mend.rewriter.runtime.restore_exceptions does the same.
    inner = _load("validation", "out")["f"]
    inner = getattr(inner, "__wrapped__", inner)
    torch._dynamo.reset()
    with pytest.raises(ValueError, match="^every row needs one position$"):
        restore_exceptions(torch.compile(inner, backend="eager"))(x, bad)


def test_validation_with_an_fstring_restores_the_type_and_the_message_template() -> None:
    """The values of an f-string message are not known inside the graph: the compiled check raises the
    original class with the literal parts and each replacement field as its source (unsafe)."""
    args = (torch.tensor([[7, 7, 7]]), torch.randn(2, 2, 3))
    eager = _eager(_load("validation_fstring", "in")["f"], [args])
    assert eager == [(ValueError, "Image features and image tokens do not match: tokens: 3, features 4")]
    graphs, outs = _compiled_run("validation_fstring", "out", [args])
    assert graphs == 1
    assert outs == [(ValueError, "Image features and image tokens do not match: tokens: {n_image_tokens}, "
                                 "features {n_image_features}")]


def test_validation_on_a_count_checks_the_tensor_under_compile() -> None:
    """``n = (ids == k).sum().item(); if n != m: raise ...``: eager raises as written; compiled code checks
    the count as a tensor in the one graph and raises the original class with the message template."""
    args = (torch.tensor([[7, 7, 7]]), torch.randn(2, 4))
    eager = _eager(_load("validation_count", "in")["f"], [args])
    assert eager == [(ValueError, "Image features and image tokens do not match: tokens: 3, features 2")]
    assert _eager(_load("validation_count", "out")["f"], [args]) == eager
    graphs, outs = _compiled_run("validation_count", "out", [args])
    assert graphs == 1
    assert outs == [(ValueError, "Image features and image tokens do not match: tokens: {n_tokens}, "
                                 "features {n_features}")]


def test_defer_keeps_output_after_graph(capsys) -> None:
    from mend.rewriter import runtime

    def f(x):
        y = x.sin()
        runtime.defer(print, "y0 =", y[0])
        y.add_(1)
        return y.cos()

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    compiled = runtime.boundary(torch.compile(f, backend=backend))
    out = compiled(torch.zeros(3))
    assert len(graphs) == 1
    assert "y0 = tensor(0.)" in capsys.readouterr().out  # pre-mutation value, printed after the graph
    torch.testing.assert_close(out, f(torch.zeros(3)))


DEFER_SRC = '''import torch


@torch.compile(backend="eager")
def f(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    print("y0 =", y[0])
    y.add_(1)
    return y.cos()
'''


def test_defer_policy_end_to_end(tmp_path, capsys) -> None:
    """side-effects = defer: one graph, and the output still appears, after the graph, pre-mutation."""
    import importlib
    import sys

    from mend.analyzers.runtime import record
    from mend.rewriter import FixOptions, fix_source
    from tests.rewriter.conftest import diag

    res = fix_source(DEFER_SRC, "deferred_mod.py", [diag("MND101", 7, 5)],
                     FixOptions(unsafe=True, side_effects="defer"))
    assert "@_mend_boundary" in res.fixed and "_mend_defer(print" in res.fixed
    (tmp_path / "deferred_mod.py").write_text(res.fixed)
    sys.path.insert(0, str(tmp_path))
    try:
        torch._dynamo.reset()
        mod = importlib.import_module("deferred_mod")
        with record(source=[str(tmp_path)]) as rec:
            out = mod.f(torch.zeros(3))
        assert rec.graphs == 1 and not rec.breaks
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("deferred_mod", None)
    assert "y0 = tensor(0.)" in capsys.readouterr().out
    torch.testing.assert_close(out, torch.ones(3).cos())


def _dynamic_fixture_run(kind: str, name: str, run):
    """Execute a MND402 fixture with its ``backend="eager"`` replaced by a graph-counting backend."""
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    src = (FIXTURES / f"{name}.{kind}.py").read_text()
    src = src.replace('backend="eager"', "backend=_mend_counting")
    src = src.replace("@torch.compile\n", "@torch.compile(backend=_mend_counting)\n")
    src = src.replace("@torch.compile(dynamic=True)\n", "@torch.compile(backend=_mend_counting, dynamic=True)\n")
    ns: dict = {"__name__": f"fixture_{name}_{kind}", "_mend_counting": counting}
    torch._dynamo.reset()
    exec(compile(src, f"{name}.{kind}.py", "exec"), ns)  # module-level calls count too
    out = run(ns)
    return len(graphs), out


def test_dynamic_fixture_stops_scalar_recompiles() -> None:
    """`g(x, 2)`, `g(x, 3)`, `g(x, 4)`: two compiles before (one recompile), one with `dynamic=True`."""
    x = torch.randn(4)

    def run(ns):
        return ns["f"](x, [2, 3, 4])

    before, out_before = _dynamic_fixture_run("in", "dynamic_scalar", run)
    after, out_after = _dynamic_fixture_run("out", "dynamic_scalar", run)
    assert before == 2
    assert after == 1
    torch.testing.assert_close(out_after, out_before, rtol=0, atol=0)
    torch.testing.assert_close(out_after, torch.stack([x * n + 1 for n in (2, 3, 4, 2, 3)]), rtol=0, atol=0)


def test_dynamic_decorator_fixture_stops_scalar_recompiles() -> None:
    """The fixture's own `scale(x, 2)`, `scale(x, 3)`, `scale(x, 4)` and three more calls."""
    x = torch.randn(4)

    def run(ns):
        return [ns["scale"](x, n) for n in (5, 6, 7)]

    before, out_before = _dynamic_fixture_run("in", "dynamic_decorator", run)
    after, out_after = _dynamic_fixture_run("out", "dynamic_decorator", run)
    assert (before, after) == (2, 1)
    for a, b, n in zip(out_after, out_before, (5, 6, 7)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
        torch.testing.assert_close(a, x * n + 1, rtol=0, atol=0)


def test_assert_item_failing_check_still_raises() -> None:
    """`assert t.item() <= n` -> `assert t <= n`: eager raises the same AssertionError; compiled code keeps the
    check in the graph (torch._assert_async), which raises RuntimeError, one graph."""
    x, mask = torch.randn(2, 5), torch.tensor([True, False])
    bad = torch.tensor([3, 9])
    for kind in ("in", "out"):
        with pytest.raises(AssertionError):
            _load("assert_item", kind)["f"](x, bad, mask)
    with pytest.raises(AssertionError, match="an empty mask"):
        _load("assert_item", "out")["f"](x, torch.tensor([3, 5]), torch.tensor([False, False]))
    graphs, outs = _graphs_and_outputs(_load("assert_item", "out")["f"], [(x, bad, mask)])
    assert graphs == 1
    assert outs[0][0] is RuntimeError


def test_report_if_eager_still_reports(caplog) -> None:
    """`if <tensor cond>: logger.warning(...)` guarded as a whole: eager logs and warns exactly as before."""
    import warnings

    for kind in ("in", "out"):
        f = _load("report_if", kind)["f"]
        caplog.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f(torch.randn(2, 3), torch.zeros(2, 3))
            assert [r.getMessage() for r in caplog.records] == ["an empty mask: every position is ignored"]
            assert caught == []
            caplog.clear()
            f(torch.randn(2, 3) * 1e5, torch.ones(2, 3))
        assert caplog.records == []
        assert [str(w.message) for w in caught] == ["large activations"]


KEEP_SRC = '''import logging
import warnings

import torch

logger = logging.getLogger("keep_mod")


@torch.compile(backend="eager")
def f(x: torch.Tensor, step: int) -> torch.Tensor:
    y = x.sin()
    print("y0 =", y[0], "shape", tuple(y.shape), sep="|")
    y.add_(1)
    logger.info("after %s of %s", y.sum(), x.shape)
    warnings.warn(f"step {step}")
    logger.warning("done")
    return y.cos()
'''


def _reports(fn, *args):
    """stdout, log records and warnings of one call, in order, as text."""
    import contextlib
    import io
    import logging
    import warnings

    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(f"log {record.levelname} {record.getMessage()}")

    handler, log = Collect(), logging.getLogger("keep_mod")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    out = io.StringIO()
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out):
            warnings.simplefilter("always")
            old = warnings.showwarning
            warnings.showwarning = lambda m, *a, **k: lines.append(f"warn {m}")
            try:
                result = fn(*args)
            finally:
                warnings.showwarning = old
    finally:
        log.removeHandler(handler)
    for w in caught:
        lines.append(f"warn {w.message}")
    return result, out.getvalue().splitlines(), lines


def test_keep_policy_keeps_every_message_and_the_graph(tmp_path) -> None:
    """side-effects = keep (the default): one graph, no break, and under compile the same messages
    (stdout, log records, warnings) as eager, pre-mutation values included."""
    import importlib
    import sys

    from mend.analyzers.runtime import record
    from mend.rewriter import FixOptions, fix_source
    from tests.rewriter.conftest import diag

    sites = [diag("MND101", 12, 5), diag("MND102", 14, 5), diag("MND103", 15, 5), diag("MND102", 16, 5)]
    res = fix_source(KEEP_SRC, "keep_mod.py", sites, FixOptions())
    assert [a.applicability for a in res.applied] == ["safe"] * 4
    assert all("keep the message" in a.message for a in res.applied), [a.message for a in res.applied]
    assert "import mend" not in res.fixed and "from mend" not in res.fixed
    ns: dict = {"__name__": "keep_orig"}
    exec(compile(KEEP_SRC.replace('@torch.compile(backend="eager")\n', ""), "orig", "exec"), ns)
    want = _reports(ns["f"], torch.zeros(3), 7)
    (tmp_path / "keep_mod.py").write_text(res.fixed)
    sys.path.insert(0, str(tmp_path))
    try:
        torch._dynamo.reset()
        mod = importlib.import_module("keep_mod")
        with record(source=[str(tmp_path)]) as rec:
            got = _reports(mod.f, torch.zeros(3), 7)
        assert rec.graphs == 1 and not rec.breaks, rec.breaks
        eager = _reports(mod.f.__wrapped__, torch.zeros(3), 7)  # the repaired file run eagerly
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("keep_mod", None)
    assert want[1] == ["y0 =|tensor(0.)|shape|(3,)"]
    assert want[2] == ["log INFO after tensor(3.) of torch.Size([3])", "warn step 7", "log WARNING done"]
    for run in (got, eager):
        assert run[1:] == want[1:]
        torch.testing.assert_close(run[0], want[0], rtol=0, atol=0)


def test_int_buffers_fixture_traces_dynamic_shapes() -> None:
    """The integer form of the folded padding method keeps sizes symbolic: one graph for every length,
    outputs bitwise equal to the original run eagerly (lengths around the kernel, odd and even)."""
    calls = [(torch.randn(1, 2, n),) for n in (16, 5, 17, 8, 33, 64)]
    eager = _eager(_load("int_buffers", "in")["f"], calls)
    torch._dynamo.reset()
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    fn = torch.compile(_load("int_buffers", "out")["conv"], backend=backend, dynamic=True)
    outs = [fn(*args) for args in calls]
    assert len(seen) == 1
    for a, b in zip(eager, outs, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", ["int_buffers", "int_buffers_attr"])
def test_folds_run_the_original_code_where_the_fold_is_off(name: str) -> None:
    """On a torch before 2.13 ``_mend_fold.active`` is set for good (tracing a call that hands it a module
    fails there): every folded statement and method of the repaired fixture then runs its original code
    under compile, so the graphs are the original's and nothing raises."""
    import _mend

    calls = INPUTS[name]()
    eager = _eager(_load(name, "in")["f"], calls)
    graphs_before, _ = _compiled_run(name, "in", calls)
    graphs_folded, _ = _compiled_run(name, "out", calls)
    old, _mend.fold.active = _mend.fold.active, True
    try:
        graphs_off, outs = _compiled_run(name, "out", calls)
    finally:
        _mend.fold.active = old
    assert graphs_folded == 1 < graphs_before == graphs_off
    _same(eager, outs)


def _helper(name: str) -> dict:
    """The helper ``name``, from a fresh module holding only it (and what it calls), as a repaired tree has it."""
    import sys
    import types

    from mend.rewriter.helper_module import module_text, public_name

    module = types.ModuleType(f"mend_test_helper_{name}")
    sys.modules[module.__name__] = module
    exec(compile(module_text(None, [name]), f"<{name}>", "exec"), module.__dict__)
    return {name: module.__dict__[public_name(name)]}


def test_scoped_capture_breaks_where_the_original_breaks() -> None:
    """A captured expression Dynamo still cannot trace (a range sized by a float from the data) breaks where
    the original breaks; when that sends the frame back to eager (a break in a loop), the helper and its
    lambda run eagerly too, as the original line did: no graph, break or recompile of their own."""
    from mend.analyzers.runtime import record

    captured = _helper("_mend_captured")["_mend_captured"]

    def original(x, nb):
        y = x * 2
        for _ in range(3):
            y = y + torch.arange(0, 1 - 1e-6, 1 / nb).sum()
        return y

    def repaired(x, nb):
        y = x * 2
        for _ in range(3):
            y = y + captured(lambda: torch.arange(0, 1 - 1e-6, 1 / nb)).sum()
        return y

    calls = [(torch.randn(4), torch.tensor(n)) for n in (4, 5, 8)]
    seen = []
    for fn in (original, repaired):
        with record() as rec:
            graphs, outs = _graphs_and_outputs(fn, calls)
        seen.append((graphs, sum(b.count for b in rec.breaks), sum(r.count for r in rec.recompiles)))
        _same(_eager(original, calls), outs)
    assert seen[0] == seen[1], seen


def test_scoped_capture_of_a_range_from_zero_stays_in_the_graph() -> None:
    """``torch.arange(n)`` sized by a count from the data (phi-MoE's ``arange(seq_len)``, VITS's
    ``arange(lengths.max())``) traces under capture: one graph, the same values as eager."""
    captured = _helper("_mend_captured")["_mend_captured"]

    def fn(x, lengths):
        idx = captured(lambda: torch.arange(lengths.max(), dtype=lengths.dtype))
        mask = idx.unsqueeze(0) < lengths.unsqueeze(1)
        return x * 2 + mask.to(x.dtype).sum(1)

    calls = [(torch.randn(3), torch.tensor([2, 5, 1])), (torch.randn(3), torch.tensor([4, 4, 7]))]
    graphs, outs = _graphs_and_outputs(fn, calls)
    assert graphs == 1
    _same(_eager(fn, calls), outs)


def test_scoped_capture_leaves_the_rest_of_the_frame_as_it_was() -> None:
    """Capture is on for the wrapped expression only: a data-dependent operator after it in the same frame
    still breaks, and Dynamo's global config is untouched."""
    captured = _helper("_mend_captured")["_mend_captured"]

    def fn(x):
        idx = captured(lambda: torch.nonzero(x > 0))
        return x[x > 0].sum() + idx.sum()

    calls = [(torch.randn(8),)]
    graphs, outs = _graphs_and_outputs(fn, calls)
    assert graphs == 2  # the graph before `x[x > 0]` and the one after it
    _same(_eager(fn, calls), outs)
    assert not torch._dynamo.config.capture_scalar_outputs
    assert not torch._dynamo.config.capture_dynamic_output_shape_ops


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_a_failing_tensor_check_still_raises_under_compile(backend: str) -> None:
    """A captured ``torch._check_tensor_all``/``_with`` is a runtime assert in the one graph: where the original
    raised under compile, the repair raises too, its error or Dynamo's ``RuntimeError`` of a failed runtime
    assertion (the documented difference), on every call after the first."""
    cases = [(torch.randn(3, 5), torch.tensor([0, -1, 2])), (torch.full((2, 4), float("nan")), torch.tensor([1, 1])),
             (torch.randn(2, 4), torch.tensor([-3, 1]))]
    seen = {}
    for kind in ("in", "out"):
        torch._dynamo.reset()
        f = _load("tensor_check", kind, backend)["f"]
        f(torch.randn(3, 5), torch.tensor([0, 4, 2]))
        seen[kind] = []
        for args in cases:
            with pytest.raises(Exception) as info:
                f(*args)
            seen[kind].append((info.type, str(info.value)))
        assert f(torch.randn(2, 5), torch.tensor([3, 1])).shape == (2,)
    assert [t for t, _ in seen["in"]] == [RuntimeError, ValueError, RuntimeError]
    for before, after in zip(seen["in"], seen["out"], strict=True):
        assert after == before or after[0] is RuntimeError, after


@pytest.mark.parametrize("name", ["capture_scoped", "capture_mask", "tensor_check", "capture"])
def test_scoped_capture_holds_through_a_backend_that_traces_again(name: str) -> None:
    """AOTAutograd (Inductor's front end) traces Dynamo's graph again with the frame's ShapeEnv after Dynamo is
    done: the capture is on for that trace too, so the repaired frame is one graph there, with eager's values
    (before, the backend failed on the captured operator and the frame fell back to eager)."""
    calls = INPUTS[name]()
    eager = _eager(_load(name, "in")["f"], calls)
    graphs, outs = _compiled_run(name, "out", calls, "aot_eager")
    assert graphs == 1
    _same(eager, outs)


@pytest.mark.parametrize("loaded_before", [False, True], ids=["first-load", "reloaded"])
def test_a_backend_failing_on_a_captured_frame_falls_back_instead_of_raising(loaded_before: bool) -> None:
    """The backend raises on a frame with captured values (Inductor, where an operator must guard on one):
    Dynamo takes it as a graph break and the call returns eager's result. Also when the same repaired source
    ran eagerly before from an earlier load (a reload: its expressions' code objects are equal, not the same)."""
    calls = INPUTS["capture_scoped"]()
    eager = _eager(_load("capture_scoped", "in")["f"], calls)
    if loaded_before:
        _same(eager, _eager(_load("capture_scoped", "out")["f"], calls))
    _, outs = _compiled_run("capture_scoped", "out", calls, "aot_eager", fail=True)
    _same(eager, outs)
