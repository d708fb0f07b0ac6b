"""The fix registry of the shared contract: what ``mend fix`` does for each rule (no torch import).

``fix_info(code)`` returns a :class:`FixInfo` or ``None`` when mend has no fix for that rule.
``availability`` says whether every finding of the rule gets a fix (``always``) or only those whose
safety conditions the fix can prove (``sometimes``); ``applicability`` is the class of the fix in its
most common form (``safe`` fixes are applied by ``mend fix``, ``unsafe`` ones need ``--unsafe-fixes``).
``safety_doc`` (markdown) says what the fix changes and when it declines; ``mend rule CODE`` shows it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FixInfo:
    code: str
    availability: str  # "always" | "sometimes"
    applicability: str  # "safe" | "unsafe"
    summary: str
    safety_doc: str


_SIDE_EFFECT_DOC = """\
Policy `[tool.mend] side-effects` (or `mend fix --side-effects`):

- `keep` (default, **safe**): `if not torch.compiler.is_compiling(): <the call> else:
  _mend_emit("logger.info", *args)`. Eager runs exactly as before; under `torch.compile` Dynamo
  reorders `_mend_emit` (a helper added to the file, registered in
  `torch._dynamo.config.reorderable_logging_functions`) to right after the graph: the same text,
  in the same order among the call's messages, with tensor arguments as they were at the call
  (copied when the code could change them later). No graph break; the repaired file needs only
  torch. One-shot reports (`logger.warning_once`) stay one-shot (the logger keeps its own memory).
  Where Dynamo cannot reorder the call (the callee is not a module global or `print`, a container or
  non-literal keyword argument, `*args`, `logger.exception` or any call inside `except`), it is
  guarded as below and the fix message says "message dropped under compile". Under compile a
  warning is attributed to the helper's line and a log record's `funcName`/`lineno` to the helper.
- `guard` (**safe**): wraps the statement in `if not torch.compiler.is_compiling():`.
  Eager runs exactly as before and program results are unchanged; under `torch.compile` the
  statement does not run (no output from inside the graph).
- `defer` (**unsafe**): `fn(args)` becomes `mend.rewriter.runtime.defer(fn, args)`. Eager calls it
  at once; under compile the call is buffered with a snapshot (clone) of its tensor arguments and
  replayed after the graph by `mend.rewriter.runtime.flush()` / a boundary wrapped with
  `mend.rewriter.runtime.boundary(...)`. Output moves in time; the repaired code needs mend.
- `drop` (**unsafe**): removes the statement (its output is lost in eager too).

A time call whose value is assigned (`t0 = time.perf_counter()`) becomes
`time.perf_counter() if not torch.compiler.is_compiling() else 0.0`: safe when the name only feeds
output calls (which are guarded too), unsafe otherwise.
Declines: a call whose value is used elsewhere, several statements on one line, `*args` with defer.
"""

_INFO = {
    "MND101": ("sometimes", "safe", "guard (or defer/drop) the print", _SIDE_EFFECT_DOC),
    "MND102": ("sometimes", "safe", "guard (or defer/drop) the logger call", _SIDE_EFFECT_DOC),
    "MND103": ("sometimes", "safe", "guard (or defer/drop) warnings.warn", _SIDE_EFFECT_DOC),
    "MND104": ("sometimes", "safe", "read the clock only in eager", _SIDE_EFFECT_DOC),
    "MND105": ("sometimes", "unsafe", "replace random.random() with torch.rand(()) (opt-in: --torch-rng)",
               "Declined by default: Python's random stream cannot be traced and a torch replacement "
               "draws different numbers. With `--torch-rng --unsafe-fixes`, `random.random()` becomes "
               "`torch.rand(())`, a 0-d tensor from torch's generator (**unsafe**)."),
    "MND106": ("sometimes", "safe", "guard the debugger stop",
               "Wraps `pdb.set_trace()`/`breakpoint()` in `if not torch.compiler.is_compiling():` "
               "(**safe**): eager still stops, compiled code does not."),
    "MND108": ("sometimes", "safe", "copy.deepcopy(t) -> t.clone()",
               "**Safe** when the argument is provably a tensor (annotated `torch.Tensor`, or a torch "
               "result): values are identical. The clone stays connected to autograd where deepcopy "
               "makes an independent leaf; deepcopy of a non-leaf tensor raises in eager, so in practice "
               "the argument is a leaf or a no-grad tensor. Declined when the argument is not provably "
               "a tensor (`.clone()` on a config or a dict would crash)."),
    "MND201": ("sometimes", "safe", "data-dependent if -> torch.where",
               "An `if <tensor cond>:` whose body only reports (print, logger calls, `warnings.warn`) is "
               "guarded as a whole with `if not torch.compiler.is_compiling():` under the `guard` "
               "side-effect policy (**safe** when the condition has no side effects: eager unchanged, "
               "neither the check nor the report runs under compile). Otherwise **eager keeps the "
               "original branch**: the repair is `if not torch.compiler.is_compiling(): <the original "
               "if> else: <the predicated form>`, so eager results, exceptions and output are the "
               "original code's, whatever the fix class. Under compile, conditions are computed first "
               "(`.item()` and `float()` become `.double()`, which compares like the Python number), "
               "and each assignment becomes `x = _mend_where(cond, new, x)` (elif chains in order, "
               "`return` branches as one `return _mend_where(...)`, a name new in the chain and "
               "assigned in every branch of a complete chain takes its first value plainly); a static "
               "prefix of an `and` chain stays a Python test. `_mend_where`, a helper added to the "
               "file (it needs only torch), is `torch.where` when both sides are tensors of one shape, "
               "dtype and device and the condition has one element, all decided while tracing, and the "
               "original selection otherwise (a graph break there, never another value). Declined "
               "when a side can change shape (`torch.cat`, `reshape`, indexing, ...): torch.where "
               "cannot select between such sides. Under compile the side not taken is computed too: "
               "**safe** when every such expression cannot raise for any values, shapes and real "
               "dtypes (elementwise ops with Python-number operands, reductions that accept empty "
               "tensors, `torch.finfo` of a dtype the code tested to be floating); otherwise "
               "**unsafe** (broadcasting between two tensors, `torch.finfo(x.dtype)` of an untested "
               "dtype, `max()` of an empty tensor can fail while tracing where the original never "
               "computed them). When a gradient could be infinite on the unselected side, the original "
               "branch also runs when `torch.is_grad_enabled()`. A plain `if`/`else` whose "
               "assignments call submodules (`self.m(...)`) becomes `torch.cond` under compile: each "
               "branch is a local function closing over its inputs and returning the names read after "
               "the `if`; eager keeps the original `if` behind `torch.compiler.is_compiling()`. "
               "**Unsafe**: both branches must give the same dtypes (a mismatch fails at compile time), "
               "outputs that alias an input fail to trace (bare names are cloned), and parameters of the "
               "branch not taken get zero gradients instead of None (optimizers with momentum or weight "
               "decay then update them). Declines: calls other than torch/F./tensor methods/submodules, "
               "nested statements (the inner `if` is repaired first), tuple or attribute targets, "
               "`x += ...`, `global` names, a name first defined in only some branches, a branch that "
               "reads a name before assigning it, non-tensor values, `elif` chains or `return` with "
               "submodule calls, `torch.equal` conditions."),
    "MND203": ("sometimes", "unsafe", "validation guard -> torch._assert_async with the exception restored",
               "Eager keeps the original `if ...: raise E(msg)` (behind "
               "`if not torch.compiler.is_compiling():`); compiled code runs "
               "`torch._assert_async(torch.logical_not(cond), '[mend:E] msg')` in the graph, and each "
               "`torch.compile` boundary in the file is wrapped with `_mend_restore_exceptions`, which "
               "re-raises `E(msg)`. **Unsafe**: the check becomes asynchronous on CUDA, and where the "
               "compile boundary is outside the repaired tree (e.g. a repaired library compiled by the "
               "user's script) it surfaces as `RuntimeError('[mend:E] msg')` unless the caller wraps "
               "its compiled object with `mend.rewriter.runtime.restore_exceptions`. Declines: non-"
               "builtin exceptions, non-literal messages, `raise ... from`, guards inside `try`."),
    "MND301": ("sometimes", "safe", "keep the 0-d tensor instead of .item()",
               "**Safe** when the number only feeds arithmetic with a tensor: `.item()` is dropped and "
               "`max(n, c)`/`min(n, c)` become `torch.clamp`. In an `assert` (`assert t.item() <op> n`, "
               "`assert t.item()`, plain-string message) the `.item()` is dropped (**unsafe**): Dynamo keeps "
               "an assert on a tensor in the graph as `torch._assert_async`, so eager raises the same "
               "`AssertionError` but a failing check under compile raises `RuntimeError` (asynchronously on "
               "CUDA), and the comparison runs in the tensor's dtype (exact for integer and bool tensors). "
               "Declined there for `not`, `and`/`or`, chained comparisons and formatted messages (Dynamo "
               "breaks on them). Otherwise **unsafe**: "
               "`@torch._dynamo.config.patch(capture_scalar_outputs=True)` on that function only, when it is "
               "compiled itself (`@torch.compile`; inside a compiled region the patch is a break of its own). "
               "Branching on `.item()` is repaired by the MND201 fix on the tensor."),
    "MND302": ("sometimes", "unsafe", "keep the 0-d tensor instead of float(t)",
               "`float(t)` in tensor arithmetic becomes `t` (**unsafe**: a 0-d tensor promotes "
               "differently from a Python float when an integer tensor meets a float). Otherwise the "
               "scalar-capture decorator (**unsafe**)."),
    "MND303": ("sometimes", "safe", "len(t.tolist()) -> t.shape[0]",
               "`len(t.tolist())` becomes `t.shape[0]` (**safe**, exact). Other uses: the "
               "scalar-capture decorator (**unsafe**; helps integer tensors only)."),
    "MND304": ("sometimes", "unsafe", "enable dynamic-output capture for the function",
               "Adds `@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)` to the "
               "enclosing function only (**unsafe**: a private Dynamo config, data-dependent shapes in "
               "the graph). Only for a function compiled itself (`@torch.compile`): inside a compiled "
               "region Dynamo meets the patch as a context manager and breaks there (measured on torch "
               "2.13), so the fix declines elsewhere and says to set the flag before `torch.compile`."),
    "MND305": ("sometimes", "safe", "masked reduction -> static-shape torch.where form",
               "`t[mask].sum()`/`.mean()` (elementwise methods in between allowed) become "
               "`_mend_masked_sum(t, mask)`/`_mend_masked_mean(t, mask)`, helpers added to the file "
               "(**safe**: equal up to floating-point reduction order, checked with allclose). Other "
               "mask uses: dynamic-output capture for the function (**unsafe**)."),
    "MND401": ("sometimes", "unsafe", "int/float attribute -> registered buffer updated in place",
               "`self.step = 0` in `__init__` becomes a non-persistent buffer (`torch.tensor(0)`), "
               "`self.step += 1` stays (in place), `min`/`max` around its value become `torch.clamp`. "
               "**Unsafe**: the attribute is a tensor for code outside the class. Declines when the value "
               "reaches control flow, another call, a return, or is rebound with `=`."),
    "MND402": ("sometimes", "unsafe", "compile with dynamic=True",
               "When the compiled object is defined in the same file (`name = torch.compile(target, ...)` "
               "or an `@torch.compile` decorator) without `dynamic=`, `dynamic=True` is added there "
               "(`@torch.compile` becomes `@torch.compile(dynamic=True)`): Dynamo traces the ints/floats "
               "symbolically from the first compile, so new values do not recompile (tensor sizes 0 and 1 "
               "are still specialized; an argument switching between int and float still recompiles). "
               "**Unsafe**: outputs are unchanged, but dynamic shapes apply to every input "
               "and can change performance or, rarely, raise where static tracing did not. Declines when "
               "`dynamic=` or `**options` is already given, the name is compiled in more than one place, "
               "or the definition is not in the file; then pass the number as a 0-d tensor "
               "(`torch.tensor(n)`)."),
    "MND403": ("sometimes", "safe", "hoist torch.compile out of the loop",
               "`name = torch.compile(expr)` directly in a loop body is moved before the loop when its "
               "arguments are not rebound in the loop (**safe**: the same object, compiled once)."),
}


def fix_info(code: str) -> FixInfo | None:
    """Fix metadata for a rule code, or None when mend has no fix for it."""
    entry = _INFO.get(code)
    if entry is None:
        return None
    availability, applicability, summary, doc = entry
    return FixInfo(code, availability, applicability, summary, doc)


def codes_with_fixes() -> list[str]:
    return sorted(_INFO)


__all__ = ["FixInfo", "codes_with_fixes", "fix_info"]
