"""Differential property tests of ``mend fix``: generated and hand-written programs, original vs rewritten.

Each program is rewritten with the safe and with the unsafe fixes and run side by side with the
original (``tests/rewriter/differential.py``): eagerly on an input grid that takes every branch, and
compiled (``backend="eager"``). A safe fix must change nothing (results to the bit, exceptions,
printed, logged and warned output, in-place updates of the inputs); an unsafe fix only what its rule
page documents (``differential.ALLOWANCES``).

This is the bounded profile: a fixed seed (``derandomize=True``) and a few dozen programs per family.
Shrinking is off here to keep the suite fast; ``benchmarks/fix_properties.py --examples N`` is the
long profile and prints a minimal example of every failure class.

Known defects of the current rewriter are marked ``xfail(strict=True)`` with the defect named. A
hand-written program also names the failures the defect shows (``stage/run/what differs``): it
xfails only on those (:class:`KnownDefect`), fails on anything else, and passes once the defect is
repaired (then the marker must go).
"""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from mend.rewriter import fix_source
from tests.rewriter.differential import OPTIONS, PATH, Report, check_program, diagnose, explain, fix_kind, rewrite
from tests.rewriter.propgen import BLOCKS, Program, program_from_source, programs

BOUNDED = settings(max_examples=20, derandomize=True, deadline=None, database=None,
                   phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))


class KnownDefect(AssertionError):
    """The program fails only in the ways its known defect shows."""


def assert_same_behaviour(program: Program, eager: bool = True, compiled: bool = False,
                          known: tuple[str, ...] = (), options: tuple[str, ...] = ("safe", "unsafe")) -> Report:
    report = check_program(program, eager=eager, compiled=compiled, options=options)
    if report.failures:
        seen = {f"{f.stage}/{f.options}/{f.kind}" for f in report.failures}
        if known and seen <= set(known):
            raise KnownDefect(explain(report))
        pytest.fail(explain(report), pytrace=False)
    return report


def defect_params(table: dict) -> list:
    """``pytest.param(name)`` per entry of a table ``name -> (source, defect or None, failures)``,
    expected to fail with :class:`KnownDefect` where a defect is named."""
    return [pytest.param(name, id=name, marks=[pytest.mark.xfail(strict=True, raises=KnownDefect, reason=defect)]
                         if defect else []) for name, (_, defect, _) in table.items()]


# --- known defects of the current rewriter, each with a minimal program below ---------------------

# (none at present: a defect found by the property tests is named here, and its minimal program in
# MINIMAL carries it with the failures it shows)


def compiled_function(body: str) -> str:
    """A module with ``f(x, y)`` decorated ``@torch.compile(backend="eager")``, whose body is ``body``."""
    return ('import torch\n\n\n@torch.compile(backend="eager")\ndef f(x: torch.Tensor, y: torch.Tensor):\n'
            + textwrap.indent(textwrap.dedent(body), "    "))


LOGGED_BEFORE_AN_INDEX_ERROR = """\
import logging

import torch

logger = logging.getLogger("mend_propgen")


@torch.compile(backend="eager")
def f(x: torch.Tensor, y: torch.Tensor):
    logger.warning("start")
    return x[y.long().abs() + 2]
"""

SUBMODULE_OR_RAISE = """\
import torch
from torch import nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, y: torch.Tensor):
        if x.sum() > 0:
            x = self.lin(x)
        else:
            raise ValueError("bad input")
        return x


def make():
    torch.manual_seed(0)
    return M()
"""

# name -> (source, the defect it shows or None, the failures it shows: stage/run/what differs). The
# entries without a defect are the minimal programs of defects found by the property tests and since
# repaired (they must keep passing).
MINIMAL: dict[str, tuple[str, str | None, tuple[str, ...]]] = {
    "per-element condition": (compiled_function("""\
        if x > 0:
            x = x + 1
        return x
        """), None, ()),
    # a selection made the name a new tensor where the original kept the input, and an update through a mask
    # after it no longer reached the input (found with the mask-update block; the selection is now declined)
    "selection updated in place after it": (compiled_function("""\
        z = x * 1
        if x.sum() > 100:
            x = x * 2
        x[z < 0] /= 0.0
        return y
        """), None, ()),
    "short-circuit and": (compiled_function("""\
        if (x > 0).any() and x[0, 0] > 0:
            x = x + 1
        return x
        """), None, ()),
    "elif condition evaluated first": (compiled_function("""\
        if (x == x).all():
            x = x + 1
        elif x[0, 0] > 0:
            x = x - 1
        return x
        """), None, ()),
    "where broadcasts the other side": (compiled_function("""\
        if x.sum() > 0:
            x = x + y
        return x
        """), None, ()),
    "where promotes the other side": (compiled_function("""\
        if x.sum() > 0:
            x = x.to(torch.float64)
        return x
        """), None, ()),
    "ternary with a side that raises": (compiled_function("""\
        x = torch.cat([x, x], dim=0) if x.sum() > 0 else x
        return x
        """), None, ()),
    "grad gate": (compiled_function("""\
        if x.sum() > 0:
            x = x / 2
        return x
        """), None, ()),
    "grad gate around returns": (compiled_function("""\
        if x.sum() > 0:
            return x / 2
        return x
        """), None, ()),
    "branch that passes": (compiled_function("""\
        if x.sum() > 0:
            pass
        return x
        """), None, ()),
    "elif on a many-element condition, assignments": (compiled_function("""\
        if x.sum() > 0:
            x = x + 1
        elif y > 0:
            x = x - 1
        return x
        """), None, ()),
    "elif on a many-element condition, returns": (compiled_function("""\
        if x.sum() > 0:
            return x + 1
        elif y > 0:
            return x - 1
        return x
        """), None, ()),
    "len(tolist()) of a 0-d tensor": (compiled_function("""\
        return x + len(x.sum().tolist())
        """), None, ()),
    "max() of an int item": (compiled_function("""\
        n = x.sum().item()
        return x * max(n, 1.5)
        """), None, ()),
    "arithmetic on a float16 item": (compiled_function("""\
        n = x.sum().item()
        return x * (n / 3)
        """), None, ()),
    "masked mean of integers": (compiled_function("""\
        k = x[x > 0].mean()
        return x + k
        """), None, ()),
    "submodule branch whose else raises": (SUBMODULE_OR_RAISE, None, ()),
    "reporting if on a many-element condition": (compiled_function("""\
        if x > 0:
            print("positive")
        return x
        """), None, ()),
    "reporting if on bool() of an and": (compiled_function("""\
        if bool(x.sum() < 0 and y.mean() < 1):
            print("small")
        return x
        """), None, ()),
    "message logged before an error": (LOGGED_BEFORE_AN_INDEX_ERROR, None, ()),
    "deferred warning": ("""\
import warnings

import torch


@torch.compile(backend="eager")
def f(x: torch.Tensor, y: torch.Tensor):
    warnings.warn("large activations")
    return x
""", None, ()),
    "validation whose condition fails to trace": (compiled_function("""\
        if x.mean() < 0:
            raise ValueError("bad input")
        return x
        """), None, ()),
    "assert on a captured scalar": (compiled_function("""\
        n = x.sum().item()
        assert n < 1e6
        return x
        """), None, ()),
    "slice by a captured scalar": (compiled_function("""\
        n = x.abs().sum().item()
        return x[: int(n)]
        """), None, ()),
}


# The fix runs a minimal program is checked in besides ``mend fix`` and ``--unsafe-fixes``.
MORE_RUNS = {"message logged before an error": ("defer",), "deferred warning": ("defer",)}


@pytest.mark.parametrize("name", defect_params(MINIMAL))
def test_minimal_program(name: str) -> None:
    source, _, failures = MINIMAL[name]
    eager = not failures or not all(f.startswith("compiled/") for f in failures)  # skip eager for compiled defects
    runs = tuple(dict.fromkeys(f.split("/")[1] for f in failures)) + MORE_RUNS.get(name, ())
    assert_same_behaviour(program_from_source(source), eager=eager, compiled=True, known=failures,
                          options=("safe", "unsafe") + tuple(r for r in runs if r not in ("safe", "unsafe")))


# --- generated programs, by family ----------------------------------------------------------------

# family -> (the generator's blocks, the known defects its programs can show)
FAMILIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "side effects": (("side-effect", "reporting-if"), ()),
    "branches that assign": (("if-assign", "nested-if", "if-submodule", "if-dtype", "if-buffer"), ()),
    "returns and ternaries": (("if-return", "ternary"), ()),
    "validation and asserts": (("validation", "item-assert"), ()),
    "scalars from tensors": (("item-arith", "scalars"), ()),
    "sizes from integer buffers": (("int-buffers",), ()),
    "sizes from the data": (("sizes",), ()),
    "numpy on Python numbers": (("numpy-numbers",), ()),
    "what training adds": (("layerdrop", "mask-update", "assert-not"), ()),
}


def _xfail_if(defects: tuple[str, ...]) -> list:
    return [pytest.mark.xfail(strict=True, reason="; ".join(dict.fromkeys(defects)))] if defects else []


@pytest.mark.parametrize("blocks", [pytest.param(blocks, id=name, marks=_xfail_if(defects))
                                    for name, (blocks, defects) in FAMILIES.items()])
def test_generated_programs_keep_eager_behaviour(blocks: tuple[str, ...]) -> None:
    @BOUNDED
    @given(programs(blocks=blocks))
    def check(program: Program) -> None:
        assert_same_behaviour(program)

    check()


POLICY_RUNS = {"keep": "safe", "guard": "guard", "defer": "defer", "drop": "drop"}  # keep is the default


def _check_policy(policy: str, compiled: bool, examples: int) -> None:
    @settings(BOUNDED, max_examples=examples)
    @given(programs(blocks=("side-effect", "reporting-if")))
    def check(program: Program) -> None:
        assert_same_behaviour(program, eager=not compiled, compiled=compiled, options=(POLICY_RUNS[policy],))

    check()


@pytest.mark.parametrize("policy", [
    pytest.param(policy) for policy in POLICY_RUNS])
def test_side_effect_policies_eager(policy: str) -> None:
    """Every side-effect policy: ``keep`` (the default) and ``guard`` (safe) and ``defer`` (unsafe) change
    nothing in eager; ``drop`` (unsafe) only drops the output."""
    _check_policy(policy, compiled=False, examples=15)


@pytest.mark.slow
@pytest.mark.parametrize("policy", [
    pytest.param(policy) for policy in POLICY_RUNS])
def test_side_effect_policies_compiled(policy: str) -> None:
    """Compiled, results stay the original's; output is kept (``keep``), dropped (``guard``, ``drop``) or moved
    after the graph (``defer``), as documented."""
    _check_policy(policy, compiled=True, examples=15)


@pytest.mark.slow
@pytest.mark.parametrize("compiled", [
    pytest.param(False, id="eager"), pytest.param(True, id="compiled")])
def test_generated_programs_mixed_families(compiled: bool) -> None:
    """Every family in one program, eagerly (40 programs) or compiled against the original run eagerly (12)."""
    @settings(BOUNDED, max_examples=12 if compiled else 40)
    @given(programs())
    def check(program: Program) -> None:
        assert_same_behaviour(program, eager=not compiled, compiled=compiled)

    check()


REPAIRS = {"keep", "report-keep", "where", "where-return", "where-ternary", "where-buffer", "cond", "validation",
           "item-tensor", "item-assert", "capture", "capture-scoped", "float", "tolist", "masked", "mask-store", "deepcopy",
           "int-fold", "numpy-numbers", "eager-only", "layerdrop", "layerdrop-select", "mask-update", "assert-not"}


def test_generator_reaches_every_repair_and_decline() -> None:
    """The profile is worth something only if its programs reach the fixers: within the first programs of
    each block, every repair kind is applied (and recognised by FIX_KINDS), and sites are also declined."""
    applied: set[str] = set()
    declined: list[str] = []

    def collect(block: str) -> None:
        @settings(BOUNDED, max_examples=20)
        @given(programs(blocks=(block,), max_blocks=1))
        def each(program: Program) -> None:
            result = fix_source(program.source, PATH, None, OPTIONS["unsafe"], diagnose)
            applied.update(fix_kind(a.message) for a in result.applied)
            declined.extend(r.reason for r in result.remaining)

        each()

    for block in BLOCKS:
        collect(block)
    assert REPAIRS <= applied, f"never applied: {sorted(REPAIRS - applied)}"
    assert "other" not in applied, "a repair message that FIX_KINDS does not know: add it there"
    assert declined


# --- issue 13: the SAM pattern and its neighbours, as plain differential tests ---------------------

def sam_like(branch: str, annotate: bool = True) -> str:
    """SAM's mask-decoder shape: tokens from a learnt embedding, extended by the prompts when any."""
    ann = ": torch.Tensor" if annotate else ""
    return textwrap.dedent("""\
        import torch
        from torch import nn


        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.iou_token = nn.Embedding(1, 4)

            def forward(self, x{ann}, y{ann}):
                batch_size = x.shape[0]
                output_tokens = self.iou_token.weight.repeat(batch_size, 1)
        {branch}
                return tokens.to(self.iou_token.weight.dtype)


        def make():
            torch.manual_seed(0)
            return M()
        """).format(ann=ann, branch=textwrap.indent(textwrap.dedent(branch), " " * 8).rstrip("\n"))


# name -> (source, the defect it shows or None, the failures it shows)
REGRESSIONS: dict[str, tuple[str, str | None, tuple[str, ...]]] = {
    "sam": (sam_like("""\
        if y.sum().item() != 0:
            tokens = torch.cat((output_tokens, y), dim=1)
        else:
            tokens = output_tokens
        """, annotate=False), None, ()),
    "condition through any()": (sam_like("""\
        if (y != 0).any():
            tokens = torch.cat((output_tokens, y), dim=1)
        else:
            tokens = output_tokens
        """), None, ()),
    "condition through bool()": (sam_like("""\
        if bool(y.sum() != 0):
            tokens = torch.cat((output_tokens, y), dim=1)
        else:
            tokens = output_tokens
        """), None, ()),
    "condition through a local": (sam_like("""\
        has_prompts = y.sum() != 0
        if has_prompts:
            tokens = torch.cat((output_tokens, y), dim=1)
        else:
            tokens = output_tokens
        """), None, ()),
    "condition through a local .item()": (sam_like("""\
        n_prompts = y.abs().sum().item()
        if n_prompts > 0:
            tokens = torch.cat((output_tokens, y), dim=1)
        else:
            tokens = output_tokens
        """), None, ()),
    "elif chain": (sam_like("""\
        if y.sum().item() > 0:
            tokens = torch.cat((output_tokens, y), dim=1)
        elif y.sum().item() < 0:
            tokens = torch.cat((y, output_tokens), dim=1)
        else:
            tokens = output_tokens
        """), None, ()),
    "tuple target": (sam_like("""\
        if y.sum().item() != 0:
            tokens, extra = torch.cat((output_tokens, y), dim=1), y
        else:
            tokens, extra = output_tokens, output_tokens
        tokens = tokens + extra.sum()
        """), None, ()),
    "sides of one shape": (sam_like("""\
        base = output_tokens + x
        if y.sum().item() != 0:
            tokens = base * 2
        else:
            tokens = base
        """), None, ()),
    "sides of one shape, elif and a local condition": (sam_like("""\
        base = output_tokens + x
        has_prompts = y.sum() != 0
        if has_prompts:
            tokens = base * 2
        elif y.sum().item() < 0:
            tokens = base - 1
        else:
            tokens = base
        """), None, ()),
    "nested in a static if": (sam_like("""\
        if x.dim() == 2:
            if y.sum().item() != 0:
                tokens = torch.cat((output_tokens, y), dim=1)
            else:
                tokens = output_tokens
        else:
            tokens = output_tokens
        """), None, ()),
    "nested in a tensor if": (sam_like("""\
        tokens = output_tokens
        if x.sum() > 0:
            if y.sum().item() != 0:
                tokens = torch.cat((output_tokens, y), dim=1)
            else:
                tokens = output_tokens * 2
        """), None, ()),
    "side grows, name defined before": (sam_like("""\
        tokens = x * 1
        if y.sum().item() != 0:
            tokens = torch.cat((tokens, y), dim=1)
        """), None, ()),
    "side broadcasts": (sam_like("""\
        tokens = x * 1
        if y.sum() > 0:
            tokens = tokens + y
        """), None, ()),
    "side changes dtype": (sam_like("""\
        tokens = x * 1
        if y.sum() > 0:
            tokens = tokens.to(torch.float64)
        """), None, ()),
    "side returns a grown tensor": (sam_like("""\
        tokens = x * 1
        if y.sum().item() != 0:
            return torch.cat((tokens, y), dim=1)
        """), None, ()),
    "ternary with a grown side": (sam_like("""\
        tokens = x * 1
        tokens = torch.cat((tokens, y), dim=1) if y.sum().item() != 0 else tokens
        """), None, ()),
}


@pytest.mark.parametrize("name", defect_params(REGRESSIONS))
def test_sam_pattern_and_neighbours_eager(name: str) -> None:
    source, _, failures = REGRESSIONS[name]
    assert_same_behaviour(program_from_source(source), known=failures)


@pytest.mark.slow
@pytest.mark.parametrize("name", defect_params(REGRESSIONS))
def test_sam_pattern_and_neighbours_compiled(name: str) -> None:
    source, _, failures = REGRESSIONS[name]
    assert_same_behaviour(program_from_source(source), eager=False, compiled=True, known=failures)


def test_sam_safe_fix_keeps_the_condition() -> None:
    """Whatever the repair, the condition must survive in the safe result (issue 13: it was deleted)."""
    rw = rewrite(REGRESSIONS["sam"][0], "safe")
    assert "y.sum()" in rw.result.fixed, rw.result.fixed


# --- the safety contract (docs/safety.md) ----------------------------------------------------------

def _contract_rows() -> list[dict[str, str]]:
    """The rows of docs/safety.md's table, by column name."""
    from pathlib import Path

    lines = [ln for ln in (Path(__file__).resolve().parents[2] / "docs" / "safety.md").read_text().splitlines()
             if ln.startswith("| ")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(head, (c.strip() for c in ln.strip("|").split("|")))) for ln in lines[1:]]


def _codes(cell: str) -> set[str]:
    """``MND101-103, MND106`` -> {MND101, MND102, MND103, MND106}."""
    out: set[str] = set()
    for part in cell.split(","):
        first, _, last = part.strip().partition("-")
        n = int(first[3:])
        out.update(f"MND{k}" for k in range(n, (int(last[-3:]) if last else n) + 1))
    return out


def test_safety_contract_matches_the_registry() -> None:
    """docs/safety.md names every fix of the registry in its class, and every documented difference of
    the property tests (ALLOWANCES) under a row of its repair and class."""
    from mend.analyzers.static.rules import RULES
    from tests.rewriter.differential import ALLOWANCES, FIX_KINDS

    rows = _contract_rows()
    classes: dict[str, set[str]] = {}
    by_kind: dict[str, set[str]] = {}
    known_kinds = {k for _, k in FIX_KINDS}
    for row in rows:
        row_classes = {c.strip() for c in row["class"].split(",")}
        assert row_classes <= {"safe", "unsafe"}, row
        for code in _codes(row["rule"]):
            assert code in RULES and RULES[code].fix is not None, f"{code}: no fix in the registry"
            classes.setdefault(code, set()).update(row_classes)
        for kind in (k.strip() for k in row["kind"].split(",")):
            assert kind == "-" or kind in known_kinds, f"unknown repair kind {kind!r}"
            by_kind.setdefault(kind, set()).update(row_classes)
    for code, rule in RULES.items():
        if rule.fix is not None:
            assert rule.fix.applicability in classes.get(code, set()), f"{code} ({rule.fix.applicability}) has no row"
    for a in ALLOWANCES:
        assert a.applicability in by_kind.get(a.fix, set()), f"allowance {a.fix} ({a.applicability}) has no row"
