"""The LayerDrop guard (``layerdrop_guard``) applies only where every part of its proof holds."""

from __future__ import annotations

import textwrap

import pytest

from mend.rewriter import FixOptions, fix_source
from tests.rewriter.conftest import diag

SOURCE = """
import torch
from torch import nn


class Decoder(nn.Module):
    def __init__(self, config, layerdrop=0.0):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.layerdrop = LAYERDROP

    def forward(self, x):
        for layer in self.layers:
            if self.training:
                DRAW
                if TEST:
                    continue
            x = layer(x)
        return x
"""


def _fix(layerdrop: str = "layerdrop", draw: str = "u = torch.rand([])", test: str = "u < self.layerdrop"):
    src = textwrap.dedent(SOURCE).replace("LAYERDROP", layerdrop).replace("DRAW", draw).replace("TEST", test)
    line = src.splitlines().index(f"                if {test}:") + 1
    res = fix_source(src, "t.py", [diag("MND201", line, 20)], FixOptions())
    return res


@pytest.mark.parametrize("layerdrop,draw,test,guard", [
    ("layerdrop", "u = torch.rand([])", "u < self.layerdrop", "self.layerdrop > 0 and u < self.layerdrop"),
    ("config.decoder_layerdrop", "u = torch.rand(1)", "self.layerdrop > u", "self.layerdrop > 0 and self.layerdrop > u"),
    ("0.1", "u = torch.rand((), dtype=torch.float16)", "u < self.layerdrop", "self.layerdrop > 0 and u < self.layerdrop"),
    # flaubert: a configuration number with a default
    ('getattr(config, "layerdrop", 0.0)', "u = torch.rand([])", "u < self.layerdrop",
     "self.layerdrop > 0 and u < self.layerdrop"),
    # fsmt, led, mask2former: the draw's test behind `self.training and`
    ("layerdrop", "u = torch.rand([])", "self.training and (u < self.layerdrop)",
     "self.training and self.layerdrop > 0 and (u < self.layerdrop)"),
])
def test_applies(layerdrop, draw, test, guard) -> None:
    res = _fix(layerdrop, draw, test)
    assert [p.strategy for p in res.applied] == ["layerdrop_guard"]
    assert f"if {guard}:" in res.fixed


@pytest.mark.parametrize("layerdrop,draw,test", [
    ("layerdrop", "u = torch.rand([])", "u <= self.layerdrop"),  # u == 0 <= 0: the guard would change it
    ("layerdrop", "u = torch.rand(2)", "u < self.layerdrop"),  # eager raises (ambiguous truth value)
    ("layerdrop", "u = torch.randn([])", "u < self.layerdrop"),  # can be negative
    ("layerdrop", "u = torch.rand([], dtype=torch.complex64)", "u < self.layerdrop"),
    ("torch.tensor(0.0)", "u = torch.rand([])", "u < self.layerdrop"),  # not proven a number
    ("config", "u = torch.rand([])", "u < self.layerdrop"),
    ('getattr(config, "layerdrop", None)', "u = torch.rand([])", "u < self.layerdrop"),  # the default: no number
    ('getattr(config, name, 0.0)', "u = torch.rand([])", "u < self.layerdrop"),
    ("layerdrop", "u = torch.rand([]); u = u * 2", "u < self.layerdrop"),  # bound twice
    ("layerdrop", "u = torch.rand([]); u.sub_(1)", "u < self.layerdrop"),  # changed in between
])
def test_declines(layerdrop, draw, test) -> None:
    res = _fix(layerdrop, draw, test)
    assert all(p.strategy != "layerdrop_guard" for p in res.applied)
    assert f"if {test}:" in res.fixed


IFEXP = """
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        CONFIG
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.layerdrop = config.encoder_layerdrop

    def forward(self, x, synced_gpus=False):
        for layer in self.layers:
            dropout_probability = torch.rand([])
            skip_the_layer = True if TEST else False
            if not skip_the_layer or synced_gpus:
                x = layer(x)
        return x
"""


def _fix_ifexp(test: str, config: str = "self.config = config"):
    src = textwrap.dedent(IFEXP).replace("TEST", test).replace("CONFIG", config)
    line = next(i for i, t in enumerate(src.splitlines(), 1) if "skip_the_layer = True if" in t)
    col = src.splitlines()[line - 1].index(test) + 1
    return fix_source(src, "t.py", [diag("MND201", line, col)], FixOptions())


@pytest.mark.parametrize("test,guarded", [
    # M2M100 (transformers 4.52.4)
    ("self.training and (dropout_probability < self.layerdrop)",
     "self.training and self.layerdrop > 0 and (dropout_probability < self.layerdrop)"),
    # wav2vec2, hubert, ...: the configuration's number
    ("self.training and (dropout_probability < self.config.layerdrop)",
     "self.training and self.config.layerdrop > 0 and (dropout_probability < self.config.layerdrop)"),
    ("(self.training and dropout_probability < self.layerdrop)",
     "(self.training and self.layerdrop > 0 and dropout_probability < self.layerdrop)"),
    ("dropout_probability < self.layerdrop", "self.layerdrop > 0 and dropout_probability < self.layerdrop"),
])
def test_applies_to_a_conditional_expression(test, guarded) -> None:
    res = _fix_ifexp(test)
    assert [p.strategy for p in res.applied] == ["layerdrop_guard"], [r.reason for r in res.remaining]
    assert f"skip_the_layer = True if {guarded} else False" in res.fixed
    assert "dropout_probability = _mend_drawn(torch.rand([]))" in res.fixed


@pytest.mark.parametrize("test,config", [
    ("x.any() and (dropout_probability < self.layerdrop)", "self.config = config"),  # a tensor test before
    ("self.training or (dropout_probability < self.layerdrop)", "self.config = config"),
    ("self.training and (dropout_probability < self.layerdrop) and x.any()", "self.config = config"),
    ("self.training and (dropout_probability < self.config.layerdrop)", "self.config = config.encoder"),
    ("self.training and (dropout_probability < self.config.layerdrop)", "pass"),  # self.config unknown
    ("self.training and (dropout_probability <= self.layerdrop)", "self.config = config"),
])
def test_declines_a_conditional_expression(test, config) -> None:
    res = _fix_ifexp(test, config)
    assert all(p.strategy != "layerdrop_guard" for p in res.applied)
    assert f"skip_the_layer = True if {test} else False" in res.fixed


@pytest.mark.parametrize("draw,applies", [
    ("u = random.uniform(0, 1)", True),  # MusicGen's decoder
    ("u = random.uniform(0.0, 1.0)", True),
    ("u = random.uniform(0, 2)", False),  # only a draw of [0, 1) is matched
    ("u = random.uniform(-1, 1)", False),  # can be negative: below a bound of 0
    ("u = random.gauss(0, 1)", False),
])
def test_python_uniform_draw(draw, applies) -> None:
    """A Python ``random.uniform(0, 1)`` draw is guarded like ``torch.rand``, without ``_mend_drawn`` (Dynamo
    draws it before the graph runs, read or not)."""
    src = textwrap.dedent(SOURCE).replace("LAYERDROP", "layerdrop").replace("DRAW", draw).replace(
        "TEST", "u < self.layerdrop").replace("import torch", "import random\nimport torch")
    line = src.splitlines().index("                if u < self.layerdrop:") + 1
    res = fix_source(src, "t.py", [diag("MND201", line, 20)], FixOptions())
    assert ([p.strategy for p in res.applied] == ["layerdrop_guard"]) == applies
    assert ("if self.layerdrop > 0 and u < self.layerdrop:" in res.fixed) == applies
    assert "_mend_drawn" not in res.fixed and draw in res.fixed
