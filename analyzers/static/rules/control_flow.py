"""MND2xx: Python control flow that depends on tensor values."""

from __future__ import annotations

import ast
import re

from mend.analyzers.static import tensors as tk
from mend.analyzers.static.rules.base import RULES, FixInfo, Rule, checker, register
from mend.analyzers.static.rules.context import Context

_HDR = "import torch\nfrom torch import nn\n"

register(
    Rule(
        "MND201", "data-dependent-if",
        "`if` on a tensor value: Dynamo cannot trace data-dependent branching and breaks the graph",
        ("GB0170",), "break",
        what="""
            Finds `if` statements, conditional expressions and comprehension filters whose condition is a
            tensor value (`if x.sum() > 0:`, `if mask.any():`, also through locals: `n = x.sum(); if n > 0:`;
            `[b for b, drop in zip(blocks, to_drop) if not drop]` with `to_drop` a tensor).
            Conditions on shapes, dtypes, `None`, `self.training` or `isinstance` are static and are
            not reported. A tensor condition behind a dtype test in an `and` chain (the fp16 overflow
            guard of BART-family layers, `if h.dtype == torch.float16 and torch.isinf(h).any():`) is
            evaluated, and breaks, only for that dtype, which the analyzer cannot see: it is reported
            with the dtype test ("only when ..."). Behind `self.training` (M2M100's and wav2vec2's
            LayerDrop, `skip = True if self.training and (u < self.layerdrop) else False`) it is
            reported for training ("only when `self.training`"), as inside `if self.training:`; behind
            a grad-mode test or the LayerDrop guard `p > 0` that `mend fix` writes it is not reported.
            A comparison of a number drawn by `random.uniform`, `randint` or `randrange` counts as a
            tensor test: Dynamo traces those draws as inputs of the graph, so branching on one breaks it.
        """,
        why="""
            The branch taken depends on data Dynamo does not know at trace time, so it ends the graph
            at the condition and resumes in Python (GB0170).
        """,
        use_instead="""
            Compute both sides and select with `torch.where(cond, a, b)`, or use
            `torch.cond(pred, true_fn, false_fn, operands)`. For guards like `if torch.isinf(h).any():
            h = h.clamp(...)`, apply the transform unconditionally (clamp, `nan_to_num`).
        """,
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        x = x * 2
                    return x
        """, _HDR + """
            class M(nn.Module):
                def forward(self, x):
                    n = x.abs().amax()
                    y = x / n if n > 1 else x
                    return y
        """),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x, mask=None):
                    if mask is not None and x.dim() == 3 and x.shape[0] > 1:
                        x = x * mask
                    if self.training or x.dtype == torch.float16 or isinstance(x, tuple):
                        x = x.float()
                    return torch.where(x.sum() > 0, x * 2, x)
        """,),
        fix=FixInfo(
            "sometimes", "safe", "data-dependent if -> torch.where",
            "LayerDrop in training (`u = torch.rand([])` then `if u < self.layerdrop:`, BART's and Whisper's "
            "encoder and decoder loops) becomes `if self.layerdrop > 0 and u < self.layerdrop:`, and the same "
            "test behind `self.training and` in an `if` or a conditional expression (M2M100's and wav2vec2's "
            "`skip_the_layer = True if self.training and (u < p) else False`) becomes `self.training and p > 0 "
            "and (u < p)` (**safe**: a "
            "`torch.rand` draw is never below a bound <= 0, the draw is kept, so values and the RNG stream are "
            "the original's; the draw becomes `_mend_drawn(torch.rand([]))`, which an ordered effect reads under "
            "compile, so a graph that no longer reads it still draws it); with `layerdrop=0.0` Dynamo decides the test on the attribute and the break is "
            "gone, with `layerdrop > 0` it stays (the test then runs only in that configuration and is no "
            "longer reported, like one behind `self.training`). With `--unsafe-fixes` that break goes too, for the loops of "
            "transformers' encoders and decoders (`if u < p: continue`; `if u < p: to_drop = True` then `if to_drop: "
            "... else: <layer>`; `skip = True if self.training and (u < p) else False` then `if not skip: <layer>`): "
            "eager keeps the decision (`if not torch.compiler.is_compiling() or <flags>:`), and under compile the "
            "layer always runs, each call of it becoming `_mend_layer_drop(drop, h, layer, h, ...)`, whose first "
            "output is `torch.where(drop, h, output)` (**unsafe**, under compile only: the dropped layer is computed, "
            "its own random draws taken, its parameters get zero gradients instead of None, state it writes when "
            "it runs, a cache in training with `use_cache`, is written; flags under which the layer's other outputs "
            "are read after it, `output_attentions`, `use_cache`, `synced_gpus`, keep the original test, so the "
            "collected tuples are the original's). Declined where the skipped statements do more than call the "
            "layer and take its first output (Informer's distilling convolution changes the length). "
            "Matched only for a one-element `torch.rand` "
            "draw (or Python's `random.uniform(0, 1)`, MusicGen's, which Dynamo draws before the graph whether it reads "
            "it or not) bound once just before the statement, a strict `u < p` / `p > u` (alone, or last in an `and` chain "
            "of `self.` attributes), and `p` proven a number "
            "(`self.X` assigned only number literals, number parameters or `config.` attributes; "
            "`self.config.X` where `self.config` is only ever the `config` parameter). "
            "An `if <tensor cond>:` whose body only reports (print, logger calls, `warnings.warn`) is guarded "
            "as a whole with `if not torch.compiler.is_compiling():` under the `guard` side-effect policy "
            "(**safe** when the condition has no side effects: eager unchanged; under compile the report does "
            "not run and the condition is only computed and checked by `_mend_truth`, so that it raises where "
            "eager raises; declined when a later `and`/`or` operand could raise, or the condition indexes by "
            "tensor values). Otherwise **eager keeps the original branch**: the repair is `if not "
            "torch.compiler.is_compiling(): <the original if> else: <the predicated form>`, so eager results, "
            "exceptions and output are the original code's, whatever the fix class. Under compile, conditions "
            "are computed first (`.item()` and `float()` become `.double()`, which compares like the Python "
            "number), and each assignment becomes `x = _mend_where(cond, new, x)` (elif chains in order, "
            "`return` branches as one `return _mend_where(...)`, a name new in the chain and assigned in every "
            "branch of a complete chain takes its first value plainly); a static prefix of an `and` chain "
            "stays a Python test. `_mend_where`, a helper function (`mend.rewriter.helpers`), is "
            "`torch.where` when both sides are tensors of one shape, dtype and device and the condition has "
            "one element, all decided while tracing, and the original selection otherwise (a graph break "
            "there, never another value). Declined when a side can change shape (`torch.cat`, `reshape`, "
            "indexing, ...): torch.where cannot select between such sides; except a broadcast update "
            "`h = h * mask[:, None]` (also `+ - /`, maybe cast with `.to(...)`), where only the other operand "
            "is reshaped: the result has `h`'s shape or `_mend_where` falls back, and the fix is **unsafe**. "
            "A name assigned a dtype or device read (`dtype = h.dtype`) becomes `_mend_same(cond, new, old)`: "
            "the old value when the new one is the same object (decided while tracing), else the original "
            "selection. Both sides ending in `X.register_buffer(\"b\", A)` / `(\"b\", B)` (LongRoPE's "
            "frequencies) register `_mend_where(cond, A, B)` once under compile, after both sides' "
            "preparations (`if not hasattr(X, \"a\"): X.a = ...`, `X.a = X.a.to(...)`); **unsafe**: the buffer "
            "holds a copy of the selected tensor, and the lazily created attribute exists after any call. "
            "A dtype test before the tensor test (`h.dtype == torch.float16 and ...`, the fp16 overflow guard) "
            "stays a Python test, so other dtypes trace as before. Under compile the side not taken is "
            "computed too: **safe** when every such expression cannot raise for any values, shapes and real "
            "dtypes (elementwise ops with Python-number operands, reductions that accept empty tensors, "
            "`torch.finfo` of a dtype the code tested to be floating); otherwise **unsafe** (broadcasting "
            "between two tensors, `torch.finfo(x.dtype)` of an untested dtype, `max()` of an empty tensor can "
            "fail while tracing where the original never computed them). When a gradient could be infinite on "
            "the unselected side, the original branch also runs when `torch.is_grad_enabled()`. A plain "
            "`if`/`else` whose assignments call submodules (`self.m(...)`) becomes `torch.cond` under compile: "
            "each branch is a local function closing over its inputs and returning the names read after the "
            "`if`; eager keeps the original `if` behind `torch.compiler.is_compiling()`. **Unsafe**: both "
            "branches must give the same dtypes and shapes (a mismatch fails at compile time), outputs that alias an "
            "input fail to trace (bare names are cloned), and parameters of the branch not taken get zero "
            "gradients instead of None (optimizers with momentum or weight decay then update them). Declines: "
            "calls other than torch/F./tensor methods/submodules, a selected name updated in place after the "
            "`if` (also through a view or another name for it: under compile the selection is a new tensor "
            "where the original kept the old one), nested statements (the inner `if` is "
            "repaired first), tuple or attribute targets, `x += ...`, `global` names, a name first defined in "
            "only some branches, a branch that reads a name before assigning it, non-tensor values, `elif` "
            "chains or `return` with submodule calls, `torch.equal` conditions. A condition that reads numbers "
            "from a tensor the file builds from Python numbers (`cache_position = torch.arange(past, past + n)` "
            "then `if cache_position[0] > 0:`, directly or through a name, a parameter or a `self.` attribute "
            "the number is passed to) is repaired first by keeping a Python copy beside the tensor and reading "
            "it (MND310's repair; **unsafe**). A branch whose only statement sets a mask to None when the "
            "mask is all ones (`if not torch.any(~patch_mask): patch_mask = None`, Mamba's `mamba_mask = "
            "attention_mask; if ... or torch.all(attention_mask == 1): mamba_mask = None`), a fast path for a "
            "mask that masks nothing, keeps the mask under compile: its all-ones test becomes `not "
            "torch.compiler.is_compiling() and <test>` (eager evaluates the original test, the other operands "
            "still decide under compile). **Unsafe**: under compile a mask of ones is applied (an attention "
            "bias of zeros, a product with ones) where eager skips it, and a kernel chosen for a masked call "
            "can round differently; it relies on the meaning the code's own test gives the mask. Matched only "
            "where the tested name says it is a mask, the test is not under `not`, and the name set to None "
            "is the mask or a copy made just before the `if`. An `if` at the top of a function body that only "
            "reports and returns another implementation's result (`if mask is not None and (mask.mean(...) <= "
            "finfo.min).any(): logger.warning_once(...); return super().forward(...)`, musicgen's SDPA "
            "attention falling back to the written-out one), in a function whose one other `return` is its "
            "last statement, when no repair of the branch itself applies: under compile with gradients off "
            "the test's tensor part and the fallback's result are computed where the `if` stood, the rest runs "
            "as written, and its `return` becomes `_mend_where(taken, fallback, own)`, tensor by tensor "
            "through tuples (**unsafe**: both implementations run, the branch's report is not made under "
            "compile, an error the rest raises where eager took the fallback surfaces, and both must leave "
            "state the other reads alone; the selected values are eager's bits either way, no agreement of the "
            "two is assumed; with gradients on the original branch runs). An `if` with no `else` whose one "
            "statement stores into a tensor at an index of numbers and slices (`if not any(real_images_inds): "
            "real_images_inds[0] = True`, smolvlm keeping one image) stores on every path under compile with "
            "gradients off: `t[i] = _mend_where(cond, value, t[i])`, a number literal as `torch.full_like(t[i], "
            "v)` (cast as the store casts it); a number stored through one bool mask (`if durations.sum() == 0: "
            "durations[durations.sum(dim=1).eq(0)] = 1`, fastspeech2) is stored through `_mend_mask_if(cond, "
            "mask)`, the mask's elements where the test holds and none where it fails; `any(t)`/`all(t)` become `_mend_any(t)`, `torch.any`/`torch.all` "
            "of a 1-D tensor and Python's own otherwise (**unsafe**: the value, the test and the element are "
            "computed on both paths and can raise where the original skipped the store, and the tensor is "
            "written with its own numbers where the original left it alone; the stored numbers are eager's).",
            strategies=("layerdrop_select", "layerdrop_guard", "kept_values", "ifexp_where", "reporting_if", "buffer_select", "mask_drop", "store_select",
                        "cond_branches", "where_select", "fallback_select"),
        ),
    ),
    Rule(
        "MND202", "data-dependent-while",
        "`while` on a tensor value: Dynamo cannot trace a data-dependent loop and breaks the graph",
        ("GB0170",), "break",
        what="Finds `while` loops whose condition is a tensor value.",
        why="Each evaluation of the condition is data-dependent branching: the graph breaks (GB0170), once per "
            "re-entry of the loop.",
        use_instead="Use `torch._higher_order_ops.while_loop(cond_fn, body_fn, operands)` or a fixed trip count.",
        no_fix="data-dependent `while` loops need torch._higher_order_ops.while_loop; not rewritten automatically",
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    while x.abs().sum() > 1:
                        x = x / 2
                    return x
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    i = 0
                    while i < x.shape[0]:
                        i += 1
                    return x
        """,),
    ),
    Rule(
        "MND203", "data-dependent-validation-raise",
        "validation `raise` under a tensor condition: Dynamo cannot trace the data-dependent check and breaks "
        "the graph",
        ("GB0170",), "break",
        what="""
            Finds input validation of the form `if <tensor condition>: raise ...` (including
            `if not torch.equal(a, b): raise ...`) in traced code.
        """,
        why="""
            The check needs the tensor's values, so Dynamo breaks the graph at the condition (GB0170)
            on every call, even though the error path is never taken in practice.
        """,
        use_instead="""
            Validate outside the compiled region, or use `torch._check(...)`-style asserts that the
            compiler can keep in the graph, or drop the check under compile:
            `if not torch.compiler.is_compiling() and (mask.sum(-1) == 0).any(): raise ...`.
        """,
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x, mask):
                    if (mask.sum(-1) == 0).any():
                        raise ValueError("empty row")
                    return x * mask
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x, mask):
                    if x.dim() != 3:
                        raise ValueError("expected 3-d input")
                    return x * mask
        """,),
        fix=FixInfo(
            "sometimes", "unsafe", "validation guard -> torch._assert_async with the exception restored",
            "Eager keeps the original `if ...: raise E(msg)` (behind `if not torch.compiler.is_compiling():`); "
            "compiled code runs `torch._assert_async(torch.logical_not(cond), '[mend:E] msg')` in the graph, "
            "and each `torch.compile` boundary in the file is wrapped with `_mend_restore_exceptions`, which "
            "re-raises `E(msg)`. **Unsafe**: the check becomes asynchronous on CUDA, and where the compile "
            "boundary is outside the repaired tree (e.g. a repaired library compiled by the user's script) it "
            "surfaces as `RuntimeError('[mend:E] msg')` unless the caller wraps its compiled object with "
            "`mend.rewriter.runtime.restore_exceptions`. An f-string message keeps its literal parts, each "
            "value written as its source (`f\"tokens: {n}\"` -> `tokens: {n}`): the values are not known "
            "inside the graph. The check runs inside the graph, so where the code after it also fails, an error "
            "Dynamo meets while tracing that code can surface first (the call raises either way). A count "
            "read only by such a check (`n = (ids == k).sum().item(); if n != m: raise ...`) is repaired with "
            "it (MND301): compiled code checks the count as a tensor and computes `n` only in eager. "
            "Declines: an operand Python skips when the check passes (`b` of `a and b`) that can raise (the "
            "graph computes it always; `b` of `a or b` is skipped only where the check fires anyway), "
            "non-builtin exceptions, messages built with `%` or `.format()`, "
            "`raise ... from`, guards inside `try`.",
            strategies=("assert_async",),
        ),
    ),
)


def _raises(body: list[ast.stmt]) -> bool:
    return any(isinstance(s, ast.Raise) for s in body) and all(
        isinstance(s, (ast.Raise, ast.Expr, ast.Assign, ast.Pass)) for s in body)


def _dtype_mode(mode: str | None) -> bool:
    """The mode test of an ``and`` prefix tests a dtype (``x.dtype == torch.float16``,
    ``x.is_floating_point()``): a property of the inputs, not a mode the program is put in."""
    return mode is not None and (".dtype" in mode or "is_floating_point" in mode or "is_complex" in mode)


def _training_mode(mode: str | None) -> bool:
    """The mode test is ``self.training`` (or its negation): train vs eval, the mode a training loop
    compiles in."""
    return mode is not None and re.search(r"\.training\b", mode) is not None


def _training(mode: str | None) -> bool | None:
    """True for a test that holds in training (``self.training``, ``self.training is True``), False for
    one that holds in eval (``not self.training``, ``self.training is False``), else None."""
    if not _training_mode(mode):
        return None
    try:
        e = ast.parse(mode, mode="eval").body
    except SyntaxError:
        return None
    holds = True
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        holds, e = False, e.operand
    if isinstance(e, ast.Compare) and isinstance(e.comparators[0], ast.Constant):
        same = isinstance(e.ops[0], (ast.Is, ast.Eq)) == bool(e.comparators[0].value)
        holds, e = holds == same, e.left
    return holds if isinstance(e, ast.Attribute) and e.attr == "training" else None


def _report_test(ctx: Context, code: str, test: ast.AST, message: str | None = None) -> None:
    """Report the tensor test ``test``. Behind a dtype or ``self.training`` test in an ``and`` chain it
    breaks only in that mode, and says so; behind another mode (grad mode, an attention implementation,
    the LayerDrop guard ``p > 0`` that ``mend fix`` writes) it is not reported, nor behind the mode in
    which its names are not tensors (``self.training is False and i >= n`` with ``n`` a tensor only in
    training)."""
    mode = ctx.mode_prefixed(test)
    if mode is not None and not (_dtype_mode(mode) or _training_mode(mode)):
        return
    prefix, names = _training(mode), _training(ctx.name_mode(test))
    if prefix is not None and names is not None and prefix != names:
        return
    message = message or RULES[code].summary
    if mode is None:
        ctx.report(code, test, message)
    else:
        ctx.report(code, test, f"{message} (only when `{mode}`)", mode=mode)


def _drawn(ctx: Context, test: ast.AST, what: str) -> str | None:
    """The message for a test on a Python draw Dynamo traces (``random.uniform(0, 1) < p``); else None."""
    draw = ctx.python_draw(test)
    if draw is None:
        return None
    return (f"{what} on a number drawn by `{draw}()`: Dynamo passes the draw into the graph as an input, so "
            "the branch is data-dependent and breaks the graph")


@checker("if")
def data_dependent_if(ctx: Context, node: ast.If) -> None:
    if ctx.kind(node.test) == tk.T:
        _report_test(ctx, "MND203" if _raises(node.body) else "MND201", node.test, _drawn(ctx, node.test, "`if`"))


@checker("ifexp")
def data_dependent_ifexp(ctx: Context, node: ast.IfExp) -> None:
    if ctx.kind(node.test) == tk.T:
        _report_test(ctx, "MND201", node.test, _drawn(ctx, node.test, "conditional expression") or (
            "conditional expression on a tensor value: Dynamo cannot trace data-dependent branching and breaks "
            "the graph"))


@checker("compfilter")
def data_dependent_filter(ctx: Context, test: ast.AST) -> None:
    """``[b for b, drop in zip(blocks, to_drop) if not drop]``: the filter decides in Python, per element."""
    if ctx.kind(test) == tk.T:
        _report_test(ctx, "MND201", test, "comprehension filter on a tensor value: Dynamo cannot trace "
                                          "data-dependent branching and breaks the graph")


@checker("while")
def data_dependent_while(ctx: Context, node: ast.While) -> None:
    if ctx.kind(node.test) == tk.T:
        _report_test(ctx, "MND202", node.test)
