"""MND310/MND311 repaired by a Python copy kept beside a shape tensor (rewriter/fixes/kept_values.py)."""

from __future__ import annotations

import textwrap

import pytest

from mend.rewriter import FixOptions, fix_source
from tests.rewriter.conftest import FIXTURES, diag, graphs_and_breaks, helpers, load_fixture

torch = pytest.importorskip("torch")


def _helpers() -> dict:
    return helpers("_mend_keep_values", "_mend_kept")


@pytest.fixture
def compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.compiler.is_compiling()`` answers True, as while Dynamo traces the helpers."""
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)


def test_copy_is_kept_only_for_integer_tensors_of_python_ints(compiling: None) -> None:
    h = _helpers()
    keep, kept = h["_mend_keep_values"], h["_mend_kept"]
    shapes = [(4, 2), (2, 1)]
    t = keep(torch.as_tensor(shapes, dtype=torch.long), shapes)
    assert kept(t, 2) == ((4, 2), (2, 1))
    assert kept(t, 1) is t  # the reading code peels another number of dimensions
    assert kept(keep(torch.as_tensor([4, 2], dtype=torch.long), [4, 2]), 1) == (4, 2)
    assert kept(keep(torch.IntTensor([7]), [7]), 1) == (7,)  # int32: the constructor raises out of range
    for values, dtype in [([(4, 2.0)], torch.long), ([(True, 2)], torch.long), ([(4, 2)], torch.int16),
                          ([(4, 2)], torch.float32)]:
        other = torch.as_tensor(values, dtype=dtype)
        assert kept(keep(other, values), other.dim()) is other, (values, dtype)
    ragged = torch.as_tensor([[1, 2]], dtype=torch.long)
    assert kept(keep(ragged, [[1, 2, 3]]), 2) is ragged
    assert kept([(1, 2)], 2) == [(1, 2)]  # a list handed on instead: itself


def test_eager_always_reads_the_tensor_itself() -> None:
    h = _helpers()
    t = h["_mend_keep_values"](torch.as_tensor([(4, 2)], dtype=torch.long), [(4, 2)])
    assert t._mend_values == ((4, 2),) and h["_mend_kept"](t, 2) is t
    r = _range_helpers()["_mend_arange"](3)
    assert _range_helpers()["_mend_kept"](r, 1) is r


def test_fixture_eager_results_are_bitwise_equal() -> None:
    before, after = load_fixture("kept_values", "in")["f"], load_fixture("kept_values", "out")["f"]
    for shapes in [((2, 4, 4, 4), (2, 4, 2, 2)), ((1, 4, 6, 2), (1, 4, 3, 1)), ((3, 4, 1, 5), (3, 4, 7, 1))]:
        args = [torch.randn(*s) for s in shapes]
        a, b = before(*args), after(*args)
        assert a.dtype == b.dtype and torch.equal(a, b)


_SRC = '''
import torch


def levels(value, shapes):
    out = []
    for height, width in shapes:
        out.append(value.reshape(-1, height, width){use})
    return out


def build(value, sizes):
    shapes = torch.as_tensor(sizes, dtype=torch.long)
    return levels(value, shapes)
'''


@pytest.mark.parametrize(("use", "reason"), [
    (".sum() / height", "divides or raises it to a power"),
    (".sum() + height.item()", "uses it as a tensor"),
    (".sum() * helper(width)", "may treat it as a tensor"),
    ("[:1] if torch.tensor(height > 1) else None", "is used as a value, not a test"),
])
def test_declined_where_an_int_and_a_tensor_act_differently(use: str, reason: str) -> None:
    src = _SRC.format(use=use)
    res = fix_source(src, "t.py", [diag("MND310", 8, 20)], FixOptions(unsafe=True))
    assert res.fixed == src
    assert reason in res.remaining[0].reason, res.remaining[0].reason


def test_repair_reaches_the_function_the_tensor_is_passed_to() -> None:
    src = _SRC.format(use="")
    res = fix_source(src, "t.py", [diag("MND310", 8, 20)], FixOptions(unsafe=True))
    assert "for height, width in _mend_kept(shapes, 2):" in res.fixed
    assert "shapes = _mend_keep_values(torch.as_tensor(sizes, dtype=torch.long), sizes)" in res.fixed
    assert fix_source(src, "t.py", [diag("MND310", 8, 20)], FixOptions()).remaining[0].unsafe_available


@pytest.mark.parametrize("change", [
    ("levels(value, shapes)", "levels(value, shapes.clone())"),  # another tensor is passed on
    ("torch.as_tensor(sizes, dtype=torch.long)", "torch.as_tensor(sizes, dtype=torch.float32)"),
    ("torch.as_tensor(sizes, dtype=torch.long)", "torch.as_tensor(list(sizes), dtype=torch.long)"),
])
def test_no_repair_without_a_builder_that_reaches_the_site(change: tuple[str, str]) -> None:
    src = _SRC.format(use="").replace(*change)
    res = fix_source(src, "t.py", [diag("MND310", 8, 20)], FixOptions(unsafe=True))
    assert "_mend_kept" not in res.fixed


def test_the_fixed_file_runs_the_same_in_eager() -> None:
    src = _SRC.format(use=".sum() * width - height // 2")
    res = fix_source(src, "t.py", [diag("MND310", 8, 20)], FixOptions(unsafe=True))
    assert "_mend_kept(shapes, 2)" in res.fixed
    spaces: list[dict] = [{}, {}]
    for ns, text in zip(spaces, [src, res.fixed], strict=True):
        exec(compile(textwrap.dedent(text), "t.py", "exec"), ns)
    value = torch.randn(24)
    a = spaces[0]["build"](value, [(2, 3), (4, 1)])
    b = spaces[1]["build"](value, [(2, 3), (4, 1)])
    assert all(x.dtype == y.dtype and torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_repaired_fixture_checks_clean_and_the_builder_stays_a_tensor() -> None:
    """The analyzer reads `_mend_kept(t, n)` as Python numbers and `_mend_keep_values(t, v)` as `t`: the
    repaired reads are not reported, and a size taken from the kept tensor itself still is."""
    from mend.analyzers import static

    config = static.load_config([str(FIXTURES)], isolated=True)
    fixed = (FIXTURES / "kept_values.out.py").read_text()
    assert [d.code for d in static.check_source(fixed, "kept_values.py", config) if d.code.startswith("MND31")] == []
    still = fixed.replace("        return levels.sum() + points.sum()",
                          "        levels = levels[:, : spatial_shapes[0, 0]]\n        return levels.sum() + points.sum()")
    assert "MND311" in [d.code for d in static.check_source(still, "kept_values.py", config)]


# --- ranges: ``cache_position = torch.arange(a, b)`` -----------------------------------------------------

def _range_helpers() -> dict:
    return helpers("_mend_arange", "_mend_kept")


def test_a_range_keeps_its_numbers_only_for_int_bounds_and_an_int64_result(compiling: None) -> None:
    ns = _range_helpers()
    arange, kept = ns["_mend_arange"], ns["_mend_kept"]
    t = arange(2, 9)
    numbers = kept(t, 1)
    assert torch.equal(t, torch.arange(2, 9)) and list(numbers) == t.tolist() == list(range(2, 9))
    assert (numbers[0], numbers[-1], numbers[3], len(numbers)) == (2, 8, 5, 7)
    assert all(type(numbers[i]) is int for i in (0, -1))
    for i in (7, -8):  # out of range: IndexError, as the tensor raises
        with pytest.raises(IndexError):
            numbers[i]
    assert torch.equal(numbers[torch.tensor(1)], t[torch.tensor(1)])  # another index reads the tensor
    assert list(kept(arange(5), 1)) == [0, 1, 2, 3, 4]
    for bounds, kwargs in [((0, 4.0), {}), ((4,), {"dtype": torch.int32}), ((4,), {"dtype": torch.float32}),
                           ((torch.tensor(4),), {}), ((2, 9, 3), {}), ((True,), {})]:
        other = arange(*bounds, **kwargs)
        assert torch.equal(other, torch.arange(*bounds, **kwargs)) and kept(other, 1) is other, bounds


def test_a_range_of_a_symbolic_size_compiles_once_for_every_length() -> None:
    """The copy of ``arange(0, x.shape[1])`` under dynamic shapes: a Python ``range`` of the symbolic size
    would specialize it (one compile per length); the kept span does not."""
    ns = _range_helpers()

    def f(x):
        positions = ns["_mend_arange"](0, x.shape[1])
        numbers = ns["_mend_kept"](positions, 1)
        return x[:, : numbers[-1] + 1] * 2 + (1 if numbers[0] > 0 else 0)

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    g = torch.compile(f, backend=backend, dynamic=True, fullgraph=True)
    for n in (5, 7, 9, 11):
        x = torch.randn(2, n)
        assert torch.equal(g(x), f(x))
    assert len(graphs) == 1


def test_range_fixture_eager_results_are_bitwise_equal_in_prefill_and_decoding() -> None:
    before, after = load_fixture("kept_range", "in")["model"], load_fixture("kept_range", "out")["model"]
    torch.manual_seed(3)
    for h, cache, positions in [
        (torch.randn(2, 5, 8), torch.randn(2, 5, 8), None),  # prefill: the positions built with a copy
        (torch.randn(2, 3, 8), None, None),
        (torch.randn(1, 1, 8), torch.randn(1, 4, 8), torch.tensor([4])),  # decoding: positions handed in
        (torch.randn(1, 2, 8), torch.randn(1, 4, 8), torch.tensor([1, 2])),
    ]:
        a = before(h, cache=cache, cache_position=positions)
        b = after(h, cache=cache, cache_position=positions)
        assert a.dtype == b.dtype and torch.equal(a, b)
        assert before.layers[0].rotary.max_seq_len_cached == after.layers[0].rotary.max_seq_len_cached


_RANGE_SRC = '''
import torch


def step(h, positions):
    n = positions[-1] + 1
    {use}
    return h


def run(h):
    positions = torch.arange(0, h.shape[1], device=h.device)
    return step(h, positions)
'''


@pytest.mark.parametrize(("use", "reason"), [
    ("flag = n > 1\n    h = h * flag.float()", "uses it as a tensor"),
    ("h = torch.nn.functional.pad(h, [0, 1]) if external(n) else h", "may treat it as a tensor"),
    ("h.meta.length = n", "is stored to `h.meta.length`"),
    ("h = h / n", "divides or raises it to a power"),
    ("positions.add_(1)\n    h = h[:, :n]", "`positions` is written in place in step()"),
])
def test_a_range_read_is_declined_where_an_int_and_a_tensor_act_differently(use: str, reason: str) -> None:
    src = _RANGE_SRC.format(use=use)
    res = fix_source(src, "t.py", [diag("MND310", 6, 9)], FixOptions(unsafe=True))
    assert "_mend_kept" not in res.fixed and "_mend_arange" not in res.fixed
    assert any(reason in r.reason for r in res.remaining), [r.reason for r in res.remaining]


@pytest.mark.parametrize(("decorator", "kept"), [("@torch.jit.script\n", True), ("", True),
                                                ("@torch.compiler.disable\n", False)])
def test_a_number_is_passed_to_a_function_dynamo_traces(decorator: str, kept: bool) -> None:
    """``@torch.jit.script`` (VITS' ``fused_add_tanh_sigmoid_multiply``) takes the copy: Dynamo traces its
    Python source, and eager, where TorchScript would reject an int, reads the tensor. Another wrapper may
    run the function outside Dynamo with the int: declined."""
    src = _RANGE_SRC.format(use="h = gate(h, n)") + f"\n\n{decorator}def gate(h, k):\n    return h[:, :k]\n"
    res = fix_source(src, "t.py", [diag("MND310", 6, 9)], FixOptions(unsafe=True))
    assert ("_mend_kept" in res.fixed) is kept, res.fixed
    if not kept:
        assert any("is wrapped by `@torch.compiler.disable`" in r.reason for r in res.remaining), \
            [r.reason for r in res.remaining]


_SCRIPTED = '''
import torch


@torch.jit.script
def gated(a, b, num_channels):
    act = a + b
    return torch.tanh(act[:, :num_channels]) * torch.sigmoid(act[:, num_channels:])


class Wave(torch.nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size

    def forward(self, a, b):
        num_channels_tensor = torch.IntTensor([self.hidden_size])
        return gated(a, b, num_channels_tensor[0])


def chunked(x, chunk_size):
    shape = torch.tensor([x.shape[0], chunk_size])
    batch, length = shape
    if not torch.compiler.is_compiling():
        print(length)  # eager only: not checked
    else:
        torch._assert_async(torch.logical_not(torch.as_tensor(length % 2 != 0)), "odd")  # a validation repair's
    return x[:batch, :length] * 2
'''


def _module(path, text: str) -> dict:
    """``text`` run as a module from the file ``path`` (TorchScript reads a function's source file)."""
    import importlib.util

    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return vars(module)


def test_an_int32_literal_handed_to_a_scripted_function_compiles_whole(tmp_path, capsys: pytest.CaptureFixture) -> None:
    res = fix_source(_SCRIPTED, "t.py", [diag("MND311", 8, 21)], FixOptions(unsafe=True))
    assert "_mend_keep_values(torch.IntTensor([self.hidden_size]), [self.hidden_size])" in res.fixed
    assert "gated(a, b, _mend_kept(num_channels_tensor, 1)[0])" in res.fixed
    assert "batch, length = _mend_kept(shape, 1)" in res.fixed
    assert fix_source(res.fixed, "t.py", [], FixOptions(unsafe=True)).fixed == res.fixed
    before, after = _module(tmp_path / "scripted_before.py", _SCRIPTED), _module(tmp_path / "scripted_after.py", res.fixed)
    a, b = torch.randn(2, 8, 3), torch.randn(2, 8, 3)
    want = before["Wave"](4)(a, b)
    assert torch.equal(after["Wave"](4)(a, b), want)  # eager: TorchScript still gets its tensor
    out, graphs, breaks = graphs_and_breaks(after["Wave"](4), a, b)
    assert torch.equal(out, want) and (graphs, breaks) == (1, 0)
    assert graphs_and_breaks(before["Wave"](4), a, b)[2] >= 1  # the original breaks there
    x = torch.randn(3, 6)
    assert torch.equal(after["chunked"](x, 4), before["chunked"](x, 4))
    assert capsys.readouterr().out == "tensor(4)\ntensor(4)\n"  # eager prints the tensor, as before
    out, graphs, breaks = graphs_and_breaks(after["chunked"], x, 4)
    assert torch.equal(out, before["chunked"](x, 4)) and (graphs, breaks) == (1, 0)


def test_a_range_read_as_a_size_is_repaired_with_the_builder() -> None:
    src = _RANGE_SRC.format(use="h = h[:, :n] * 2")
    res = fix_source(src, "t.py", [diag("MND311", 7, 16)], FixOptions(unsafe=True))
    assert "n = _mend_kept(positions, 1)[-1] + 1" in res.fixed
    assert "positions = _mend_arange(0, h.shape[1], device=h.device)" in res.fixed
    assert fix_source(res.fixed, "t.py", [], FixOptions(unsafe=True)).fixed == res.fixed


def test_without_unsafe_fixes_a_safe_branch_repair_is_not_displaced_by_the_kept_copy() -> None:
    src = _RANGE_SRC.format(use="if positions[0] > 0:\n        h = h * 2").replace(
        "def step(h, positions):", "def step(h: torch.Tensor, positions: torch.Tensor):")
    line = src.splitlines().index("    if positions[0] > 0:") + 1
    safe = fix_source(src, "t.py", [diag("MND201", line, 5)], FixOptions())
    assert "_mend_where(" in safe.fixed and "_mend_kept" not in safe.fixed
    unsafe = fix_source(src, "t.py", [diag("MND201", line, 5)], FixOptions(unsafe=True))
    assert "if _mend_kept(positions, 1)[0] > 0:" in unsafe.fixed and "_mend_where(" not in unsafe.fixed


_TABLE_SRC = '''
import torch


def _plain(config, device, seq_len=None):
    return torch.ones(4, device=device), 1.0


def _long(config, device, seq_len=None):
    if seq_len and seq_len > config["original"]:
        factors = torch.tensor(config["long"], device=device)
    else:
        factors = torch.tensor(config["short"], device=device)
    return 1.0 / factors, 1.0


def _dynamic(config, device, seq_len=None):
    seq_len = seq_len if seq_len is not None and seq_len > config["original"] else config["original"]
    base = 10000.0 * (3 * seq_len / config["original"] - 2) ** (8 / 6)
    return 1.0 / (base ** (torch.arange(0, 8, 2, dtype=torch.int64).float() / 8)), 1.0
{extra}

TABLE = {{"plain": _plain, "long": _long, "dynamic": _dynamic{entry}}}
'''

_MODEL_SRC = '''
import torch

from .rope import TABLE


class Rotary(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.init_fn = TABLE[config["kind"]]

    def forward(self, x, seq_len=None):
        scale = None
        if self.config["kind"] == "long" and seq_len:
            scale = 2.0 if seq_len > self.config["original"] else 0.5
        inv_freq, factor = self.init_fn(self.config, x.device, seq_len)
        t = torch.arange(seq_len, device=x.device, dtype=torch.float32)
        return torch.outer(t, inv_freq) * (factor if scale is None else scale)


class Model(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.rotary = Rotary(config)

    def forward(self, h, cache_position=None):
        if cache_position is None:
            cache_position = torch.arange(0, h.shape[1], device=h.device)
        return h.sum(1, keepdim=True) * self.rotary(h, seq_len=cache_position[-1] + 1)[-1]
'''


def _table_package(root, name: str, extra: str = "", entry: str = ""):
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "rope.py").write_text(_TABLE_SRC.format(extra=extra, entry=entry))
    (pkg / "model.py").write_text(_MODEL_SRC)
    return pkg


def _import_model(root, name: str):
    import importlib
    import sys

    sys.path.insert(0, str(root))
    try:
        return importlib.import_module(f"{name}.model")
    finally:
        sys.path.remove(str(root))


def test_a_number_passed_to_a_table_of_functions_in_a_module_beside(tmp_path) -> None:
    """phimoe's LongRoPE: ``self.rope_init_fn = ROPE_INIT_FUNCTIONS[...]`` (modeling_rope_utils.py) takes
    ``cache_position[-1] + 1``; every function of the table is checked in its own module: a test, a
    comparison, and (dynamic NTK) a quotient that only meets a tensor. Eager is bitwise the original's;
    compiled, one graph and eager's numbers (float64 where eager rounded the quotient in float32)."""
    from mend.rewriter.api import fix_paths

    _table_package(tmp_path, "tbl_before")
    pkg = _table_package(tmp_path, "tbl_after")
    run = fix_paths([pkg], FixOptions(unsafe=True), isolated=True)
    fixed = (pkg / "model.py").read_text()
    assert "self.rotary(h, seq_len=_mend_kept(cache_position, 1)[-1] + 1)" in fixed, fixed
    assert (pkg / "rope.py").read_text() == _TABLE_SRC.format(extra="", entry="")  # only the caller changes
    assert not run.errors
    before, after = _import_model(tmp_path, "tbl_before"), _import_model(tmp_path, "tbl_after")
    for kind in ("plain", "long", "dynamic"):
        for length in (3, 6):
            config = {"kind": kind, "original": 4, "long": [1.0, 2.0, 4.0, 8.0], "short": [1.0, 1.5, 2.0, 3.0]}
            h = torch.randn(2, length, 1)
            a, b = before.Model(config)(h), after.Model(config)(h)
            assert a.dtype == b.dtype and torch.equal(a, b), (kind, length)
            _, graphs_before, _ = graphs_and_breaks(before.Model(config), h)
            out, graphs, breaks = graphs_and_breaks(after.Model(config), h)
            assert graphs_before > 1 and (graphs, breaks) == (1, 0), (kind, length, graphs_before, graphs)
            torch.testing.assert_close(out, a, rtol=1e-5, atol=0), (kind, length)


@pytest.mark.parametrize(("extra", "entry", "reason"), [
    ("\n\ndef _sized(config, device, seq_len=None):\n    return torch.ones(int(seq_len / 2)), 1.0\n",
     ', "sized": _sized', "divides or raises it to a power"),
    ("", ', "anon": lambda config, device, seq_len=None: (torch.ones(seq_len), 1.0)', "may treat it as a tensor"),
    ("", '}\nTABLE.update(extra=lambda config, device, seq_len=None: (torch.ones(seq_len), 1.0))\n_UNUSED = {',
     "may treat it as a tensor"),
    ("", '}\nTABLE["extra"] = _plain  # an entry written later: a function the check did not see\n_UNUSED = {',
     "may treat it as a tensor"),
])
def test_a_table_of_functions_is_declined_where_one_entry_acts_differently(tmp_path, extra: str, entry: str,
                                                                             reason: str) -> None:

    pkg = _table_package(tmp_path, "tbl_declined", extra, entry)
    line = next(i for i, text in enumerate(_MODEL_SRC.splitlines(), 1) if "seq_len=cache_position" in text)
    col = _MODEL_SRC.splitlines()[line - 1].index("cache_position[-1]")
    res = fix_source(_MODEL_SRC, str(pkg / "model.py"), [diag("MND310", line, col)], FixOptions(unsafe=True))
    assert "_mend_kept(cache_position" not in res.fixed
    assert any(reason in r.reason for r in res.remaining), [r.reason for r in res.remaining]
    alone = fix_source(_MODEL_SRC, str(tmp_path / "elsewhere" / "model.py"), [diag("MND310", line, col)],
                       FixOptions(unsafe=True))  # the module beside is not there: its functions are not known
    assert "_mend_kept(" not in alone.fixed and "may treat it as a tensor" in alone.remaining[0].reason
