"""LayerDrop above 0 under compile (``layerdrop_select``, unsafe): the layer is computed and its output selected.

The three loop shapes transformers' encoders and decoders use, each repaired, run against the original in
training with ``layerdrop=0.5``: eager outputs, gradients and the random stream bitwise the original's; under
``torch.compile`` (AOTAutograd, so the backward is compiled too) one graph without a break, whose outputs and
gradients are eager's, a dropped layer's parameters getting zero gradients (not None, the documented change).
"""

from __future__ import annotations

import sys
import textwrap
import types

import pytest

from mend.analyzers import static
from mend.analyzers.static.config import Config
from mend.rewriter import FixOptions, fix_source, helpers

torch = pytest.importorskip("torch")

LAYER = """
import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, output_attentions=False):
        return (torch.tanh(self.fc(x)), x.softmax(-1) if output_attentions else None)


class Stack(nn.Module):
    def __init__(self, layerdrop=0.5):
        super().__init__()
        self.layers = nn.ModuleList([Layer() for _ in range(4)])
        self.layerdrop = layerdrop
        self.gradient_checkpointing = False

    def forward(self, hidden_states, output_attentions=False, synced_gpus=False):
        attentions = () if output_attentions else None
        for idx, layer in enumerate(self.layers):
LOOP
        return hidden_states, attentions
"""

CONTINUE = """
            if self.training:
                dropout_probability = torch.rand([])
                if dropout_probability < self.layerdrop:
                    continue
            if self.gradient_checkpointing and self.training:
                layer_outputs = self._gradient_checkpointing_func(layer.__call__, hidden_states, output_attentions)
            else:
                layer_outputs = layer(hidden_states, output_attentions=output_attentions)
            hidden_states = layer_outputs[0]
            if output_attentions:
                attentions += (layer_outputs[1],)
"""

FLAG = """
            to_drop = False
            if self.training:
                dropout_probability = torch.rand([])
                if dropout_probability < self.layerdrop:  # skip the layer
                    to_drop = True

            if to_drop:
                layer_outputs = (None, None)
            else:
                layer_outputs = layer(hidden_states, output_attentions=output_attentions)
                hidden_states = layer_outputs[0]

            if output_attentions:
                attentions = attentions + (layer_outputs[1],)
"""

IFEXP = """
            dropout_probability = torch.rand([])
            skip_the_layer = True if self.training and (dropout_probability < self.layerdrop) else False
            if not skip_the_layer or synced_gpus:
                layer_outputs = layer(hidden_states, output_attentions=output_attentions)
                hidden_states = layer_outputs[0]
            if skip_the_layer:
                layer_outputs = (None, None)
            if output_attentions:
                attentions = attentions + (layer_outputs[1],)
"""

FORMS = {"continue": CONTINUE, "flag": FLAG, "ifexp": IFEXP}


def _source(loop: str) -> str:
    body = textwrap.indent(textwrap.dedent(loop).strip("\n"), " " * 12)
    return textwrap.dedent(LAYER).replace("LOOP", body)


def _fix(src: str, unsafe: bool = True):
    config = Config()

    def diagnose(text: str) -> list:
        return list(static.check_source(text, "stack.py", config))

    return diagnose, fix_source(src, "stack.py", None, FixOptions(unsafe=unsafe, select=("MND201",)), diagnose)


def _load(src: str, name: str):
    mod = types.ModuleType(name)
    sys.modules.setdefault("_mend", helpers)  # a loose script imports its helpers `from _mend import ...`
    exec(compile(src, f"{name}.py", "exec"), mod.__dict__)
    return mod


def _run(model, x, seed: int, **kwargs):
    torch.manual_seed(seed)
    model.zero_grad(set_to_none=True)
    out, attentions = model(x, **kwargs)
    out.sum().backward()
    grads = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    return out.detach(), grads, torch.get_rng_state(), attentions


@pytest.mark.parametrize("form", sorted(FORMS))
def test_repairs_and_keeps_eager(form) -> None:
    src = _source(FORMS[form])
    diagnose, res = _fix(src)
    assert res.error is None
    assert [p.strategy for p in res.applied] == ["layerdrop_select"]
    assert "_mend_layer_drop(" in res.fixed
    assert [d for d in diagnose(res.fixed) if d.code == "MND201"] == []  # re-checks clean
    assert _fix(res.fixed)[1].fixed == res.fixed  # fixing twice is fixing once
    before, after = _load(src, f"before_{form}").Stack(), _load(res.fixed, f"after_{form}").Stack()
    after.load_state_dict(before.state_dict())
    before.train(), after.train()
    x = torch.randn(3, 4, requires_grad=True)
    for seed in range(6):  # layerdrop 0.5 over 4 layers: some steps drop layers, some do not
        a, b = _run(before, x, seed), _run(after, x, seed)
        assert torch.equal(a[0], b[0])
        assert all((g is None and h is None) or torch.equal(g, h) for g, h in zip(a[1], b[1]))
        assert torch.equal(a[2], b[2])  # the random stream after the step


@pytest.mark.parametrize("form", sorted(FORMS))
def test_one_graph_and_eager_values_under_compile(form) -> None:
    from torch._dynamo.testing import CompileCounterWithBackend

    src = _source(FORMS[form])
    res = _fix(src)[1]
    before, after = _load(src, f"cb_{form}").Stack(), _load(res.fixed, f"ca_{form}").Stack()
    after.load_state_dict(before.state_dict())
    before.train(), after.train()
    x = torch.randn(3, 4, requires_grad=True)
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(after, backend=counter, fullgraph=True)
    dropped = 0
    for seed in range(6):
        want, got = _run(before, x, seed), _run(compiled, x, seed)
        torch.testing.assert_close(got[0], want[0])
        for g, h in zip(want[1], got[1]):  # a dropped layer's parameters: zero gradients where eager has None
            dropped += g is None
            torch.testing.assert_close(h, torch.zeros_like(h) if g is None else g)
    assert counter.frame_count == 1
    assert dropped > 0  # some step dropped a layer, so the selection was tested


def test_flags_that_read_the_layer_outputs_keep_the_original() -> None:
    """With ``output_attentions`` the collected tuple is the original's: the original test runs (a break)."""
    src = _source(CONTINUE)
    res = _fix(src)[1]
    assert "if not torch.compiler.is_compiling() or output_attentions:" in res.fixed
    before, after = _load(src, "fb").Stack(), _load(res.fixed, "fa").Stack()
    after.load_state_dict(before.state_dict())
    before.train(), after.train()
    torch._dynamo.reset()
    compiled = torch.compile(after, backend="aot_eager")
    x = torch.randn(3, 4, requires_grad=True)
    for seed in range(4):
        want, got = _run(before, x, seed, output_attentions=True), _run(compiled, x, seed, output_attentions=True)
        assert len(got[3]) == len(want[3])
        torch.testing.assert_close(got[0], want[0])


def test_safe_fixes_keep_the_guard_only() -> None:
    res = _fix(_source(CONTINUE), unsafe=False)[1]
    assert [p.strategy for p in res.applied] == ["layerdrop_guard"]
    assert "_mend_layer_drop" not in res.fixed


def test_each_applied_fix_says_where_its_break_stays_by_design() -> None:
    """The guard leaves the test's break in training where p > 0; the select form where a flag keeps the
    original test; the corpus report lists such sites apart (benchmarks.corpus.report.kept_breaks)."""
    guard = _fix(_source(CONTINUE), unsafe=False)[1].applied
    assert [a.keeps_break for a in guard] == ["in training where the probability is above 0"]
    assert "stays in training where the probability is above 0" in guard[0].message
    flagged = _fix(_source(CONTINUE))[1].applied
    assert [a.keeps_break for a in flagged] == ["in training where `output_attentions` holds"]
    assert "where `output_attentions` holds the original test runs" in flagged[0].message
    bare = _source(CONTINUE).replace("            if output_attentions:\n                attentions += (layer_outputs[1],)\n", "")
    assert bare != _source(CONTINUE)
    assert [a.keeps_break for a in _fix(bare)[1].applied] == [""]  # no flag: the break goes in every configuration


@pytest.mark.parametrize("change,reason", [
    # Informer's distilling convolution after the layer: the skipped part does more than call the layer
    ("layer_outputs = layer(hidden_states, output_attentions=output_attentions)\n",
     "layer_outputs = layer(hidden_states, output_attentions=output_attentions)\n"
     "            layer_outputs = (layer_outputs[0][:, :2],) + layer_outputs[1:]\n"),
    # the layer's output read after it outside a flag
    ("            if output_attentions:\n                attentions += (layer_outputs[1],)\n",
     "            attentions = layer_outputs[1]\n"),
])
def test_declines_with_the_statement(change, reason) -> None:
    src = _source(CONTINUE).replace(textwrap.indent(change, "") if change.startswith(" ") else change, reason, 1)
    assert src != _source(CONTINUE)
    res = _fix(src)[1]
    assert [p.strategy for p in res.applied] == ["layerdrop_guard"]  # the safe guard still applies
    assert "_mend_layer_drop" not in res.fixed


def test_helper_selects_the_input_where_dropped() -> None:
    layer = torch.nn.Linear(2, 2)
    x = torch.randn(3, 2)
    assert torch.equal(helpers.layer_drop(torch.tensor(True), x, lambda h: (layer(h), 1), x)[0], x)
    assert torch.equal(helpers.layer_drop(torch.tensor(False), x, layer, x), layer(x))
    assert torch.equal(helpers.layer_drop(False, x, layer, x), layer(x))


TUPLE = """
            to_drop = False
            if self.training:
                dropout_probability = torch.rand([])
                if dropout_probability < self.layerdrop:
                    to_drop = True
            if not to_drop:
                hidden_states, attn = layer(hidden_states, output_attentions=output_attentions)
            READ
"""


@pytest.mark.parametrize("read,applies", [
    ("if output_attentions:\n                attentions = attentions + (attn,)", True),  # under the flag
    ("attentions = (attn,)", False),  # the layer's second output read where a dropped layer gives none
])
def test_a_tuple_target_s_other_outputs_are_read_only_under_flags(read, applies) -> None:
    res = _fix(_source(TUPLE.replace("READ", read)))[1]
    assert ("_mend_layer_drop(" in res.fixed) is applies
    if applies:
        assert "if not torch.compiler.is_compiling() or output_attentions:" in res.fixed
