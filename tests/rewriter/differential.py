"""Differential runner for ``mend fix``: rewrite a program, then run original and rewritten side by side.

Stages, for each fix run of :data:`OPTIONS` asked for (by default ``safe``, i.e. ``mend fix``, and
``unsafe``, i.e. ``mend fix --unsafe-fixes``; also the side-effect policies ``guard``, ``defer``, ``drop``):

1. **rewrite** (in-process, as ``mend fix`` does: the static analyzer's findings, then re-checks
   between rounds): the result parses; a re-check reports exactly what the fixer says remains and
   none of the sites it says it repaired; no fixer fails with an internal error; fixing again
   changes nothing.
2. **eager**: the original and the rewritten program run on a grid of inputs that hits every branch
   (all-positive, all-negative, mixed per element, zeros, NaN, inf, large values, empty and
   one-row tensors, a ``y`` that broadcasts, five dtypes, ``mask`` given or ``None``), with grad
   enabled and under ``torch.no_grad()``. Compared: results (dtype, shape, strides, bits, NaN
   where NaN), the exception (type and message), the inputs afterwards (in-place updates), the
   printed, logged and warned output in order (a warning with the file it is attributed to), the
   random streams after the call (torch's and Python's, both seeded before it: the same draws), and,
   for a module with grad enabled, its parameters' gradients of the sum of its floating outputs
   (bitwise; a parameter the outputs do not reach has none, as a layer LayerDrop skipped).
3. **compiled**: the rewritten program under ``torch.compile(backend="eager")`` (a module is
   wrapped with ``mend.rewriter.runtime.boundary``, as docs/fix.md asks of a boundary outside the
   repaired file), compared with the original run eagerly. Where they differ, the original is
   compiled too: a difference it shows as well is torch's, not mend's.

A fix must show no difference but one its rule page (or docs/fix.md) documents for its class:
:data:`ALLOWANCES` is that table, one row per documented difference, keyed by repair kind (recognised
from the fix's message by :data:`FIX_KINDS`), applicability, and eager or compiled. Anything else is
a :class:`Failure`.

    python -m tests.rewriter.differential FILE.py    # one hand-written program (``make()`` or ``f``)
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import io
import logging
import os
import random
import re
import shutil
import sys
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from mend.analyzers import static
from mend.rewriter import FileResult, FixOptions, fix_source
from mend.rewriter.helper_module import PREFIX, TREE_MODULE, module_text, units
from tests.rewriter.propgen import LOGGER, WIDTH, Program

PATH = "generated.py"
# The fix runs compared: ``mend fix``, ``mend fix --unsafe-fixes``, and the other side-effect policies
# (``guard`` safe; ``defer`` and ``drop`` unsafe).
OPTIONS = {"safe": FixOptions(), "unsafe": FixOptions(unsafe=True), "guard": FixOptions(side_effects="guard"),
           "defer": FixOptions(unsafe=True, side_effects="defer"), "drop": FixOptions(unsafe=True, side_effects="drop")}


# --- stage 1: rewrite --------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _config() -> Any:
    return static.load_config([tempfile.gettempdir()], isolated=True)


def diagnose(text: str) -> list:
    return list(static.check_source(text, PATH, _config()))


@dataclass
class Failure:
    stage: str  # "rewrite" | "eager" | "compiled"
    options: str  # "safe" | "unsafe"
    kind: str  # what differs: error, parse, recheck, idempotence, exception, value, dtype, shape, ...
    case: str  # the input, or "" for the rewrite stage
    detail: str

    def __str__(self) -> str:
        where = f" on {self.case}" if self.case else ""
        return f"[{self.options} {self.stage}] {self.kind}{where}: {self.detail}"


@dataclass
class Rewrite:
    options: str
    result: FileResult
    kinds: dict[str, str]  # fix kind -> applicability, for the fixes applied
    failures: list[Failure]

    @property
    def runnable(self) -> bool:
        """Changed, and the new text is a program (other rewrite failures do not stop the run)."""
        return self.result.changed and not any(f.kind in ("error", "parse") for f in self.failures)


def rewrite(source: str, options: str) -> Rewrite:
    opts = OPTIONS[options]
    res = fix_source(source, PATH, None, opts, diagnose)
    fails: list[Failure] = []

    def fail(kind: str, detail: str) -> None:
        fails.append(Failure("rewrite", options, kind, "", detail))

    if res.error:
        fail("error", res.error)
    try:
        compile(res.fixed, PATH, "exec", dont_inherit=True)
    except SyntaxError as exc:
        fail("parse", f"{exc}")
        return Rewrite(options, res, {}, fails)
    after = diagnose(res.fixed)
    found, reported = Counter(d.code for d in after), Counter(r.diagnostic.code for r in res.remaining)
    if found != reported:
        fail("recheck", f"a re-check finds {dict(found)}, the fixer reports {dict(reported)} left")
    for site in _still_reported(source, res.fixed, after, opts):
        fail("recheck", f"reported fixed, but a re-check still finds it: {site}")
    for r in res.remaining:
        if r.reason.startswith("internal error"):
            fail("internal-error", f"{r.diagnostic.code} at line {r.diagnostic.line}: {r.reason}")
    again = fix_source(res.fixed, PATH, None, opts, diagnose)
    if again.fixed != res.fixed:
        fail("idempotence", "fixing the fixed source changes it again:\n" + _diff(res.fixed, again.fixed))
    kinds = {fix_kind(a.message): a.applicability for a in res.applied}
    return Rewrite(options, res, kinds, fails)


def _still_reported(source: str, fixed: str, after: list, opts: FixOptions) -> list[str]:
    """Sites a round reported fixed that a re-check of the result still finds.

    A site is its rule and the text of its line. The rounds are replayed one at a time (as the
    engine runs them), so that each repair's line can be read in the text it was made in. A finding
    that now holds only in one mode (``data["mode"]``: the original branch kept for grad-enabled calls)
    is another finding than the one repaired."""
    def key(text: str, code_: str, line: int) -> tuple[str, str]:
        return code_, text.splitlines()[line - 1].strip()

    claimed: Counter = Counter()
    text = source
    for _ in range(opts.max_rounds):
        step = fix_source(text, PATH, None, replace(opts, max_rounds=1), diagnose)
        if not step.applied or step.fixed == text:
            break
        claimed.update(key(text, a.code, a.line) for a in step.applied)
        text = step.fixed
    before = Counter(key(source, d.code, d.line) for d in diagnose(source))
    now = Counter(key(fixed, d.code, d.line) for d in after if not (d.data or {}).get("mode"))
    return [f"{c} `{t}`" for (c, t), n in now.items() if (c, t) in claimed and n > max(before[(c, t)] - claimed[(c, t)], 0)]


def _diff(a: str, b: str) -> str:
    import difflib

    return "".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True), "fixed", "fixed twice"))


# The kind of a repair, from its message (one row per repair the fixers write).
FIX_KINDS: list[tuple[str, str]] = [
    (r"^keep the message", "keep"),
    (r"^the check only decides whether to report.*`_mend_emit`", "report-keep"),
    (r"^the check only decides whether to report", "report-guard"),
    (r"^guard the ", "guard"),
    (r"^defer the call", "defer"),
    (r"^remove the call", "drop"),
    (r"^read the clock only in eager", "clock"),
    (r"^data-dependent branch \(assignments\) -> torch\.where", "where"),
    (r"^data-dependent branch \(returns\) -> torch\.where", "where-return"),
    (r"^data-dependent branch \(buffer\) -> ", "where-buffer"),
    (r"^conditional expression -> torch\.where", "where-ternary"),
    (r"torch\.cond under compile", "cond"),
    (r"^validation guard ->", "validation"),
    (r"^assert on the tensor", "item-assert"),
    (r"0-d tensor( \(detached\))?: (drop `\.item\(\)`|it only feeds)", "item-tensor"),
    (r"^keep the 0-d tensor( \(detached\))? instead of `float\(t\)`", "float"),
    (r"^enable capture_", "capture"),
    (r"^capture the value for this expression only", "capture-scoped"),
    (r"`len\(t\.tolist\(\)\)`", "tolist"),
    (r"^masked reduction", "masked"),
    (r"^`t\[torch\.where\(m\)\] = v`", "mask-store"),
    (r"^a routed store", "routed-store"),
    (r"^a mask of all ones set to None", "mask-drop"),
    (r"^rows routed by runs of equal ids", "grouped-rows"),
    (r"^a data-dependent fallback that returns early", "fallback-select"),
    (r"^a data-dependent store into a tensor", "store-select"),
    (r"`copy\.deepcopy\(t\)`", "deepcopy"),
    (r"^fold the module's integer buffers", "int-fold"),
    (r"^numpy on Python numbers -> math", "numpy-numbers"),
    (r"^keep a Python copy of the numbers a shape tensor", "kept-values"),
    (r"^run the method, computed only from Python values", "constant-method"),
    (r"^compute `\w+` only in eager", "eager-only"),
    (r"^LayerDrop: ", "layerdrop"),
    (r"^LayerDrop in training: under compile the layer is computed", "layerdrop-select"),
    (r"^`t\[mask\] .?= v` -> `_mend_mask_update", "mask-update"),
    (r"^`assert not t` -> ", "assert-not"),
]


def fix_kind(message: str) -> str:
    for pattern, kind in FIX_KINDS:
        if re.search(pattern, message):
            return kind
    return "other"


# --- stage 2/3: running ------------------------------------------------------------------------------

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64, "int64": torch.int64}
FLOAT_MODES = ["pos", "neg", "mixed", "zero", "nan", "inf", "big"]


@dataclass(frozen=True)
class Case:
    """One input: ``x`` is (rows, WIDTH); ``y`` is like x, one row (WIDTH,), one column (rows, 1), or
    a batch of x-shaped tensors (2, rows, WIDTH) that x broadcasts against."""

    dtype: str = "float32"
    x_mode: str = "mixed"
    y_mode: str = "mixed"
    rows: int = 3
    y_shape: str = "same"  # "same" | "row" | "col" | "batch"
    mask: str = "none"  # "none" | "x>0" | "false"
    seed: int = 0

    def __str__(self) -> str:
        parts = [self.dtype, f"x={self.x_mode}", f"y={self.y_mode}", f"rows={self.rows}"]
        if self.y_shape != "same":
            parts.append(f"y_shape={self.y_shape}")
        if self.mask != "none":
            parts.append(f"mask={self.mask}")
        return " ".join(parts)

    def build(self, has_mask: bool) -> dict[str, Any]:
        gen = torch.Generator().manual_seed(self.seed)
        x = _values(self.x_mode, (self.rows, WIDTH), self.dtype, gen)
        yshape = {"same": (self.rows, WIDTH), "row": (WIDTH,), "col": (self.rows, 1),
                  "batch": (2, self.rows, WIDTH)}[self.y_shape]
        args: dict[str, Any] = {"x": x, "y": _values(self.y_mode, yshape, self.dtype, gen)}
        if has_mask and self.mask != "none":
            args["mask"] = (x > 0) if self.mask == "x>0" else torch.zeros(x.shape, dtype=torch.bool)
        return args


def _values(mode: str, shape: tuple[int, ...], dtype: str, gen: torch.Generator) -> torch.Tensor:
    base = torch.randn(shape, generator=gen, dtype=torch.float64)
    if mode == "pos":
        base = base.abs() + 0.5
    elif mode == "neg":
        base = -base.abs() - 0.5
    elif mode == "zero":
        base = torch.zeros(shape, dtype=torch.float64)
    elif mode == "big":
        base = base * 1e5
    flat = base.view(-1)
    if mode == "nan" and flat.numel():
        flat[0] = float("nan")
    if mode == "inf" and flat.numel():
        flat[0] = float("inf")
        flat[-1] = float("-inf")
    if DTYPES[dtype].is_floating_point:
        return base.to(DTYPES[dtype])
    return (base * 2).round().to(DTYPES[dtype])


def eager_cases() -> list[Case]:
    """Every branch, both sides, in every dtype; empty and one-row tensors; broadcasting ``y``."""
    pairs = [("pos", "pos"), ("neg", "neg"), ("mixed", "mixed"), ("pos", "neg"), ("neg", "pos"),
             ("zero", "zero"), ("nan", "mixed"), ("inf", "pos"), ("big", "big")]
    masks = ["none", "x>0", "false"]
    out = []
    for dtype in DTYPES:
        for i, (xm, ym) in enumerate(pairs):
            if dtype == "int64" and "nan" in (xm, ym) or dtype == "int64" and "inf" in (xm, ym):
                continue
            out.append(Case(dtype, xm, ym, mask=masks[i % 3], seed=i))
    for dtype in ("float32", "int64"):
        out += [Case(dtype, "mixed", "mixed", rows=0), Case(dtype, "pos", "pos", rows=1),
                Case(dtype, "neg", "mixed", rows=1, mask="x>0")]
    for y_shape in ("row", "col", "batch"):
        out += [Case("float32", "pos", "mixed", y_shape=y_shape), Case("float32", "neg", "pos", y_shape=y_shape)]
    return out


def compiled_cases() -> list[Case]:
    return [Case("float32", "pos", "pos"), Case("float32", "neg", "neg", mask="x>0"),
            Case("float32", "mixed", "mixed"), Case("float32", "nan", "mixed", mask="false"),
            Case("float16", "mixed", "pos"), Case("int64", "pos", "neg"),
            Case("float32", "mixed", "mixed", rows=0), Case("float32", "pos", "mixed", y_shape="row"),
            Case("float32", "neg", "pos", y_shape="batch"), Case("float32", "pos", "neg", y_shape="batch")]


@dataclass
class Observed:
    """What one call did: its result (or exception), its output, the inputs afterwards, and where the random
    streams (torch's and Python's, seeded with the case's seed before the call) stood after it."""

    result: Any
    exc: tuple[str, str] | None
    events: list[tuple[str, ...]]
    inputs_after: dict[str, Any]
    rng_after: tuple[str, str] = ("", "")
    grads: Any = None  # a module's parameter gradients of its floating outputs' sum (or the backward's error)


_TMP = Path(tempfile.mkdtemp(prefix="mend_propgen_"))
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)
# the helper module `mend fix` writes beside loose scripts (the generated programs import from it), every helper
(_TMP / f"{TREE_MODULE}.py").write_text(module_text(None, [f"{PREFIX}{n.rstrip('_')}" for n in units()
                                                            if not n.startswith("_")]))
sys.path.insert(0, str(_TMP))


def load(source: str, tag: str) -> Any:
    """Import ``source`` as a fresh module (a file, so tracebacks, warnings and Dynamo see it)."""
    name = f"mend_pg_{hashlib.sha1(source.encode()).hexdigest()[:16]}_{tag}"
    path = _TMP / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import does: the kept messages find their callee through it
    spec.loader.exec_module(module)
    return module


def target(module: Any, kind: str) -> Callable:
    return module.make() if kind == "module" else module.f


class _Capture(logging.Handler):
    """stdout, records of the program's logger and warnings from generated files, in one ordered list."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.events: list[tuple[str, ...]] = []
        self.stdout = _Stdout(self.events)

    def emit(self, record: logging.LogRecord) -> None:
        self.events.append(("log", record.levelname, record.getMessage()))

    def showwarning(self, message, category, filename, lineno, file=None, line=None) -> None:
        """A warning and the file it is attributed to (the program, or another module by name); torch's
        own warnings are not the program's output."""
        where = "program" if str(filename).startswith(str(_TMP)) else Path(filename).name
        if f"{os.sep}torch{os.sep}" not in str(filename):
            self.events.append(("warn", category.__name__, str(message), where))

    @contextlib.contextmanager
    def active(self):
        logger = logging.getLogger(LOGGER)
        old_level, old_prop = logger.level, logger.propagate
        logger.addHandler(self)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(self.stdout):
                warnings.simplefilter("always")
                warnings.showwarning = self.showwarning
                yield self
        finally:
            logger.removeHandler(self)
            logger.setLevel(old_level)
            logger.propagate = old_prop


class _Stdout(io.TextIOBase):
    def __init__(self, events: list) -> None:
        self.events = events

    def write(self, s: str) -> int:
        if self.events and self.events[-1][0] == "print":
            self.events[-1] = ("print", self.events[-1][1] + s)
        else:
            self.events.append(("print", s))
        return len(s)


def observe(fn: Callable, case: Case, has_mask: bool, grad: bool) -> Observed:
    args = case.build(has_mask)
    inputs = {k: v.clone() for k, v in args.items()}
    cap = _Capture()
    result, exc = None, None
    torch.manual_seed(case.seed)
    random.seed(case.seed)
    params = list(fn.parameters()) if isinstance(fn, torch.nn.Module) else []
    for p in params:
        p.grad = None
    with cap.active(), torch.set_grad_enabled(grad):
        try:
            result = fn(**inputs)
        except Exception as e:  # the program's own exceptions are part of what is compared
            exc = (type(e).__name__, _message(e))
    rng = _rng_state()
    return Observed(result, exc, cap.events, inputs, rng, _gradients(params, result) if exc is None else None)


def _gradients(params: list, result: Any) -> Any:
    """The parameters' gradients of the sum of the floating outputs that require grad (None for a parameter
    the outputs do not reach), the backward's exception, or None when there is nothing to differentiate."""
    outs = [t for t in (result if isinstance(result, tuple) else (result,))
            if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
    if not params or not outs:
        return None
    try:
        sum(t.double().sum() for t in outs).backward()
    except Exception as e:
        return (type(e).__name__, _message(e))
    return tuple(p.grad for p in params)


def _rng_state() -> tuple[str, str]:
    """Digests of torch's default generator and of Python's ``random``."""
    return (hashlib.sha1(torch.get_rng_state().numpy().tobytes()).hexdigest(),
            hashlib.sha1(repr(random.getstate()).encode()).hexdigest())


def _message(exc: BaseException) -> str:
    """The message without Dynamo's user-code trailer (it names the generated file and line)."""
    text = str(exc)
    for marker in ("\n\nfrom user code:", "\n\nSet TORCHDYNAMO_VERBOSE", "\n\nDeveloper debug context"):
        text = text.split(marker)[0]
    return text


# --- comparing -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Difference:
    kind: str  # exception | structure | dtype | shape | value | stride | output | mutation | rng | grad
    detail: str
    original: Any = None
    rewritten: Any = None
    case: Case | None = None  # the input it showed on
    raised: bool = False  # the rewritten call raised (for an output difference)


def _bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.is_floating_point():
        na, nb = a.isnan(), b.isnan()
        zero = torch.zeros((), dtype=a.dtype)
        return (torch.equal(na, nb) and torch.equal(torch.where(na, zero, a), torch.where(nb, zero, b))
                and torch.equal(a.signbit(), b.signbit()))
    return torch.equal(a, b)


def _tensor_difference(a: torch.Tensor, b: torch.Tensor, where: str) -> Difference | None:
    if a.dtype != b.dtype:
        return Difference("dtype", f"{where}: {a.dtype} -> {b.dtype}", a, b)
    if a.shape != b.shape:
        return Difference("shape", f"{where}: {tuple(a.shape)} -> {tuple(b.shape)}", a, b)
    if not _bits_equal(a, b):
        return Difference("value", f"{where}: {_show(a)} -> {_show(b)}", a, b)
    if a.numel() > 1 and a.stride() != b.stride():
        return Difference("stride", f"{where}: {a.stride()} -> {b.stride()}", a, b)
    return None


def _show(t: torch.Tensor) -> str:
    return repr(t.detach().flatten()[:6].tolist())


def _value_differences(a: Any, b: Any, where: str = "result") -> list[Difference]:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        d = _tensor_difference(a, b, where)
        return [d] if d else []
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _value_differences(x, y, f"{where}[{i}]")]
    if type(a) is not type(b) or (not isinstance(a, torch.Tensor) and a != b):
        return [Difference("structure", f"{where}: {_short(a)} -> {_short(b)}", a, b)]
    return []


def _short(v: Any) -> str:
    return f"tensor{tuple(v.shape)} {v.dtype}" if isinstance(v, torch.Tensor) else repr(v)[:80]


def differences(orig: Observed, new: Observed, case: Case | None = None) -> list[Difference]:
    return [replace(d, case=case) for d in _differences(orig, new)]


def _differences(orig: Observed, new: Observed) -> list[Difference]:
    out: list[Difference] = []
    if orig.exc != new.exc:
        out.append(Difference("exception", f"{orig.exc} -> {new.exc}", orig.exc, new.exc))
    elif orig.exc is None:
        out += _value_differences(orig.result, new.result)
    for name in orig.inputs_after:
        out += [Difference("mutation", d.detail, d.original, d.rewritten)
                for d in _value_differences(orig.inputs_after[name], new.inputs_after[name], f"input {name}")]
    if orig.events != new.events:
        out.append(Difference("output", f"{orig.events} -> {new.events}", orig.events, new.events,
                              raised=new.exc is not None))
    out += _grad_differences(orig.grads, new.grads)
    for name, a, b in zip(("torch", "Python random"), orig.rng_after, new.rng_after, strict=True):
        if a != b:
            out.append(Difference("rng", f"{name}'s random stream after the call differs", a, b))
    return out


def _is_grads(g: Any) -> bool:
    return isinstance(g, tuple) and all(x is None or isinstance(x, torch.Tensor) for x in g)


def _grad_differences(a: Any, b: Any) -> list[Difference]:
    """Gradients of each parameter (None where the outputs do not reach it), or the backward's error."""
    if _is_grads(a) and _is_grads(b) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            where = f"gradient of parameter {i}"
            if (x is None) != (y is None):
                out.append(Difference("grad", f"{where}: {_short(x)} -> {_short(y)}", x, y))
            elif x is not None:
                out += [replace(d, kind="grad") for d in _value_differences(x, y, where)]
        return out
    if _is_grads(a) or _is_grads(b) or a != b:
        return [Difference("grad", f"gradients: {_short(a)} -> {_short(b)}", a, b)]
    return []


# --- the documented differences ------------------------------------------------------------------

def _is_subsequence(short: list, long: list) -> bool:
    it = iter(long)
    return all(any(e == f for f in it) for e in short)


def _raised_computing_more(d: Difference) -> bool:
    """The compiled code raised where the original did not, or raised something else: computing what the
    original never computed (the side not taken, an `and` operand Python would have skipped) can fail."""
    return d.rewritten is not None


def _integer_input(d: Difference) -> bool:
    """The input tensors hold integers: where `float(t)` met an integer tensor, the 0-d tensor promotes
    differently (an integer result), and what follows computes on that."""
    return d.case is not None and not DTYPES[d.case.dtype].is_floating_point


def _conversion_warning_gone(d: Difference) -> bool:
    """Only torch's warning that a tensor requiring grad was converted to a number is gone: the repair keeps the
    0-d tensor, so nothing is converted (the events are otherwise the same, in order)."""
    if not (isinstance(d.original, list) and isinstance(d.rewritten, list)):
        return False
    kept = [e for e in d.original if not (len(e) > 2 and e[0] == "warn" and str(e[2]).startswith(
        "Converting a tensor with requires_grad=True to a scalar"))]
    return kept == d.rewritten and len(kept) < len(d.original)


def _reduction_order(d: Difference) -> bool:
    """Same dtype and shape, values within 1%: a float16 masked mean rounds twice (the sum, then the
    division) and later ops carry that into float32 results."""
    a, b = d.original, d.rewritten
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dtype != b.dtype \
            or a.shape != b.shape or not a.is_floating_point():
        return False
    return bool(torch.allclose(a.double(), b.double(), rtol=1e-2, atol=1e-3, equal_nan=True))


def _assert_became_runtime_error(d: Difference) -> bool:
    return d.original is not None and d.original[0] == "AssertionError" and d.rewritten is not None \
        and d.rewritten[0] == "RuntimeError"


def _check_became_runtime_assert(d: Difference) -> bool:
    """A captured tensor check failed as Dynamo's runtime assert on the captured value (``u0 >= 1``)."""
    return d.original is not None and d.rewritten is not None and d.rewritten[0] == "RuntimeError" \
        and re.search(r"\bu\d+ >= 1\b", d.rewritten[1]) is not None


def _mend_marked_runtime_error(d: Difference) -> bool:
    if d.original is None or d.rewritten is None or d.rewritten[0] != "RuntimeError":
        return False
    return f"[mend:{d.original[0]}] {d.original[1]}" in d.rewritten[1]


def _check_preempted(d: Difference) -> bool:
    """Both raise, with other errors: the check moved into the graph, so an error Dynamo meets while it
    traces the code after the check (which the original never reached) surfaces first."""
    return d.original is not None and d.rewritten is not None


def _fstring_template(d: Difference) -> bool:
    """An f-string message: the compiled check raises the original class (at a restoring boundary, else
    the marked RuntimeError) with the literal parts and each replacement field as its source
    (``bad {x.shape}``); the original's message is that template filled in."""
    if d.original is None or d.rewritten is None:
        return False
    kind, text = d.rewritten[0], d.rewritten[1]
    marker = f"[mend:{d.original[0]}] "
    if kind == "RuntimeError" and marker in text:
        text = text[text.index(marker) + len(marker):].split("\n", 1)[0]
    elif kind != d.original[0]:
        return False
    literal = re.split(r"\{[^{}]+\}", text)
    return len(literal) > 1 and re.fullmatch(".*".join(map(re.escape, literal)), d.original[1], re.S) is not None


def _replayed(events: list) -> Counter:
    """Messages without the place a warning is attributed to (a replay after the graph has no line)."""
    return Counter(e[:3] if e[0] == "warn" else e for e in events)


def _output_moved(d: Difference) -> bool:
    """The same messages, in another order (deferred ones come after the graph, a warning attributed to
    the replay); when the call raised, those recorded before the error may be missing."""
    orig, new = _replayed(d.original), _replayed(d.rewritten)
    return orig == new or (d.raised and not new - orig)


def _output_lost_on_error(d: Difference) -> bool:
    """The call raised, and messages Dynamo would have emitted after the graph are missing."""
    return d.raised and _is_subsequence(d.rewritten, d.original)


def _promoted(d: Difference) -> bool:
    """Same shape, values within float16's rounding: a 0-d tensor kept for a Python number promotes to
    its own dtype and rounds arithmetic there (an integer result may become floating, or the reverse)."""
    a, b = d.original, d.rewritten
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape:
        return False
    if a.dtype.is_complex or b.dtype.is_complex:
        return False
    return bool(torch.allclose(a.double(), b.double(), rtol=1e-2, atol=1e-3, equal_nan=True))


def _capture_failed_on_empty(d: Difference) -> bool:
    """Dynamo's own failure to compile a slice by a captured number of an empty tensor (torch 2.13)."""
    return d.rewritten is not None and d.rewritten[0] == "InternalTorchDynamoError" \
        and "PendingUnbackedSymbolNotFound" in d.rewritten[1]


def _cond_rejects_sides(d: Difference) -> bool:
    """torch.cond refuses, while tracing, sides of different dtypes or shapes (or an output aliasing an
    input)."""
    if d.rewritten is None:
        return False
    text = d.rewritten[1]
    return "torch.cond" in text and any(m in text for m in ("expected same dtype", "expected same dim",
                                                             "expected same shape", "alias"))


def _output_dropped(d: Difference) -> bool:
    return _is_subsequence(d.rewritten, d.original)


@dataclass(frozen=True)
class Allowance:
    """One documented difference: which repair, in which run, of which kind, and where it is written."""

    fix: str  # a kind from FIX_KINDS
    applicability: str  # the applicability the fixer gave it
    mode: str  # "eager" | "compiled" | "both"
    difference: str  # a Difference.kind
    holds: Callable[[Difference], bool]
    documented: str


ALLOWANCES: list[Allowance] = [
    Allowance("guard", "safe", "compiled", "output", _output_dropped,
              "docs/fix.md: policy guard (message skipped under compile)"),
    Allowance("keep", "safe", "compiled", "output", _output_lost_on_error,
              "docs/rules/MND101.md: the graph makes the kept calls when it runs, so a compiled call that raises "
              "while Dynamo traces it emits none of those before the error"),
    Allowance("report-guard", "safe", "compiled", "output", _output_dropped,
              "docs/rules/MND201.md: policy guard: the report does not run under compile"),
    Allowance("defer", "unsafe", "compiled", "output", _output_moved,
              "docs/fix.md, defer policy: output keeps its content but moves to after the graph"),
    Allowance("drop", "unsafe", "both", "output", _output_dropped,
              "docs/fix.md, drop policy: removes the statement (its output is lost in eager too)"),
    Allowance("fallback-select", "unsafe", "compiled", "output", _output_dropped,
              "docs/rules/MND201.md: under compile the fallback branch's report is not made"),
    Allowance("masked", "safe", "compiled", "value", _reduction_order,
              "docs/rules/MND305.md: under compile, equal up to floating-point reduction order"),
    Allowance("routed-store", "unsafe", "compiled", "value", _reduction_order,
              "docs/rules/MND305.md: under compile the expert runs on every row, a matmul over more rows may "
              "round differently (within float tolerance)"),
    Allowance("grouped-rows", "unsafe", "compiled", "value", _reduction_order,
              "docs/rules/MND304.md: under compile every module runs on every row, a matmul over more rows may "
              "round differently (within float tolerance)"),
    *[Allowance("item-tensor", "unsafe", "both", kind, _promoted,
                "docs/rules/MND301.md: the 0-d tensor keeps its dtype: arithmetic on it rounds in that dtype "
                "and type promotion can change the result's dtype") for kind in ("dtype", "value", "mutation")],
    *[Allowance(fix, "unsafe", "compiled", "exception", _assert_became_runtime_error,
                "docs/rules/MND301.md: with scalar capture a failing `assert` on the number raises RuntimeError")
      for fix in ("capture", "capture-scoped")],
    *[Allowance(fix, "unsafe", "compiled", "exception", _check_became_runtime_assert,
                "docs/rules/MND302.md: a captured tensor check that fails raises Dynamo's RuntimeError of a failed "
                "runtime assertion where the original raised the check's own error") for fix in ("capture",
                                                                                                  "capture-scoped")],
    *[Allowance(fix, "unsafe", "compiled", "exception", _capture_failed_on_empty,
                "docs/rules/MND301.md: with scalar capture Dynamo can fail to compile a slice by the number "
                "of an empty tensor") for fix in ("capture", "capture-scoped")],
    *[Allowance(fix, "unsafe", "compiled", "exception", _raised_computing_more,
                "docs/rules/MND201.md: under compile the side not taken is computed too, and can fail (while "
                "tracing) where the original never computed it") for fix in ("where", "where-return", "where-ternary")],
    Allowance("store-select", "unsafe", "compiled", "exception", _raised_computing_more,
              "docs/rules/MND201.md: under compile the value and the test are computed on both paths, the "
              "store's element read too, and can fail where the original skipped the store"),
    *[Allowance(fix, "unsafe", "both", "output", _conversion_warning_gone,
                "docs/safety.md: the number is kept as a 0-d tensor, so torch's warning about converting a tensor "
                "that requires grad to a number is not given") for fix in ("float", "item-tensor")],
    *[Allowance("float", "unsafe", "both", kind, _integer_input,
                "docs/rules/MND302.md: a 0-d tensor promotes differently from a Python float when an integer "
                "tensor meets a float") for kind in ("dtype", "value", "exception", "output", "mutation")],
    Allowance("cond", "unsafe", "compiled", "exception", _cond_rejects_sides,
              "docs/fix.md, torch.cond: the two sides must have the same dtypes and shapes (a mismatch is an "
              "error at compile time); an output that is a view of an input fails to trace"),
    Allowance("item-assert", "unsafe", "compiled", "exception", _assert_became_runtime_error,
              "docs/rules/MND301.md: a failing check under compile raises RuntimeError"),
    Allowance("assert-not", "unsafe", "compiled", "exception", _assert_became_runtime_error,
              "docs/rules/MND302.md: `assert torch.logical_not(t)`: under compile a failing check raises RuntimeError "
              "with the message"),
    Allowance("assert-not", "unsafe", "compiled", "exception", _check_preempted,
              "docs/rules/MND302.md: the check runs inside the graph, so an error Dynamo meets while tracing the "
              "code after it surfaces first (the call raises either way)"),
    Allowance("validation", "unsafe", "compiled", "exception", _mend_marked_runtime_error,
              "docs/rules/MND203.md: without a restoring boundary the check surfaces as RuntimeError('[mend:E] msg')"),
    Allowance("validation", "unsafe", "compiled", "exception", _check_preempted,
              "docs/rules/MND203.md: the check runs inside the graph, so an error Dynamo meets while tracing the "
              "code after it surfaces first (the call raises either way)"),
    Allowance("validation", "unsafe", "compiled", "exception", _fstring_template,
              "docs/rules/MND203.md: an f-string message keeps its literal parts; each value is written as its "
              "source (`{n}`)"),
]


def allowance_for(d: Difference, kinds: dict[str, str], mode: str) -> Allowance | None:
    for a in ALLOWANCES:
        if a.fix in kinds and kinds[a.fix] == a.applicability and a.mode in (mode, "both") \
                and a.difference == d.kind and a.holds(d):
            return a
    return None


# --- one program -----------------------------------------------------------------------------------

@dataclass
class Report:
    program: Program
    diagnostics: list
    rewrites: dict[str, Rewrite] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    allowed: Counter = field(default_factory=Counter)  # documented allowance -> times used
    torch_differences: int = 0  # compiled differences the original shows too


def check_program(program: Program, eager: bool = True, compiled: bool = False,
                  cases: list[Case] | None = None, options: tuple[str, ...] = ("safe", "unsafe")) -> Report:
    """Rewrite ``program`` with each of ``options`` (keys of :data:`OPTIONS`) and compare the runs."""
    report = Report(program, diagnose(program.source))
    for name in options:
        rw = rewrite(program.source, name)
        report.rewrites[name] = rw
        report.failures += rw.failures
    changed: dict[str, Rewrite] = {}
    for name, rw in report.rewrites.items():
        if rw.runnable and all(rw.result.fixed != other.result.fixed for other in changed.values()):
            changed[name] = rw  # a text an earlier run produced is run once, under that run's name
    if not changed or not (eager or compiled):
        return report
    torch._dynamo.reset()
    original = load(program.source, "orig")
    versions = {o: load(rw.result.fixed, o) for o, rw in changed.items()}
    if eager:
        _eager(report, program, original, versions, changed, cases or eager_cases())
    if compiled:
        _compiled(report, program, original, versions, changed, cases or compiled_cases())
    return report


def _eager(report: Report, program: Program, original: Any, versions: dict, changed: dict,
           cases: list[Case]) -> None:
    ref_fn = target(original, program.kind)
    fns = {o: target(m, program.kind) for o, m in versions.items()}
    with torch.compiler.set_stance("force_eager"):
        for case in cases:
            for grad in (True, False):
                ref = observe(ref_fn, case, program.has_mask, grad)
                for o, fn in fns.items():
                    got = observe(fn, case, program.has_mask, grad)
                    _judge(report, changed[o], "eager", f"{case}{'' if grad else ' no_grad'}",
                           differences(ref, got, case))


def _compiled(report: Report, program: Program, original: Any, versions: dict, changed: dict,
              cases: list[Case]) -> None:
    from mend.rewriter.runtime import boundary

    def compiled_target(module: Any) -> Callable:
        if program.kind == "module":
            return boundary(torch.compile(module.make(), backend="eager"))
        return module.f

    with torch._dynamo.config.patch(recompile_limit=64, accumulated_recompile_limit=4096):
        fns = {o: compiled_target(m) for o, m in versions.items()}
        orig_compiled = None
        ref_fn = target(original, program.kind)
        for case in cases:
            with torch.compiler.set_stance("force_eager"):
                ref = observe(ref_fn, case, program.has_mask, grad=False)
            for o, fn in fns.items():
                got = observe(fn, case, program.has_mask, grad=False)
                diffs = [d for d in differences(ref, got, case)
                         if not _surfaced_by_dynamo(d) and not _draws_before_a_trace_error(d, ref, got)]
                if not diffs:
                    continue
                if orig_compiled is None:
                    orig_compiled = compiled_target(original)
                if not differences(observe(orig_compiled, case, program.has_mask, grad=False), got):
                    report.torch_differences += 1
                    continue
                _judge(report, changed[o], "compiled", str(case), diffs)


def _surfaced_by_dynamo(d: Difference) -> bool:
    """Torch's own difference: an error eager raises, raised by Dynamo while tracing (fake tensors),
    as ``TorchRuntimeError`` naming the original exception type."""
    return d.kind == "exception" and d.original is not None and d.rewritten is not None \
        and d.rewritten[0] == "TorchRuntimeError" and f"got {d.original[0]}(" in d.rewritten[1]


def _draws_before_a_trace_error(d: Difference, ref: Observed, got: Observed) -> bool:
    """Both calls raised the same error, and only the random streams differ: a compiled call that fails while
    Dynamo traces it runs none of the graph, so the numbers the original drew before the error (in a graph
    before its break) are not drawn (docs/safety.md)."""
    return d.kind == "rng" and ref.exc is not None and ref.exc == got.exc


def _judge(report: Report, rw: Rewrite, mode: str, case: str, diffs: list[Difference]) -> None:
    for d in diffs:
        allowed = allowance_for(d, rw.kinds, mode)
        if allowed is not None:
            report.allowed[f"{allowed.fix}: {allowed.difference}"] += 1
            continue
        report.failures.append(Failure(mode, rw.options, d.kind, case, d.detail))


def explain(report: Report, limit: int = 6) -> str:
    """A readable account of a failing program: source, the fixed sources, the first failures."""
    lines = [str(report.program)]
    shown: set[str] = {report.program.source}
    for o, rw in report.rewrites.items():
        applied = ", ".join(f"{a.code} {fix_kind(a.message)} ({a.applicability})" for a in rw.result.applied)
        lines.append(f"--- {o} fix: {applied or 'nothing applied'}")
        if rw.result.fixed not in shown:
            lines.append(rw.result.fixed)
            shown.add(rw.result.fixed)
        elif rw.result.changed:
            lines.append("(the same text as above)")
    seen: set = set()
    shown = 0
    for f in report.failures:
        key = (f.stage, f.options, f.kind)
        if key in seen or shown >= limit:
            continue
        seen.add(key)
        shown += 1
        lines.append(str(f))
    return "\n".join(lines)


__all__ = [
    "ALLOWANCES", "Allowance", "Case", "Difference", "FIX_KINDS", "Failure", "Observed", "Report", "Rewrite",
    "check_program", "compiled_cases", "diagnose", "differences", "eager_cases", "explain", "fix_kind",
    "load", "observe", "rewrite",
]

if __name__ == "__main__":  # pragma: no cover - python -m tests.rewriter.differential FILE
    from tests.rewriter.propgen import program_from_source

    rep = check_program(program_from_source(Path(sys.argv[1]).read_text()), compiled=True)
    print(explain(rep, limit=50))
