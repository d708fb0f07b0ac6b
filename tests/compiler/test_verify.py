"""The IR verifier (``mend.compiler.ir.verify``): valid stage outputs pass, each broken invariant is named,
and the backend runs it between the stages under ``MEND_COMPILER_VERIFY``."""

from __future__ import annotations

import dataclasses

import pytest
import sympy
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from mend.compiler import backend, debug, ir
from mend.compiler.ir.symbolic import variables
from mend.compiler.ir.verify import IRError, verify_graph, verify_scheduled
from mend.compiler.lowering import Lowering
from mend.compiler.lowering.decomps import decomposition_table
from mend.compiler.schedule import schedule

from .helpers import assert_same, mend_compile_fx

X0, X1 = variables(2)


def _softmax_and_colsum(x, y):
    return (x + y).softmax(-1), x.sum(0)


@pytest.fixture
def stages():
    """(GraphIR, ScheduledGraph) of a row group (softmax) and a column reduction."""
    x, y = torch.randn(4, 8), torch.randn(8)
    gm = make_fx(_softmax_and_colsum, decomposition_table=decomposition_table(), tracing_mode="fake")(x, y)
    g = Lowering(gm, [x, y]).run()
    sg, _ = schedule(g, "cpu")
    return g, sg


def _node(g, name):
    return next(n for n in g.nodes if n.name == name)


def _with_node(g, node_name, **changes):
    nodes = tuple(dataclasses.replace(n, **changes) if n.name == node_name else n for n in g.nodes)
    return dataclasses.replace(g, nodes=nodes)


def _with_body_expr(g, name, expr):
    node = _node(g, name)
    return _with_node(g, name, body=dataclasses.replace(node.body, expr=expr))


def _with_stage(sg, kernel, stage, **changes):
    steps = []
    for s in sg.steps:
        if isinstance(s, ir.Kernel) and s.name == kernel:
            s = dataclasses.replace(s, stages=tuple(dataclasses.replace(st, **changes) if st.name == stage else st
                                                    for st in s.stages))
        steps.append(s)
    return dataclasses.replace(sg, steps=tuple(steps))


def _fails(check, obj, *phrases):
    with pytest.raises(IRError) as info:
        check(obj)
    for p in phrases:
        assert p in str(info.value), str(info.value)


def test_lowered_and_scheduled_graphs_pass(stages):
    g, sg = stages
    verify_graph(g)
    verify_scheduled(sg)
    assert len(sg.kernels) == 2  # the row group and the column sum: both kinds of kernel were checked


def test_graph_expression_errors_are_named(stages):
    g, _ = stages
    a = ir.Load("arg0", 8 * X0 + X1, torch.float32)
    cases = [
        (ir.Op("exp", (a, a), torch.float32), "op exp takes 1 argument(s), has 2"),
        (ir.Op("frobnicate", (a,), torch.float32), "op 'frobnicate' is not in the op table"),
        (ir.Op("where", (a, a, a), torch.float32), "where selects on a torch.float32"),
        (ir.Load("nowhere", X0, torch.float32), "loads nowhere, which is not defined before it"),
        (ir.Load("buf5", X0, torch.float32), "loads buf5, which is not defined before it"),  # a later node
        (ir.Load("arg0", X0, torch.float16), "loads arg0 as torch.float16, the buffer holds torch.float32"),
        (ir.Load("arg0", sympy.Symbol("x7", integer=True), torch.float32), "uses ['x7']"),
        (ir.Load("arg0", X1 - 3, torch.float32), "can be negative (down to -3)"),
        (ir.Local("buf1", torch.float32), "Local %buf1 outside a kernel"),
    ]
    for expr, phrase in cases:
        _fails(verify_graph, _with_body_expr(g, "buf2", expr), "buf2: ", phrase)


def test_graph_structure_errors_are_named(stages):
    g, _ = stages
    buf1 = _node(g, "buf1")
    _fails(verify_graph, _with_node(g, "buf2", layout=ir.Layout.contiguous((4, 9), torch.float32)),
           "does not hold the dense result of size [4, 8]")
    _fails(verify_graph, _with_node(g, "buf2", layout=ir.Layout((4, 8), (16, 1), 0, torch.float32)),
           "does not hold the dense result of size [4, 8]")  # gaps
    _fails(verify_graph, _with_node(g, "buf1", body=dataclasses.replace(buf1.body, rdims=(1, 1))),
           "reduced dims [1, 1] are not distinct")
    _fails(verify_graph, _with_node(g, "buf1", body=dataclasses.replace(buf1.body, kind="median")),
           "reduction kind 'median'")
    _fails(verify_graph, _with_node(g, "buf3", name="buf1"), "buf1 is defined twice")
    _fails(verify_graph, dataclasses.replace(g, outputs=(ir.TensorRef("ghost", buf1.layout),)),
           "returns ghost, which is never defined")


def test_kernel_errors_are_named(stages):
    _, sg = stages
    k0 = sg.kernels[0]
    assert [st.name for st in k0.stages] == ["buf1", "buf2", "buf3", "buf5"]
    _fails(verify_scheduled, _with_stage(sg, "k0", "buf2", local_users=False),
           "stage buf2: local_users=False, but it is read by a later stage")
    _fails(verify_scheduled, _with_stage(sg, "k0", "buf1", expr=ir.Local("buf3", torch.float32)),
           "reads %buf3, not an earlier stage")
    _fails(verify_scheduled, _with_stage(sg, "k0", "buf3", expr=ir.Local("buf2", torch.float64)),
           "reads %buf2 as torch.float64, the stage is torch.float32")
    _fails(verify_scheduled, _with_stage(sg, "k0", "buf2", reduction="sum"), "pointwise stage with reduction 'sum'")
    _fails(verify_scheduled, _with_stage(sg, "k0", "buf5", store_index=8 * X0 + X1 + 1),
           "store index reaches 32, the buffer holds 32 elements")
    _fails(verify_scheduled, _with_stage(sg, "k0", "buf5", store=None, store_index=None),
           "but the kernel's outputs are ['buf5']")
    _fails(verify_scheduled, _with_stage(sg, "k1", "buf4", store_index=X0),
           "per-row value stored at x0, which moves along the reduced dims")
    outer = ir.Load("arg1", X1, torch.float32)
    _fails(verify_scheduled, _with_stage(sg, "k0", "buf3", kind="outer", reduction=None, expr=outer),
           "per-row stage depends on the reduced dims")
    _fails(verify_scheduled, dataclasses.replace(sg, buffers=sg.buffers[:1]),
           "buffer declaration None differs from the store layout")
    _fails(verify_scheduled, dataclasses.replace(sg, steps=(sg.steps[0],) + sg.steps),
           "k0: step name used twice", "k0: writes buf5, which is already defined")


def test_verify_switch(monkeypatch, tmp_path):
    monkeypatch.delenv("MEND_COMPILER_VERIFY")
    assert not debug.verify_enabled()
    monkeypatch.setenv("MEND_COMPILER_DEBUG", str(tmp_path))
    assert debug.verify_enabled()  # every debug run verifies
    monkeypatch.setenv("MEND_COMPILER_VERIFY", "0")
    assert not debug.verify_enabled()
    monkeypatch.delenv("MEND_COMPILER_DEBUG")
    monkeypatch.setenv("MEND_COMPILER_VERIFY", "1")
    assert debug.verify_enabled()


def test_the_backend_verifies_between_stages(monkeypatch, tmp_path):
    """A scheduler that marks a kernel-local value as read elsewhere (harmless to the C++ generator, but
    not what the contract says) is caught when the verifier is on, and compiles as before when it is off."""
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))  # no graph-cache hit may skip the stages
    real = backend.schedule

    def sloppy(g, device):
        sg, decisions = real(g, device)
        k = sg.kernels[0]
        return _with_stage(sg, k.name, k.stages[-1].name, local_users=True), decisions

    monkeypatch.setattr(backend, "schedule", sloppy)
    x = torch.randn(4, 8)
    with pytest.raises(IRError, match="local_users=True, but it is not read by a later stage"):
        mend_compile_fx(lambda x: (x.softmax(-1),), x)
    monkeypatch.setenv("MEND_COMPILER_VERIFY", "0")
    call = mend_compile_fx(lambda x: (x.softmax(-1),), x)
    assert_same(call([x])[0], x.softmax(-1))
