"""Each unsafe situation is left alone and reported with its reason."""

from __future__ import annotations

import textwrap

import pytest

from mend.rewriter import FixOptions, fix_source
from tests.rewriter.conftest import diag

CASES = {
    "MoE routing: indices written through": ("MND304", 5, """
        import torch
        def route(x: torch.Tensor, mask: torch.Tensor, w: torch.Tensor, experts):
            final = torch.zeros_like(x)
            for e in range(len(experts)):
                idx, top_x = torch.where(mask[e])
                x[top_x] = 0
                final.index_add_(0, top_x, experts[e](x[top_x]) * w[top_x, idx, None])
            return final
        """, "used other than as a read index"),
    "MoE routing: indices read after the loop": ("MND304", 5, """
        import torch
        def route(x: torch.Tensor, mask: torch.Tensor, w: torch.Tensor, experts):
            final = torch.zeros_like(x)
            for e in range(len(experts)):
                idx, top_x = torch.where(mask[e])
                final.index_add_(0, top_x, experts[e](x[top_x]) * w[top_x, idx, None])
            return final, top_x
        """, "read after the loop"),
    "MoE routing: iterable not a range or the hit list": ("MND304", 5, """
        import torch
        def route(x: torch.Tensor, mask: torch.Tensor, w: torch.Tensor, experts):
            final = torch.zeros_like(x)
            for e in [0, 2]:
                idx, top_x = torch.where(mask[e])
                final.index_add_(0, top_x, experts[e](x[top_x]) * w[top_x, idx, None])
            return final
        """, "neither `range(...)` nor the hit experts"),
    "MoE routing: no index_add_ on the token indices": ("MND304", 5, """
        import torch
        def route(x: torch.Tensor, mask: torch.Tensor, w: torch.Tensor, experts):
            final = torch.zeros_like(x)
            for e in range(len(experts)):
                idx, top_x = torch.where(mask[e])
                final.index_add_(0, idx, experts[e](x[top_x]) * w[top_x, idx, None])
            return final
        """, "no single `final.index_add_(0, top_x, ...)`"),
    "MoE routing: loop left early": ("MND304", 5, """
        import torch
        def route(x: torch.Tensor, mask: torch.Tensor, w: torch.Tensor, experts):
            final = torch.zeros_like(x)
            for e in range(len(experts)):
                idx, top_x = torch.where(mask[e])
                final.index_add_(0, top_x, experts[e](x[top_x]) * w[top_x, idx, None])
                if e == 1:
                    break
            return final
        """, "leaves the loop early"),
    "branch with a call": ("MND201", 4, """
        import torch
        def f(x: torch.Tensor, layer):
            if x.sum() > 0:
                x = layer(x)
            return x
        """, "cannot prove side-effect free"),
    "torch.cond: helper method is not a submodule": ("MND201", 7, """
        import torch
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
            def forward(self, x: torch.Tensor):
                if x.sum() > 0:
                    x = self.helper(x)
                return x
        """, "can move into torch.cond"),
    "torch.cond: output first defined in the branch": ("MND201", 8, """
        import torch
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(4, 4)
            def forward(self, x: torch.Tensor):
                if x.sum() > 0:
                    y = self.proj(x)
                return y
        """, "not assigned in every branch"),
    "torch.cond: elif chain": ("MND201", 8, """
        import torch
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(4, 4)
            def forward(self, x: torch.Tensor):
                if x.sum() > 0:
                    x = self.proj(x)
                elif x.sum() < -1:
                    x = x * 2
                return x
        """, "no elif"),
    "augmented assignment": ("MND201", 4, """
        import torch
        def f(x: torch.Tensor):
            if x.sum() > 0:
                x += 1
            return x
        """, "in place"),
    "name first defined in branch": ("MND201", 4, """
        import torch
        def f(x: torch.Tensor):
            if x.sum() > 0:
                y = x * 2
            return y
        """, "not defined before"),
    "non-tensor value": ("MND201", 5, """
        import torch
        def f(x: torch.Tensor):
            y = x
            if x.sum() > 0:
                y = None
            return y
        """, "not a tensor value"),
    "custom exception": ("MND203", 6, """
        import torch
        class MyError(Exception):
            pass
        def f(x: torch.Tensor):
            if x.sum() > 0:
                raise MyError("bad")
            return x
        """, "not a builtin exception"),
    "message built with format": ("MND203", 4, """
        import torch
        def f(x: torch.Tensor):
            if x.sum() > 0:
                raise ValueError("bad {}".format(x.shape))
            return x
        """, "not a string literal or an f-string"),
    "guard inside try": ("MND203", 5, """
        import torch
        def f(x: torch.Tensor):
            try:
                if x.sum() > 0:
                    raise ValueError("bad")
            except ValueError:
                pass
            return x
        """, "inside a `try`"),
    "random without opt-in": ("MND105", 4, """
        import random
        import torch
        def f(x: torch.Tensor):
            return x * random.random()
        """, "--torch-rng"),
    "while loop": ("MND202", 4, """
        import torch
        def f(x: torch.Tensor):
            while x.abs().sum() > 1:
                x = x / 2
            return x
        """, "while_loop"),
    "buffer read in control flow": ("MND401", 8, """
        import torch
        from torch import nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.step = 0
            def forward(self, x):
                self.step += 1
                if self.step > 10:
                    return x
                return x * 2
        """, "control flow"),
    "compile depends on loop variable": ("MND403", 4, """
        import torch
        def run(models, x):
            for m in models:
                fast = torch.compile(m)
                fast(x)
        """, "rebound in the loop"),
    "dynamic= already given": ("MND402", 5, """
        import torch
        def run(fn, x):
            f = torch.compile(fn, dynamic=False)
            f(x, 2)
            f(x, 3)
        """, "explicit `dynamic=False`"),
    "dynamic=True already given": ("MND402", 5, """
        import torch
        def run(fn, x):
            f = torch.compile(fn, dynamic=True)
            f(x, 2)
            f(x, 3)
        """, "already compiled with `dynamic=True`"),
    "compiled object defined elsewhere": ("MND402", 4, """
        from lib import fast
        def run(x):
            fast(x, 2)
            fast(x, 3)
        """, "not defined by `torch.compile(...)` in this file"),
    "compile options passed with **": ("MND402", 5, """
        import torch
        def run(fn, x, opts):
            f = torch.compile(fn, **opts)
            f(x, 2)
            f(x, 3)
        """, "may set `dynamic=`"),
    "compiled in two places": ("MND402", 6, """
        import torch
        def run(fn, x, flag):
            f = torch.compile(fn)
            f = torch.compile(fn, mode="max-autotune")
            f(x, 2)
            f(x, 3)
        """, "more than one place"),
    "assert on .item() with `and`": ("MND301", 3, """
        import torch
        def f(t: torch.Tensor, n: int):
            assert t.max().item() <= n and n > 0
            return t
        """, "one comparison, no `not`/`and`/`or`"),
    "assert on .item() with a formatted message": ("MND301", 3, """
        import torch
        def f(t: torch.Tensor, n: int):
            assert t.max().item() <= n, f"too long: {n}"
            return t
        """, "message is computed"),
    "chained comparison on .item() in an assert": ("MND301", 3, """
        import torch
        def f(t: torch.Tensor, n: int):
            assert 0 <= t.max().item() <= n
            return t
        """, "chained comparison"),
    "scalar capture of a loop's trip count": ("MND301", 3, """
        import torch
        def f(x: torch.Tensor, t: torch.Tensor):
            for i in range(t.max().item()):
                x = x + i
            return x
        """, "loop's iterable"),
    "dynamic-output capture around zero-argument super()": ("MND304", 4, """
        import torch
        class M(torch.nn.Linear):
            def forward(self, x: torch.Tensor):
                return torch.nonzero(super().forward(x) > 0)
        """, "`super()`"),
    "scalar capture in a TorchScript function": ("MND311", 4, """
        import torch
        @torch.jit.script
        def f(a, n: int):
            return a[:, :n]
        """, "TorchScript"),
    "scalar capture of a number a branch tests": ("MND301", 3, """
        import torch
        def f(x: torch.Tensor, t: torch.Tensor):
            n = t.sum().item()
            if n > 2:
                return x * 2
            return x
        """, "decides a branch"),
    "scalar capture of a number passed to Python code": ("MND301", 4, """
        import torch
        class M(torch.nn.Module):
            def forward(self, x: torch.Tensor, t: torch.Tensor):
                n = t.sum().item()
                return self.pick(x, n)
        """, "passed to `self.pick`"),
    "scalar capture of a number that indexes a Python list": ("MND301", 3, """
        import torch
        def f(x: torch.Tensor, t: torch.Tensor, names: list):
            return names[int(t.argmax().item())], x
        """, "indexes a Python sequence"),
    "scalar capture of a size `view` must check": ("MND310", 4, """
        import torch
        def f(x: torch.Tensor, t: torch.Tensor):
            n = t.sum()
            return x.view(2, -1, n)
        """, "`.view()` must prove"),
    "dynamic-output capture of a list of data-dependent length": ("MND304", 3, """
        import torch
        def f(x: torch.Tensor, m: torch.Tensor):
            hit = m.nonzero(as_tuple=True)[0].tolist()
            return x, hit
        """, "data-dependent"),
    "scalar capture outside a function": ("MND301", 3, """
        import torch
        t = torch.ones(3)
        n = t.sum().item()
        """, "not inside a function"),
    "reporting if with an impure condition": ("MND201", 3, """
        import torch
        def f(x: torch.Tensor, check):
            if torch.isnan(check(x)).any():
                print("nan")
            return x
        """, "condition of the reporting `if`"),
    "deepcopy of a value not provably a tensor": ("MND108", 5, """
        import copy
        import torch
        class M(torch.nn.Module):
            def forward(self, x):
                cfg = copy.deepcopy(self.config)
                return x * cfg.scale
        """, "`.clone()` exists only on tensors"),
    "capture: a range from a start other than zero": ("MND310", 4, """
        import torch
        def f(x: torch.Tensor, m: torch.Tensor):
            n = m.sum()
            return torch.arange(1, n) + x.sum()
        """, "`torch.arange` must guard on a captured value"),
    "mask store: an index tensor not provably boolean": ("MND304", 3, """
        import torch
        def f(a: torch.Tensor, idx: torch.Tensor):
            a[torch.where(idx)] = 0
            return a
        """, "stored to"),
    "validation: an and-operand skipped when the check passes can raise": ("MND203", 3, """
        import torch
        def f(x: torch.Tensor):
            if x.sum() > 0 and x.max() > 1:
                raise ValueError("out of range")
            return x
        """, "operand Python skips when the check passes"),
    "numpy random draw": ("MND313", 4, """
        import numpy as np
        import torch
        def f(x: torch.Tensor):
            p = np.random.uniform(0, 1)
            return x * p
        """, "generator state"),
    "numpy of a tensor": ("MND313", 4, """
        import numpy as np
        import torch
        def f(x: torch.Tensor):
            n = np.log1p(x.sum()).item()
            return x * n
        """, "is a tensor"),
    "numpy function without a Python counterpart": ("MND313", 4, """
        import numpy as np
        import torch
        def f(x: torch.Tensor, plan):
            n = np.cumsum(plan)[-1].item()
            return x[:n]
        """, "no Python counterpart"),
    "numpy with math shadowed": ("MND313", 5, """
        import numpy as np
        import torch
        from mathlib import fast as math
        def f(x: torch.Tensor):
            n = np.log1p(x.size(0)).item()
            return x * n
        """, "`math` names something else"),
    "tensor check with a message reading a tensor": ("MND302", 3, """
        import torch
        def f(x: torch.Tensor):
            torch._check_tensor_all(x > 0, lambda: f"{x.shape[0]} rows")
            return x
        """, "message reads names"),
    "tensor check with a message that is not a lambda": ("MND302", 3, """
        import torch
        def f(x: torch.Tensor, explain):
            torch._check_tensor_all_with(ValueError, x > 0, explain)
            return x
        """, "message reads names"),
    # found by the property tests: under compile the selection is a new tensor where the original kept the input,
    # and an in-place update after it no longer reached the input
    "selection updated in place after it": ("MND201", 3, """
        import torch
        def f(x: torch.Tensor, z: torch.Tensor):
            if x.sum() > 0:
                x = x * 2
            x[z < 0] /= 2.0
            return z
        """, "`x` is updated in place after the `if`"),
    "selection seen through a view updated after it": ("MND201", 4, """
        import torch
        def f(x: torch.Tensor):
            v = x.view(-1)
            if x.sum() > 0:
                x = x * 2
            v.add_(1)
            return x
        """, "`v` is updated in place after the `if`"),
    "conditional expression updated in place after it": ("MND201", 3, """
        import torch
        def f(x: torch.Tensor, y: torch.Tensor):
            w = y if y.sum() > 0 else x
            w.add_(1)
            return x
        """, "`w` is updated in place after the assignment"),
    "deepcopy with memo": ("MND108", 4, """
        import copy
        import torch
        def f(t: torch.Tensor):
            return copy.deepcopy(t, {})
        """, "memo"),
    "print keyword: a module name bound twice": ("MND101", 5, """
        import torch
        SEP = " "
        SEP = SEP * 2
        def f(x: torch.Tensor):
            print("x", x, sep=SEP)
            return x
        """, "keyword `sep` needs a value"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_declined_and_reported(name: str) -> None:
    code, line, src, reason = CASES[name]
    src = textwrap.dedent(src).lstrip("\n")
    col = len(src.splitlines()[line - 1]) - len(src.splitlines()[line - 1].lstrip()) + 1
    res = fix_source(src, "t.py", [diag(code, line, col)], FixOptions(unsafe=True))
    assert res.fixed == src
    assert res.applied == []
    assert len(res.remaining) == 1
    assert reason in res.remaining[0].reason, res.remaining[0].reason


def test_unsafe_fix_needs_opt_in() -> None:
    src = textwrap.dedent("""
        import torch
        def f(x: torch.Tensor):
            if x.sum() > 0:
                raise ValueError("bad")
            return x
        """).lstrip("\n")
    res = fix_source(src, "t.py", [diag("MND203", 3, 5)], FixOptions())
    assert res.fixed == src
    assert res.remaining[0].unsafe_available
    res = fix_source(src, "t.py", [diag("MND203", 3, 5)], FixOptions(unsafe=True))
    assert "torch._assert_async" in res.fixed


def test_side_effect_policies() -> None:
    src = "import torch\ndef f(x: torch.Tensor):\n    print(x)\n    return x\n"
    drop = fix_source(src, "t.py", [diag("MND101", 3, 5)], FixOptions(unsafe=True, side_effects="drop"))
    assert "print" not in drop.fixed
    defer = fix_source(src, "t.py", [diag("MND101", 3, 5)], FixOptions(unsafe=True, side_effects="defer"))
    assert "_mend_defer(print, x)" in defer.fixed
    assert "from mend.rewriter.runtime import defer as _mend_defer" in defer.fixed
    with pytest.raises(ValueError):
        FixOptions(side_effects="loud")


def test_keyword_of_a_module_constant_is_kept_under_compile() -> None:
    """``sep=SEP``, ``SEP`` bound once to a literal: its value travels to the call like a literal would."""
    src = 'import torch\nSEP = " | "\ndef f(x: torch.Tensor):\n    print("x", x, sep=SEP)\n    return x\n'
    res = fix_source(src, "t.py", [diag("MND101", 4, 5)], FixOptions())
    assert '_mend_emit(__name__, "print:sep", "x", x, SEP)' in res.fixed, res.fixed


def test_unparseable_input_is_reported_not_lost() -> None:
    res = fix_source("def f(:\n", "bad.py", [diag("MND101", 1, 1)])
    assert res.error is not None and res.fixed == "def f(:\n"


def test_rewriter_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = ("import sys, mend.rewriter.engine, mend.rewriter.api, mend.rewriter.registry, mend.rewriter.runtime, "
            "mend.rewriter.verify, mend.cli.fix_cmd; mend.rewriter.registry.strategies(); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_registry() -> None:
    from mend.analyzers.static.rules import fix_info

    info = fix_info("MND201")
    assert info is not None and info.applicability == "safe" and "torch.where" in info.safety_doc
    assert fix_info("MND203").applicability == "unsafe"
    assert fix_info("MND510") is None


_CONV = '''import torch
from torch import nn


class Conv(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.register_buffer("kernel_size", torch.tensor(k, dtype=torch.int64), persistent=False)

    def _extra(self, x):
        return x.shape[-1] % self.kernel_size

    def forward(self, x):
        return nn.functional.pad(x, (0, self._extra(x)))
{more}
'''


@pytest.mark.parametrize(("more", "reason"), [
    ("\n    def reset(self):\n        self.kernel_size.fill_(3)\n", "writes `self.kernel_size` in place"),
    ("\n    def grow(self):\n        self.kernel_size = self.kernel_size + 1\n", "assigns `self.kernel_size`"),
    ("\n\ndef outside(conv, x):\n    return conv._extra(x)\n", "no method computes a number from them only"),
])
def test_int_buffers_declines(more: str, reason: str) -> None:
    """MND310: the fold is declined when the file writes the buffers or calls the folded method from outside."""
    src = _CONV.format(more=more)
    res = fix_source(src, "t.py", [diag("MND310", 14, 16)], FixOptions(unsafe=True))
    assert res.fixed == src
    assert reason in res.remaining[0].reason, res.remaining[0].reason


def test_int_buffers_fold_when_only_the_class_calls() -> None:
    src = _CONV.format(more="")
    res = fix_source(src, "t.py", [diag("MND310", 14, 16)], FixOptions(unsafe=True))
    assert "return _mend_fold(Conv._extra, self, x.shape)" in res.fixed
    assert fix_source(src, "t.py", [diag("MND310", 14, 16)], FixOptions()).remaining[0].unsafe_available


def test_int_buffers_declines_a_number_used_as_tensor() -> None:
    """A local computed from a buffer that is later used as a tensor (`.float()`) keeps the original."""
    src = _CONV.format(more="").replace(
        "        return nn.functional.pad(x, (0, self._extra(x)))",
        "        half = self.kernel_size // 2\n        return nn.functional.pad(x, (half, self._extra(x))) * half.float()")
    res = fix_source(src, "t.py", [diag("MND310", 15, 16)], FixOptions(unsafe=True))
    assert res.fixed == src
    assert "`half`, computed from them in `forward`, is used as a tensor" in res.remaining[0].reason


def test_slice_by_a_data_count_beside_integer_buffers_is_captured() -> None:
    """A class with integer buffers (EnCodec's padding) and a slice by a count of the data: the slice is
    captured on its own and does not come back on a re-check. (The fold claiming such a slice as fixed when
    the class's buffers feed a method the slice's function calls, found by the property tests, is open.)"""
    from mend.analyzers.static import Config, check_source

    src = textwrap.dedent("""
        import torch
        from torch import nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                k, s = torch.tensor(3, dtype=torch.int64), torch.tensor(2, dtype=torch.int64)
                self.register_buffer("kernel", k, persistent=False)
                self.register_buffer("stride", s, persistent=False)
                self.register_buffer("total", k - s, persistent=False)

            def forward(self, x: torch.Tensor):
                y = torch.nn.functional.pad(x, (self.total // 2, self.total))
                n = (x > 0).sum()
                return y, x.reshape(-1)[n // 2:]
        """).lstrip("\\n")

    def diagnose(text: str) -> list:
        return list(check_source(text, "t.py", Config()))

    res = fix_source(src, "t.py", None, FixOptions(unsafe=True), diagnose)
    kinds = {a.code: a.message.split(" ")[0] for a in res.applied}
    assert kinds.get("MND311") == "capture", res.applied
    assert "_mend_captured(lambda: x.reshape(-1)[n // 2:])" in res.fixed
    assert not [d for d in diagnose(res.fixed) if d.code == "MND311"]


def test_keep_declines_with_a_stale_emit_helper() -> None:
    """A file fixed by an older mend keeps its `_mend_emit`, whose calling convention differs: a new call
    would reach the old helper. Guarding instead would skip the message under compile, which the keep
    policy never does: the finding is declined and the file left as it is."""
    src = textwrap.dedent("""
        import warnings
        import torch
        def _mend_emit(spec, *args):
            fn = getattr(__builtins__, spec)
            fn(*args)
        @torch.compile
        def f(x: torch.Tensor):
            warnings.warn("old", FutureWarning)
            return x
        """).lstrip("\n")
    res = fix_source(src, "t.py", [diag("MND103", 8, 5)], FixOptions())
    assert res.fixed == src
    assert res.applied == []
    assert [r.reason for r in res.remaining] == [
        "the message cannot be kept under compile: the file's `_mend_emit` predates the graph operator "
        "(`torch.ops.mend.emit`); remove it to refresh it (`--side-effects guard` skips it under compile)"]


@pytest.mark.parametrize("line", [
    "if not torch.compiler.is_compiling() and n != f.shape[0]:\n        raise ValueError(n)\n    f = f * n",
    "if n != f.shape[0]:\n        raise ValueError(n)",
    "if n != f.shape[0] and not torch.compiler.is_compiling():\n        raise ValueError(n)",
])
def test_item_read_under_compile_is_not_eager_only(line: str) -> None:
    """``n = t.sum().item()`` is computed only in eager when every read of ``n`` is eager-only; a read that
    compiled code reaches (after the check, in a plain ``if``, left of ``and not is_compiling()``) keeps it."""
    src = f"import torch\ndef g(ids: torch.Tensor, f: torch.Tensor):\n    n = (ids == 7).sum().item()\n    {line}\n    return f\n"
    res = fix_source(src, "t.py", [diag("MND301", 3, 9)], FixOptions())
    assert all("only in eager" not in a.message for a in res.applied)
    eager = src.replace(f"    {line}", "    if not torch.compiler.is_compiling() and n != f.shape[0]:\n        raise ValueError(n)")
    res = fix_source(eager, "t.py", [diag("MND301", 3, 9)], FixOptions())
    assert [a.message for a in res.applied] == ["compute `n` only in eager: every read of it runs only in eager"]
    maxed = eager.replace("(ids == 7).sum()", "ids.max()")  # max() of an empty tensor raises: not skipped
    res = fix_source(maxed, "t.py", [diag("MND301", 3, 9)], FixOptions())
    assert res.applied == []


def test_validation_or_operand_is_computed_where_the_check_fires_anyway() -> None:
    """VITS's domain check ``if torch.min(x) < lo or torch.max(x) > hi: raise``: Python skips ``max`` only
    when the check fires, so computing it in the graph can only replace the error; the repair applies."""
    src = textwrap.dedent("""
        import torch
        def f(x: torch.Tensor):
            if torch.min(x) < -1 or torch.max(x) > 1:
                raise ValueError("Input to a transform is not within its domain")
            return x
        """).lstrip("\n")
    res = fix_source(src, "t.py", [diag("MND203", 3, 5)], FixOptions(unsafe=True))
    assert [a.code for a in res.applied] == ["MND203"]
    assert "torch._assert_async(torch.logical_not(torch.logical_or(" in res.fixed


def test_a_number_slicing_an_array_of_a_list_is_captured() -> None:
    """``[w[:, :n] for w in weights]``: an index of two parts (or with ``None``/``...``) is one only an array
    takes, so the captured number slices tensors there (reformer's axial position encodings); one integer
    into a Python list still declines (the case above)."""
    src = textwrap.dedent("""
        import torch
        def f(weights: list, position_ids: torch.Tensor):
            n = position_ids.max().item()
            columns = -(-(n + 1) // 4)
            return torch.cat([w[:, :columns] for w in weights], dim=-1)
        """).lstrip("\n")
    res = fix_source(src, "t.py", [diag("MND301", 3, 9)], FixOptions(unsafe=True))
    assert "    n = _mend_captured(lambda: position_ids.max().item())\n" in res.fixed, res.remaining


def test_numpy_lcm_and_gcd_of_python_numbers_become_math() -> None:
    """``np.lcm(a, b)``/``np.gcd(a, b)`` of Python ints read as a number (reformer's chunk lengths): ``math``'s
    two-argument functions compute the same int, which Dynamo folds."""
    src = textwrap.dedent("""
        import numpy as np
        import torch
        def f(x: torch.Tensor, a: int, b: int):
            n = np.lcm(a, b).item() + np.gcd(a, b).item()
            return x[:, :n]
        """).lstrip("\n")
    res = fix_source(src, "t.py", [diag("MND313", 4, 9), diag("MND313", 4, 31)], FixOptions(unsafe=True))
    assert "    n = math.lcm(a, b) + math.gcd(a, b)\n" in res.fixed, (res.fixed, res.remaining)


def test_selection_updated_in_place_after_a_new_value_is_repaired() -> None:
    """An in-place update of a name bound to a new tensor after the selection (``x = x + 1``) reaches nothing
    the original kept: the selection is repaired."""
    src = textwrap.dedent("""
        import torch
        def f(x: torch.Tensor):
            if x.sum() > 0:
                x = x * 2
            x = x.clamp(min=0) * 3
            x[x > 1] = 0
            return x
        """).lstrip("\n")
    res = fix_source(src, "t.py", [diag("MND201", 3, 5)], FixOptions())
    assert [a.strategy for a in res.applied] == ["where_select"]


RNG_BRANCHES = {
    "in the test": ("""
        from random import random
        import torch
        def f(x: torch.Tensor, layers, p: float, training: bool):
            for layer in layers:
                if training and p > 0. and random() < p:
                    continue
                x = layer(x)
            return x
        """, 5, "the test `training and p > 0. and random() < p`"),
    "through a name": ("""
        import random
        import torch
        def f(x: torch.Tensor, p: float):
            keep = x.shape[0] > 1 and (random.random() < p)
            if keep:
                x = x * 2
            return x
        """, 4, "through `keep`"),
    "in a conditional expression": ("""
        import random
        import torch
        def f(x: torch.Tensor, p: float):
            return x * 2 if random.random() < p else x
        """, 4, "the test `random.random() < p`"),
}


@pytest.mark.parametrize("name", sorted(RNG_BRANCHES))
def test_torch_rng_declines_a_draw_that_decides_a_branch(name: str) -> None:
    """A branch on torch.rand(()) breaks the graph as the branch on random() did: the repair would only change
    the numbers (x-transformers' layer dropout, --verify 'kept')."""
    src, line, named = RNG_BRANCHES[name]
    src = textwrap.dedent(src).lstrip("\n")
    text = src.splitlines()[line - 1]
    col = text.index("random") + 1
    res = fix_source(src, "t.py", [diag("MND105", line, col)], FixOptions(unsafe=True, torch_rng=True))
    assert res.fixed == src and res.applied == []
    assert named in res.remaining[0].reason and "remove nothing" in res.remaining[0].reason, res.remaining[0].reason


def test_torch_rng_still_repairs_a_drawn_value() -> None:
    src = "import random\nimport torch\ndef f(x: torch.Tensor):\n    return x + random.random() * 0\n"
    res = fix_source(src, "t.py", [diag("MND105", 4, 16)], FixOptions(unsafe=True, torch_rng=True))
    assert "torch.rand(())" in res.fixed and len(res.applied) == 1
