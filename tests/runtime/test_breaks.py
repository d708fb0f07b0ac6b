"""Every graph-break pattern of dynamo.md section 4, recorded with exact sites, ids, counts and graphs.

Each case is ``y = x.sin(); <pattern>; return y.cos()``-like; the line marked ``# <<`` is where the
break must be attributed (the user's line, also when Dynamo reports a library frame such as
``copy.py:153``). Expected graph counts are those of dynamo.md section 4.2 for the same code.
"""

from __future__ import annotations

import pytest
import torch

from mend.analyzers.runtime import counting_backend, record

from .conftest import line_of

HEADER = """
import contextlib, copy, datetime, inspect, io, logging, math, os, random, sys, threading, time, warnings, zlib
try:
    import numpy as np
except ImportError:  # torch does not need numpy; the numpy cases are skipped then
    np = None
import torch
logger = logging.getLogger("mend_rt_test")
logger.addHandler(logging.NullHandler())
logger.propagate = False
GLOBAL_LIST = []

@torch.compiler.disable
def _disabled_helper(t):
    return t + 1

@contextlib.contextmanager
def user_ctx():
    yield
"""

# name: (body lines of f(x) after `y = x.sin()`, [(marker, registry id, count, frame_skip)], graphs)
CASES: dict[str, tuple[str, list[tuple[str, str, int, bool]], int]] = {
    "print": ('print("hi")  # <<', [("# <<", "GB0059", 1, False)], 2),
    "print_tensor": ("print(y.shape, y)  # <<", [("# <<", "GB0059", 1, False)], 2),
    "logger_info": ('logger.info("step")  # <<', [("# <<", "GB0291", 1, False)], 2),
    "warnings_warn": ('warnings.warn("careful")  # <<', [("# <<", "GB0007", 1, False)], 2),
    "data_dep_if": ("if y.sum() > 0:  # <<\n    y = y + 1", [("# <<", "GB0170", 1, False)], 2),
    "item_arith": ("y = y * (y.sum().item() + 1.0)  # <<", [("# <<", "GB0124", 1, False)], 2),
    "float_of_tensor": ("y = y * float(y.sum())  # <<", [("# <<", "GB0124", 1, False)], 2),
    "int_of_tensor": ("y = y * int(y.sum())  # <<", [("# <<", "GB0124", 1, False)], 2),
    "math_sqrt_item": ("y = y * math.sqrt(y.abs().sum().item())  # <<", [("# <<", "GB0124", 1, False)], 2),
    "tolist_float": ("n = len(y.tolist())  # <<\ny = y * n", [("# <<", "GB0109", 1, False)], 2),
    "tolist_int": ("n = len((y > 0).long().tolist())  # <<\ny = y * n", [("# <<", "GB0033", 1, False)], 2),
    "time_time": ("t0 = time.time()  # <<", [("# <<", "GB0007", 1, False)], 2),
    "perf_counter": ("t0 = time.perf_counter()  # <<", [("# <<", "GB0007", 1, False)], 2),
    "datetime_now": ("now = datetime.datetime.now()  # <<", [("# <<", "GB0156", 1, False)], 2),
    "nonzero": ("idx = torch.nonzero(y)  # <<\ny = y + idx.shape[0]", [("# <<", "GB0036", 1, False)], 2),
    "bool_mask": ("y = y[y > 0].sum() + y  # <<", [("# <<", "GB0036", 1, False)], 2),
    "unique": ("u = torch.unique(y)  # <<\ny = y + u.sum()", [("# <<", "GB0036", 1, False)], 2),
    "random_random": ("y = y * random.random()  # <<", [("# <<", "GB0007", 1, False)], 2),
    "os_getpid": ("pid = os.getpid()  # <<", [("# <<", "GB0007", 1, False)], 2),
    "zlib_crc32": ('c = zlib.crc32(b"abc")  # <<', [("# <<", "GB0007", 1, False)], 2),
    "sys_getframe": ("fr = sys._getframe()  # <<", [("# <<", "GB0007", 1, False)], 2),
    # inspect.stack breaks inside inspect.py: attributed to the user's calling line
    "inspect_stack": ("st = inspect.stack()  # <<", [("# <<", "GB0007", 1, False)], 2),
    "manual_seed": ("torch.manual_seed(0)  # <<", [("# <<", "GB0007", 1, False)], 2),
    # copy.deepcopy breaks at copy.py:153: attributed to the user's line
    "deepcopy": ("y = copy.deepcopy(y)  # <<", [("# <<", "GB4198", 1, False)], 2),
    # BytesIO() breaks in torch's polyfills, then save is skip-listed: two breaks, one user line
    "torch_save": ("torch.save(y, io.BytesIO())  # <<", [("# <<", "GB0156", 1, False), ("# <<", "GB0007", 1, False)], 2),
    "graph_break": ("torch._dynamo.graph_break()  # <<", [("# <<", "GB0025", 1, False)], 2),
    "compiler_disable": ("y = _disabled_helper(y)  # <<", [("# <<", "GB0098", 1, False)], 2),
    "break_in_no_grad": ('with torch.no_grad():\n    print("inside")  # <<', [("# <<", "GB0059", 1, False)], 2),
    "str_tensor": ("s = str(y)  # <<", [("# <<", "GB0059", 1, False)], 2),
    "tensor_bool": ("if y.sum():  # <<\n    y = y + 1", [("# <<", "GB0170", 1, False)], 2),
    "nn_param_ctor": ("p = torch.nn.Parameter(torch.ones(4))  # <<\ny = y + p", [("# <<", "GB0264", 1, False)], 2),
    # the loop header is hit again in the resume function: one site, two occurrences
    "while_data_dep": ("while y.abs().sum() > 1:  # <<\n    y = y / 2", [("# <<", "GB0170", 2, False)], 3),
    # whole-frame skips: Dynamo gives up on the frame, 0 graphs
    "print_in_try": ('try:\n    print("hi")  # <<\nexcept Exception:\n    pass', [("# <<", "GB0059", 1, True)], 0),
    "data_ptr_arith": ("p = y.data_ptr()\ny = y + (p - p)  # <<", [("# <<", "GB0088", 1, True)], 0),
    "id_arith": ("i = id(y)\ny = y + (i - i)  # <<", [("# <<", "GB0088", 1, True)], 0),
    "fstring_tensor": ('n = len(f"{y}")  # <<\ny = y + n', [("# <<", "GB0088", 1, True)], 0),
    "print_in_loop": ("for i in range(3):\n    print(i)  # <<", [("# <<", "GB0059", 1, True)], 0),
    "break_in_user_ctx": ('with user_ctx():\n    print("inside")  # <<', [("# <<", "GB0059", 1, True)], 0),
}

TORCH = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])

# Dynamo itself behaves differently on torch 2.11 for these patterns (measured on 2.11.0): the user
# lines are the same, the registry ids, skips and graph counts are what 2.11 does.
TORCH_2_11 = {
    "data_ptr_arith": ([("# <<", "GB0059", 1, True)], 0),
    "deepcopy": ([("# <<", "GB0179", 1, False)], 2),
    "fstring_tensor": ([("# <<", "GB0156", 1, False)], 2),
    "id_arith": ([("i = id(y)", "GB0141", 1, False)], 2),
    "torch_save": ([("# <<", "GB0007", 2, False)], 2),
    "while_data_dep": ([("# <<", "GB0170", 2, True)], 1),
}
TORCH_2_11_BUGS = {
    "datetime_now": "torch 2.11's Dynamo raises 'Guard failed on the same frame it was created' on "
    "datetime.datetime.now(), with or without mend",
}

NO_BREAK = {
    "global_list_append": "GLOBAL_LIST.append(1)",
    "try_except": "try:\n    y = y + 1\nexcept ValueError:\n    y = y - 1",
    "randint": "k = random.randint(1, 3)\ny = y * k",
    "numpy_traced": "y = torch.from_numpy(np.exp(y.numpy()))",
    "np_asarray_float": "a = np.asarray(y)\ny = y + torch.from_numpy(a)",
}


def _program(body: str) -> str:
    lines = "\n".join("    " + ln for ln in body.splitlines())
    return HEADER + f"\ndef f(x):\n    y = x.sin()\n{lines}\n    return y.cos()\n"


@pytest.mark.parametrize("name", sorted(CASES))
def test_break_pattern_recorded_exactly(name, load_module, request):
    body, expected, graphs = CASES[name]
    if TORCH == (2, 11):
        expected, graphs = TORCH_2_11.get(name, (expected, graphs))
        if name in TORCH_2_11_BUGS:
            request.applymarker(pytest.mark.xfail(reason=TORCH_2_11_BUGS[name], raises=AssertionError, strict=True))
    mod = load_module(_program(body))
    compiled = torch.compile(mod.f, backend="eager")
    with record() as rec:
        out = compiled(torch.randn(4))
    assert out.shape == (4,)  # the program ran to completion
    got = sorted((b.line, b.registry_id, b.count, b.frame_skip) for b in rec.breaks)
    want = sorted((line_of(mod, marker), gb, count, skip) for marker, gb, count, skip in expected)
    assert got == want, [(b.path, b.line, b.gb_type, b.count, b.frame_skip) for b in rec.breaks]
    assert rec.graphs == graphs
    for b in rec.breaks:
        assert b.path.endswith(".py") and not b.in_library
        assert b.function == "f"
        assert b.source_line and b.source_line in open(mod.__file__).read()
    region = rec.regions[next(iter(rec.regions))]
    assert region.function == "f" and len(rec.regions) == 1
    assert region.frame_skips == (1 if any(s for *_, s in expected) else 0)


@pytest.mark.parametrize("name", sorted(NO_BREAK))
def test_non_breaking_pattern_records_nothing(name, load_module):
    if "np." in NO_BREAK[name] or ".numpy()" in NO_BREAK[name]:
        pytest.importorskip("numpy")
    mod = load_module(_program(NO_BREAK[name]))
    with record() as rec:
        torch.compile(mod.f, backend="eager")(torch.randn(4))
    assert rec.breaks == [] and rec.recompiles == []
    assert rec.graphs == 1


def test_open_with_two_breaks_one_graph(load_module, tmp_path):
    target = tmp_path / "out.txt"
    mod = load_module(_program(f'with open({str(target)!r}, "w") as fh:  # <<\n    fh.write("x")'))
    with record() as rec:
        torch.compile(mod.f, backend="eager")(torch.randn(4))
    line = line_of(mod, "# <<")
    assert sorted((b.line, b.registry_id) for b in rec.breaks) == [(line, "GB0059"), (line, "GB0142")]
    assert rec.graphs == 1
    assert target.read_text() == "x"  # the program's side effect happened


def test_backward_in_compiled_fn(load_module):
    mod = load_module(
        HEADER
        + "\ndef step(w, x):\n    loss = (w * x).sum()\n    loss.backward()  # <<\n    return loss.detach()\n"
    )
    w = torch.randn(4, requires_grad=True)
    with record() as rec:
        torch.compile(mod.step, backend="eager")(w, torch.randn(4))
    assert [(b.line, b.registry_id) for b in rec.breaks] == [(line_of(mod, "# <<"), "GB0123")]
    assert rec.graphs == 2  # the loss, then `loss.detach()` in the resume function
    assert w.grad is not None


def test_break_in_helper_is_attributed_to_the_helper_line(load_module):
    mod = load_module(
        HEADER
        + '\ndef helper(y):\n    print("in helper")  # <<\n    return y * 2\n'
        + "\ndef f(x):\n    y = x.sin()\n    y = helper(y)\n    return y.cos()\n"
    )
    with record() as rec:
        torch.compile(mod.f, backend="eager")(torch.randn(4))
    assert [(b.line, b.registry_id, b.function) for b in rec.breaks] == [(line_of(mod, "# <<"), "GB0059", "helper")]
    # Dynamo hits it twice: inlined from f, then when helper runs as its own frame
    assert rec.breaks[0].count == 2
    assert {r.function for r in rec.regions.values()} == {"f", "helper"}
    assert rec.graphs == 3


def test_nested_message_root_cause_is_first_gb_type(load_module):
    mod = load_module(_program("for i in range(3):\n    print(i)  # <<"))
    with record() as rec:
        torch.compile(mod.f, backend="eager")(torch.randn(4))
    (b,) = rec.breaks
    assert b.gb_type == "Failed to trace builtin operator" and b.registry_id == "GB0059"
    assert b.outer_gb_type == "graph break in loop" and b.outer_registry_id == "GB7000"
    assert b.frame_skip and "print" in b.message


def test_breaks_in_module_forward_and_regions(load_module):
    mod = load_module(
        HEADER
        + """
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        logger.debug("shape %s", h.shape)  # <<
        return h.relu()
"""
    )
    model = torch.compile(mod.M(), backend="eager")
    with record() as rec:
        for _ in range(3):
            model(torch.randn(2, 4))
    assert [(b.line, b.registry_id, b.count, b.function) for b in rec.breaks] == [(line_of(mod, "# <<"), "GB0291", 1, "forward")]
    (region,) = rec.regions.values()
    assert region.function == "forward" and region.graphs == 2 and region.recompiles == 0


def test_counting_backend_agrees_with_recorder(load_module):
    mod = load_module(_program('print("a")\ny = y + 1\nif y.sum() > 0:\n    y = y * 2'))
    backend = counting_backend()
    with record() as rec:
        torch.compile(mod.f, backend=backend)(torch.randn(4))
    assert backend.count == rec.graphs == 3
    assert rec.graph_break_count == 2


def test_record_is_nestable_and_stops(load_module):
    mod = load_module(_program('print("a")'))
    g = load_module(_program('print("b")'))
    with record() as outer:
        torch.compile(mod.f, backend="eager")(torch.randn(4))
        with record() as inner:
            torch.compile(g.f, backend="eager")(torch.randn(4))
    after = load_module(_program('print("c")'))
    torch.compile(after.f, backend="eager")(torch.randn(4))
    assert outer.graph_break_count == 2 and inner.graph_break_count == 1
    assert outer.graph_break_count == 2  # nothing recorded after the block


def test_fast_mode_same_breaks_and_swaps_backend(load_module):
    mod = load_module(_program('print("a")\ny = y * 2'))
    seen = []

    def real_backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    with record(fast=True) as rec:
        out = torch.compile(mod.f, backend=real_backend)(torch.randn(4))
    assert seen == []  # --fast ran the graphs eagerly instead of calling the backend
    assert rec.graphs == 2 and [b.registry_id for b in rec.breaks] == ["GB0059"]
    assert out.shape == (4,)
