"""Every recompile trigger of dynamo.md section 5 (5 varied calls, backend eager, default config)."""

from __future__ import annotations

import pytest
import torch

from mend.analyzers.runtime import record

from .conftest import line_of

SOURCE = """
import torch
SCALE = 0.5

def f_tensor(x):
    return x.sin() + 1

def f_int(x, n):
    return x * n + 1  # <<

def f_float(x, s):
    return x * s + 1  # <<

def f_global(x):
    return x * SCALE  # <<

def f_list(xs):
    return sum(xs)  # <<

def f_str(x, mode):
    return x.relu() if mode == "relu" else x.sigmoid()  # <<

class IntAttr(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.k = 0

    def forward(self, x):
        return self.lin(x) * self.k  # <<

class FloatAttr(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.scale = 0.5

    def forward(self, x):
        return self.lin(x) * self.scale  # <<

class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.counter = 0

    def forward(self, x):
        self.counter += 1  # <<
        return self.lin(x)

class BN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(x)

class Buffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("counter", torch.zeros(()))

    def forward(self, x):
        self.counter += 1
        return self.lin(x)
"""


@pytest.fixture
def mod(load_module):
    return load_module(SOURCE)


def _calls(mod, case):
    """(compiled callable, list of argument tuples, grad-mode per call or None)."""
    x = torch.randn(4, 4)
    if case == "batch":
        return torch.compile(mod.f_tensor, backend="eager"), [(torch.randn(b, 4),) for b in range(2, 7)]
    if case == "batch_no_auto_dynamic":
        return torch.compile(mod.f_tensor, backend="eager"), [(torch.randn(b, 4),) for b in range(2, 7)]
    if case == "int_arg":
        return torch.compile(mod.f_int, backend="eager"), [(x, n) for n in range(2, 7)]
    if case == "int_as_tensor":
        return torch.compile(mod.f_int, backend="eager"), [(x, torch.tensor(n)) for n in range(2, 7)]
    if case == "float_arg":
        return torch.compile(mod.f_float, backend="eager"), [(x, 0.5 + i) for i in range(5)]
    if case == "dtype":
        dts = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.float32]
        return torch.compile(mod.f_tensor, backend="eager"), [(x.to(d),) for d in dts]
    if case == "requires_grad":
        return torch.compile(mod.f_tensor, backend="eager"), [(x.clone().requires_grad_(i % 2 == 1),) for i in range(5)]
    if case == "stride":
        return torch.compile(mod.f_tensor, backend="eager"), [(x,), (x.t(),), (x,), (x.t(),), (x,)]
    if case == "list_len":
        return torch.compile(mod.f_list, backend="eager"), [([x] * n,) for n in range(2, 7)]
    if case == "str_arg":
        return torch.compile(mod.f_str, backend="eager"), [(x, m) for m in ("relu", "a", "b", "c", "d")]
    raise AssertionError(case)


# case: (recompiles, kind, marker of the attributed line or None for the function's def line)
CASES = {
    "batch": (1, "shape", None),
    "int_arg": (1, "value", "return x * n + 1"),
    "int_as_tensor": (0, None, None),
    "float_arg": (1, "value", "return x * s + 1"),
    "dtype": (3, "dtype", None),
    "requires_grad": (1, "requires-grad", None),
    "stride": (1, "stride", None),
    "list_len": (4, "length", "return sum(xs)"),
    "str_arg": (4, "value", 'mode == "relu"'),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_function_recompile_triggers(case, mod):
    fn, calls = _calls(mod, case)
    expected, kind, marker = CASES[case]
    with record() as rec:
        for args in calls:
            fn(*args)
    assert rec.recompile_count == expected, [(r.kind, r.guard, r.count) for r in rec.recompiles]
    assert rec.graph_break_count == 0
    if expected:
        (site,) = rec.recompiles
        assert site.kind == kind and site.count == expected
        assert site.line == (line_of(mod, marker) if marker else site.function_line)
        assert site.reason and site.guard
        (region,) = rec.regions.values()
        assert region.compiles == expected + 1 and region.recompiles == expected


def test_global_value_recompile(mod):
    fn = torch.compile(mod.f_global, backend="eager")
    with record() as rec:
        fn(torch.randn(4))
        mod.SCALE = 0.75
        fn(torch.randn(4))
    (site,) = rec.recompiles
    assert (site.kind, site.count, site.line) == ("global-value", 1, line_of(mod, "return x * SCALE"))
    assert "SCALE" in site.guard


def test_grad_mode_recompile(mod):
    fn = torch.compile(mod.f_tensor, backend="eager")
    with record() as rec:
        fn(torch.randn(4))
        with torch.no_grad():
            fn(torch.randn(4))
    (site,) = rec.recompiles
    assert site.kind == "global-state" and site.count == 1 and "grad_mode" in site.reason


@pytest.mark.parametrize(
    "cls, attr, values, expected, kind, marker",
    [
        ("IntAttr", "k", [1, 2, 3, 4, 5], 4, "int-attribute", "return self.lin(x) * self.k"),
        ("FloatAttr", "scale", [0.5, 0.6, 0.7, 0.8, 0.9], 1, "attribute", "return self.lin(x) * self.scale"),
    ],
)
def test_module_attribute_recompiles(mod, cls, attr, values, expected, kind, marker):
    model = getattr(mod, cls)()
    compiled = torch.compile(model, backend="eager")
    with record() as rec:
        for v in values:
            setattr(model, attr, v)
            compiled(torch.randn(2, 4))
    (site,) = rec.recompiles
    assert (site.kind, site.count, site.function) == (kind, expected, "forward")
    assert site.line == line_of(mod, marker) and site.source_line.endswith("# <<")


def test_counter_in_forward_recompiles_every_call_until_the_limit(mod):
    compiled = torch.compile(mod.Counter(), backend="eager")
    with record() as rec:
        for _ in range(5):
            compiled(torch.randn(2, 4))
    (site,) = rec.recompiles
    assert (site.kind, site.count, site.limit_hit) == ("int-attribute", 4, False)
    assert site.line == line_of(mod, "self.counter += 1")
    with record() as rec:
        for _ in range(6):  # 11 calls in all: the 9th compile hits the recompile limit (8)
            compiled(torch.randn(2, 4))
    (site,) = rec.recompiles
    assert site.count == 4 and site.limit_hit  # recompiles 5..8 here; the 8th hits the limit


def test_buffer_counter_never_recompiles(mod):
    compiled = torch.compile(mod.Buffer(), backend="eager")
    with record() as rec:
        for _ in range(5):
            compiled(torch.randn(2, 4))
    assert rec.recompiles == [] and rec.graphs == 1


def test_train_eval_toggle_attributed_to_the_user_function(mod):
    model = mod.BN()
    compiled = torch.compile(model, backend="eager")
    with record() as rec:
        compiled(torch.randn(3, 4))
        model.eval()
        compiled(torch.randn(3, 4))
    (site,) = rec.recompiles
    assert site.kind == "train-eval" and site.count == 1
    # the guard's source line is torch's batchnorm.py: the site is the user's line that calls it
    assert site.line == line_of(mod, "return self.bn(x)") and site.function == "forward"
    assert "training" in site.guard


def test_separately_compiled_instances_do_not_recompile(mod):
    with record() as rec:
        for _ in range(5):
            torch.compile(mod.FloatAttr(), backend="eager")(torch.randn(2, 4))
    assert rec.recompiles == []
