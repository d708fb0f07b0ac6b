"""Steps computed once (``schedule/fold.py``): what reads no graph input runs at the first call only, what it
keeps is read by every later call, and nothing computed once reaches the caller or repeats a random draw."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from mend.compiler import ir
from mend.compiler.backend import compile_graph
from mend.compiler.ir.verify import IRError, verify_scheduled
from mend.compiler.lowering.decomps import decomposition_table
from mend.compiler.schedule import fold

from .helpers import lower_and_schedule


def causal_bias(x):
    """A transformers-style mask from the sequence length alone (positions, a cumsum, an index, a compare)
    added to the input: everything but the last add reads no input."""
    n = x.shape[-1]
    pos = torch.arange(n)
    seg = torch.cumsum((pos % 3 == 0).to(torch.int64), -1)
    same = seg[:, None] == seg[None, :]
    mask = torch.where((pos[:, None] >= pos[None, :]) & same, 0.0, float("-inf"))
    return (x + mask).softmax(-1)


def compiled(fn, *args):
    gm = make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(*args)
    return compile_graph(gm, list(args)), lower_and_schedule(gm, args)


def steps_run(call, monkeypatch) -> list[str]:
    """The steps each call of the compiled graph ``call`` runs, by name (kernels and ATen calls)."""
    ran: list[str] = []
    g = call.call.__globals__ if hasattr(call, "call") else call.__globals__
    for k in call.mend_graph.kernels:
        fn = g[k.name]
        monkeypatch.setitem(g, k.name, lambda *a, _f=fn, _n=k.name: (ran.append(_n), _f(*a))[1])
    return ran


def test_a_mask_from_the_shape_is_computed_once_and_read_by_every_call(monkeypatch):
    x = torch.randn(2, 12, 12)
    call, sg = compiled(causal_bias, x)
    assert sg.once, "the mask's steps run every call"
    assert {s.name for s in sg.steps if s.name in sg.once} >= {"ext" + s.name[3:] for s in sg.steps
                                                                if isinstance(s, ir.ExternKernel)
                                                                and "cumsum" in str(s.op)}
    per_call = [s.name for s in sg.steps if s.name not in sg.once]
    assert per_call, "the add of the input must run every call"
    verify_scheduled(sg)
    assert "def _once(" in call.mend_wrapper_source
    ran = steps_run(call, monkeypatch)
    for i in range(3):  # new values every call, the kept mask read each time
        x = torch.randn(2, 12, 12)
        got = call([x])[0]
        torch.testing.assert_close(got, causal_bias(x))  # bit for bit against the graph without: below
        if i == 0:
            first = list(ran)
        ran.clear()
    once_kernels = {k.name for k in sg.kernels if k.name in sg.once}
    assert once_kernels and once_kernels <= set(first), "the first call computes the kept values"
    assert not (once_kernels & set(ran)), "a later call ran a step computed once"


def test_folding_off_gives_the_same_bits(monkeypatch):
    x = torch.randn(3, 16, 16)
    on, _ = compiled(causal_bias, x)
    monkeypatch.setenv("MEND_FOLD", "0")
    off, sg_off = compiled(causal_bias, x)
    assert not sg_off.once and "_once" not in off.mend_wrapper_source
    for _ in range(3):
        x = torch.randn(3, 16, 16)
        a, b = on([x])[0], off([x])[0]
        assert torch.equal(a, b) and a.stride() == b.stride()


def test_a_value_returned_to_the_caller_is_new_every_call():
    def f(x):
        pos = torch.arange(x.shape[0]) * 2
        return x + 1, pos, torch.sort(pos.flip(0)).values

    x = torch.randn(5)
    call, sg = compiled(f, x)
    outs = {o.buf for o in sg.outputs if isinstance(o, ir.TensorRef)}
    written_once = {n for s in sg.steps if s.name in sg.once for n in ir.step_writes(s)}
    assert not (outs & written_once)
    first = call([x])
    first[1].fill_(-7)  # the caller owns what it got: writing it changes nothing later
    first[2].fill_(-7)
    second = call([x])
    assert torch.equal(second[1], torch.arange(5) * 2)
    assert torch.equal(second[2], torch.arange(5) * 2)
    assert second[1].data_ptr() != first[1].data_ptr()


def test_random_draws_are_not_computed_once():
    def f(x):
        return x + torch.rand(4)

    x = torch.zeros(4)
    call, sg = compiled(f, x)
    rand = [s for s in sg.steps if isinstance(s, ir.ExternKernel) and "rand" in str(s.op)]
    assert rand and not any(s.name in sg.once for s in rand)
    assert not torch.equal(call([x])[0], call([x])[0])


def test_what_would_be_kept_past_the_limit_runs_every_call(monkeypatch):
    monkeypatch.setattr(fold, "MAX_KEPT_BYTES", 16)
    monkeypatch.setenv("MEND_DISABLE_CACHE", "1")
    x = torch.randn(2, 12, 12)
    call, sg = compiled(causal_bias, x)
    assert not sg.once and "_once" not in call.mend_wrapper_source
    torch.testing.assert_close(call([x])[0], causal_bias(x))


def test_the_verifier_names_a_step_run_once_that_reads_an_input():
    x = torch.randn(2, 12, 12)
    _, sg = compiled(causal_bias, x)
    last = [s for s in sg.steps if s.name not in sg.once][-1]
    bad = dataclasses.replace(sg, once=sg.once + (last.name,))
    with pytest.raises(IRError, match="runs once but reads"):
        verify_scheduled(bad)


def test_a_kept_buffer_is_never_taken_over_by_a_later_output():
    """The wrapper hands a dead buffer's storage to a later kernel output of the same layout; a buffer kept
    from the first call is dead after its last read in every call, and must stay what it was."""
    def f(x):
        n = x.shape[0]
        m = torch.exp(torch.cumsum(torch.ones(n), 0) / n)  # computed once, a buffer: two kernels read it
        y = torch.sort(x).values  # ATen calls between the kernels
        z = torch.sort(y * m).values
        w = torch.sort(z + m).values  # the last read of m in a call
        return w * 3  # a kernel output of m's layout

    x = torch.randn(16)
    call, sg = compiled(f, x)
    kept_kernel_outputs = {o for k in sg.kernels if k.name in sg.once for o in k.outputs} & set(sg.kept())
    assert kept_kernel_outputs, sg
    for _ in range(3):
        x = torch.randn(16)
        torch.testing.assert_close(call([x])[0], f(x))  # a taken-over buffer gives other numbers, not ulps
