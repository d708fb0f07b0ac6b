"""MND3xx: tensor values turned into Python numbers, and operators with data-dependent shapes."""

from __future__ import annotations

import ast

from mend.analyzers.static import tensors as tk
from mend.analyzers.static.rules.base import FixInfo, Rule, checker, register
from mend.analyzers.static.rules.context import Context
from mend.analyzers.static.torch_facts import TENSOR_CHECKS

_HDR = "import torch\nfrom torch import nn\n"

# The fallback repair of MND301-MND305 (and MND310/MND311): capture for one site (rewriter/parts/capture.py).
SCOPED_CAPTURE = (
    "On a function compiled itself (`@torch.compile`) the fallback is `@torch._dynamo.config.patch(<flag>=True)` "
    "above its decorator; anywhere else the site's expression `E` becomes `_mend_captured(lambda: E)`, a "
    "helper function (`mend.rewriter.helpers`): eager calls `E` and nothing else; under compile Dynamo captures the numbers "
    "and data-dependent sizes of `E` as symbols, for that expression only (the traced frame's ShapeEnv "
    "settings and `patch_dynamo_config`, set while tracing and restored after it; the global config is "
    "never changed) (**unsafe**: no guard on the captured values; a failing `assert` on a captured number "
    "raises `RuntimeError`; Dynamo can fail to compile a slice by the number of an empty tensor). Declined "
    "where the captured value would leave tensor operations in the function (a branch, comparison or loop "
    "on it, a call of Python code, a returned number, an index into a Python list, `torch.arange`/"
    "`linspace`/`logspace` bounds, `F.interpolate`, `F.pad`, `view`/`reshape` sizes, `.tolist()` of a "
    "tensor of data-dependent length, a comprehension's iterable, tensors of data-dependent lengths collected "
    "in a list that goes anywhere but `torch.cat` along that length, `len` or a return: `pad_sequence` "
    "lines them up and the break moves there), where Dynamo would break again or fail to compile; in "
    "TorchScript functions. A stored slice (`out[a:b] = v`) gets `_mend_index(b)` around each bound instead (eager: `b` "
    "itself; under compile its captured number)."
)

register(
    Rule(
        "MND301", "tensor-item",
        "`.item()` in compiled code: Dynamo does not capture scalar outputs by default and breaks the graph",
        ("GB0124",), "break",
        what="Finds `t.item()` on tensors in traced code.",
        why="""
            With the default `capture_scalar_outputs=False`, Dynamo cannot represent the Python number
            `.item()` returns and breaks the graph (GB0124). `fullgraph=True` silently turns capture on,
            so this break does not show up there.
        """,
        use_instead="""
            Keep the value as a 0-d tensor (`loss / n.clamp(min=1)` instead of `/ max(n.item(), 1)`),
            or set `torch._dynamo.config.capture_scalar_outputs = True`.
        """,
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    n = x.sum().item()
                    return x / max(n, 1.0)
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    n = x.sum()
                    return x / n.clamp(min=1.0)
        """,),
        fix=FixInfo(
            "sometimes", "unsafe", "keep the 0-d tensor instead of .item()",
            "When every read of `n = t.sum().item()` runs only in eager (`if not is_torchdynamo_compiling() and "
            "n != m: raise ...`, Qwen2-VL's token count) and `t.sum()` is a full reduction of an expression "
            "that cannot raise, the statement becomes `n = t.sum().item() if not torch.compiler.is_compiling() "
            "else None` (**safe**: eager runs it as written; compiled code never reads `n`, and the skipped "
            "`.item()` could not have raised). When the number only feeds arithmetic with a tensor, `.item()` is dropped and `max(n, c)`/`min(n, "
            "c)` become `torch.clamp` (**unsafe**): the 0-d tensor keeps its dtype, so arithmetic on it rounds "
            "in that dtype (`n / 3` of a float16 sum rounds to float16, not in Python's double) and type "
            "promotion can change the result's dtype (a float number meeting an integer tensor, two 0-d "
            "tensors, `max(n, 1.5)` of an integer, which Python keeps an `int` when `n` is larger); values "
            "stay within that rounding. In an `assert` (`assert t.item() <op> n`, `assert "
            "t.item()`, plain-string message) the `.item()` is dropped (**unsafe**): Dynamo keeps an assert on "
            "a tensor in the graph as `torch._assert_async`, so eager raises the same `AssertionError` but a "
            "failing check under compile raises `RuntimeError` (asynchronously on CUDA), and the comparison "
            "runs in the tensor's dtype (exact for integer and bool tensors). Declined there for `not`, "
            "`and`/`or`, chained comparisons and formatted messages (Dynamo breaks on them). Otherwise "
            "scalar capture for the site. " + SCOPED_CAPTURE + " Branching on `.item()` is repaired by the MND201 fix "
            "on the tensor.",
            strategies=("item_assert", "eager_only_count", "validation_count", "branch_test", "keep_tensor",
                        "capture"),
        ),
    ),
    Rule(
        "MND302", "tensor-to-python-number",
        "tensor converted to a Python number in compiled code: `float`/`int`/`bool`/`math.*` need the value "
        "and break the graph",
        ("GB0124", "GB0170"), "break",
        what="""
            Finds `float(t)`, `int(t)`, `bool(t)`, `math.<fn>(t)` on tensors, `assert not t` (Python's
            `not` needs the truth value; `assert t` alone Dynamo keeps in the graph) and the tensor checks
            `torch._check_tensor_all(cond)` / `torch._check_tensor_all_with(E, cond)` in traced code.
        """,
        why="""
            These call `t.item()` under the hood (GB0124) or branch on the value (GB0170); a tensor check
            reads `cond._is_all_true().item()` to decide whether to raise.
        """,
        use_instead="""
            Stay in tensor land: `t.float()`, `t.to(torch.int64)`, `torch.sqrt(t)`; a tensor check where
            scalars are captured (`torch._dynamo.config.patch(capture_scalar_outputs=True)`).
        """,
        invalid=("import math\n" + _HDR + """
            class M(nn.Module):
                def forward(self, x):
                    scale = math.sqrt(x.var())
                    return x / scale
        """, _HDR + """
            class M(nn.Module):
                def forward(self, x, ids):
                    torch._check_tensor_all(ids >= 0)
                    return x[ids]
        """),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    scale = torch.sqrt(x.var())
                    return x / scale + float(x.shape[-1])
        """,),
        fix=FixInfo(
            "sometimes", "unsafe", "keep the 0-d tensor instead of float(t)",
            "`float(t)` in tensor arithmetic becomes `t` (**unsafe**: a 0-d tensor promotes differently from a "
            "Python float when an integer tensor meets a float). A tensor check (`torch._check_tensor_all(cond)`, "
            "transformers' `torch_compilable_check` under tracing): scalar capture for the site, under which "
            "Dynamo keeps the check in the graph as a runtime assert (**unsafe** as below: a failing check still "
            "raises under compile, but it may be Dynamo's `RuntimeError` of a failed runtime assertion (`u0 >= 1`) "
            "where the original raised its own error type and message; the value is read on the host, a device "
            "sync, as in the original). Declined when the message is a function reading names (Dynamo breaks on "
            "its closure). `assert not t` (`assert not torch.isnan(h).any()`, plain-string message or none) becomes "
            "`assert torch.logical_not(t)`, a tensor assert Dynamo keeps in the graph (**unsafe**: eager raises the "
            "same `AssertionError` with the same message, but under compile a failing check raises `RuntimeError` "
            "with the message, asynchronously on CUDA; the check runs inside the graph, so an error Dynamo meets "
            "while tracing the code after it surfaces first: the call raises either way). Otherwise `int(t)`/`float(t)`: scalar capture for the site. "
            + SCOPED_CAPTURE,
            strategies=("assert_not", "tensor_check", "branch_test", "keep_tensor", "capture"),
        ),
    ),
    Rule(
        "MND303", "tensor-tolist",
        "`.tolist()` in compiled code: Dynamo cannot turn tensor data into a Python list and breaks the graph",
        ("GB0109", "GB0033"), "break",
        what="Finds `t.tolist()` on tensors in traced code.",
        why="""
            A float tensor's `.tolist()` always breaks (GB0109, even with `capture_scalar_outputs`); an
            integer tensor's breaks by default (GB0033).
        """,
        use_instead="Use shapes (`t.shape[0]` rather than `len(t.tolist())`) or keep working on tensors.",
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    sizes = x.sum(-1).tolist()
                    return x * len(sizes)
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    return x * x.shape[0]
        """,),
        fix=FixInfo(
            "sometimes", "safe", "len(t.tolist()) -> _mend_tolist_len(t) (t.shape[0])",
            "`len(t.tolist())` becomes `_mend_tolist_len(t)`, a helper function: `t.shape[0]`, and "
            "the original `len(t.tolist())` for a 0-d `t`, whose list is a number (`TypeError` as before) "
            "(**safe**, exact: same results and exceptions, eager and compiled). A MoE router's per-expert counts "
            "(`expert_size = expert_size.tolist()`, returned, then `inputs.split(expert_size, dim=0)` and a "
            "`F.linear` per chunk in an experts module of the same file: JetMoE, GraniteMoE): under compile the "
            "router keeps the tensor and the experts run every expert on every row, each row taking its own "
            "expert's output by a gather (**unsafe**: equal within float tolerance, not bitwise; expert FLOPs "
            "grow by the number of experts); declined when the counts reach other code. Other uses: scalar "
            "capture for the site (it helps integer tensors only; a float tensor's list still breaks). "
            + SCOPED_CAPTURE,
            strategies=("tolist_len", "expert_split", "capture"),
        ),
    ),
    Rule(
        "MND304", "dynamic-shape-op",
        "operator with a data-dependent output shape in compiled code: Dynamo breaks the graph",
        ("GB0036",), "break",
        what="""
            Finds `nonzero`, `unique`, `unique_consecutive`, `masked_select`, `argwhere`, one-argument
            `torch.where(cond)`, `repeat_interleave` with tensor repeats (without `output_size`) and
            `F.one_hot` without `num_classes` in traced code.
        """,
        why="""
            Their output shape depends on the values, which Dynamo does not capture by default
            (`capture_dynamic_output_shape_ops=False`): the graph breaks (GB0036).
        """,
        use_instead="""
            Keep static shapes: count with `(t != 0).sum()`, select with `torch.where(mask, t, 0)`,
            or set `torch._dynamo.config.capture_dynamic_output_shape_ops = True`.
        """,
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    idx = torch.nonzero(x > 0)
                    return x.sum() + idx.shape[0]
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    count = (x > 0).sum()
                    return x.sum() + count
        """,),
        fix=FixInfo(
            "sometimes", "unsafe", "static-shape MoE routing, or dynamic-output capture for the site",
            "A mixture-of-experts routing loop (`for e in ...: idx, top_x = torch.where(mask[e]); ...; "
            "final.index_add_(0, top_x, ...)`, with the hit list `(...).nonzero(...).tolist()` before it) keeps "
            "its loop in eager and, under compile, runs every expert on every (slot, token) pair of the mask, "
            "the pairs not routed to it masked out of the sum with `torch.where` (**unsafe**: equal within float "
            "tolerance, not bitwise: more rows per matmul, `-0.0` can become `+0.0`; expert FLOPs grow by the "
            "number of experts; assumes experts treat rows independently). Declined when the indices are "
            "written through, read after the loop or used other than as read indices, the `index_add_` index "
            "or an emptiness test. Rows routed by runs of equal ids (X-MOD's adapters: `ids, counts = "
            "torch.unique_consecutive(ids, return_counts=True)`, `torch.split(h, counts.tolist(), 0)`, a loop "
            "applying `self.d[list(self.d.keys())[int(id.item())]]` to each chunk, `torch.cat` of the outputs) "
            "keep the routing in eager; under compile the ids stay one per row and every module of the dict "
            "runs on every row, each row taking its own id's output (`_mend_grouped_rows`; **unsafe**: within "
            "float tolerance, module FLOPs x number of modules, modules must treat rows independently; "
            "declined where the runs, counts, chunks or outputs are read elsewhere). Other sites: "
            "dynamic-output capture for the site. " + SCOPED_CAPTURE,
            strategies=("expert_loop", "grouped_rows", "mask_store", "capture"),
        ),
    ),
    Rule(
        "MND305", "boolean-mask-indexing",
        "boolean-mask indexing `t[mask]` in compiled code: the result's shape depends on the data and the "
        "graph breaks",
        ("GB0036",), "break",
        what="""
            Finds reads `t[mask]` where `mask` is a boolean tensor (a comparison of tensors, `isnan`,
            `.bool()`, `~mask`, or a tensor parameter whose name contains `mask`), also the read of an
            augmented store `t[mask] += v`. Writes such as `t[mask] = 0` are traced and not reported.
        """,
        why="Indexing with a boolean mask runs `nonzero` under the hood: dynamic output shape (GB0036).",
        use_instead="`torch.where(mask, t, 0).sum() / mask.sum()` or `(t * mask).sum()` keep static shapes.",
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    return x[x > 0].mean()
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    m = x > 0
                    x[m] = 0
                    return torch.where(m, x, 0).sum()
        """,),
        fix=FixInfo(
            "sometimes", "safe", "masked reduction -> static-shape torch.where form",
            "`t[mask].sum()`/`.mean()` (elementwise methods in between allowed) become `_mend_masked_sum(t, "
            "mask)`/`_mend_masked_mean(t, mask)`, helper functions (**safe**): eager runs the "
            "original expression (same bits, same exceptions); under compile a static-shape `torch.where` "
            "sum, equal up to floating-point reduction order (a float16 mean rounds its sum before dividing), "
            "and a dtype `mean()` rejects (integers, bool) runs the original, which raises as in eager. A routed "
            "store `t[mask] = expert(x[mask])` (Switch-style MoE; `.to(...)` after the call allowed): eager "
            "keeps it; under compile `_mend_routed_store(t, mask, expert(x))` runs the module on every row and "
            "stores the selected rows with `torch.where` (**unsafe**: within float tolerance, expert FLOPs on "
            "every row, assumes the module treats rows independently; declined for a `torch`/builtin function). "
            "An augmented store `t[mask] += v` (`-=`, `*=`, `/=`, `v` a number literal) becomes "
            "`_mend_mask_update(t, \"+\", mask, v)` (**safe**): eager runs the original statement; under compile, "
            "for a boolean mask of `t`'s leading dimensions and a dtype the in-place op accepts for any value, the "
            "same in-place op on a copy of every element stored with `t.copy_(torch.where(mask, ...))` (in place: "
            "aliases see it), else the original; declined for a tensor `v` (it broadcasts against `t[mask]`). "
            "Other mask uses: dynamic-output capture for the site. " + SCOPED_CAPTURE,
            strategies=("masked_reduction", "routed_store", "mask_update", "capture"),
        ),
    ),
)

DYNAMIC_SHAPE_TORCH = frozenset(
    f"torch.{n}" for n in ("nonzero", "unique", "unique_consecutive", "masked_select", "argwhere", "nonzero_static")
)
DYNAMIC_SHAPE_METHODS = frozenset({"nonzero", "unique", "unique_consecutive", "masked_select", "argwhere"})


# Dynamo config flags under which these patterns are captured in the graph (no break): switched on at
# module level or by `@torch._dynamo.config.patch(...)` above `@torch.compile` (verified in the fixtures).
CAPTURE_SCALARS = "capture_scalar_outputs"
CAPTURE_DYNAMIC = "capture_dynamic_output_shape_ops"
NUMBER_MESSAGE = "in compiled code: converting a tensor to a Python number needs its value and breaks the graph"
CHECK_MESSAGE = "in compiled code: the check reads the tensor's values as a Python bool and breaks the graph"


REPEAT_MESSAGE = ("`repeat_interleave` with tensor repeats in compiled code: its output shape depends on the data "
                  "and the graph breaks")


def _tensor_repeats(ctx: Context, call: ast.Call, index: int) -> bool:
    """``repeat_interleave``'s repeats (positional ``index``, or ``repeats=``) are a tensor and no
    ``output_size`` fixes the result's length; ``torch.repeat_interleave(counts)`` alone repeats by
    the tensor's own values."""
    if any(k.arg == "output_size" for k in call.keywords):
        return False
    repeats = call.args[index] if len(call.args) > index else next(
        (k.value for k in call.keywords if k.arg == "repeats"), None)
    if repeats is None and index == 1 and len(call.args) == 1:
        repeats = call.args[0]
    return repeats is not None and ctx.kind(repeats) == tk.T


@checker("call")
def scalar_calls(ctx: Context, call: ast.Call) -> None:
    q = ctx.qualify(call.func)
    if q is not None:
        _function_call(ctx, call, q)
    elif isinstance(call.func, ast.Attribute) and ctx.kind(call.func.value) in (tk.T, tk.M):
        _method_call(ctx, call, call.func.attr)


def _num_classes(call: ast.Call) -> bool:
    """``F.one_hot(x, n)`` names its number of classes (not the default -1, which reads it from the data)."""
    given = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "num_classes"),
                                                          None)
    return given is not None and not (isinstance(given, ast.UnaryOp) and isinstance(given.op, ast.USub))


# reductions whose result, of a tensor, is a 0-d tensor that int()/float() read
_REDUCTIONS = frozenset({"max", "min", "sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "norm"})


def _reduced_maybe_tensor(ctx: Context, e: ast.AST) -> bool:
    """``x.max()`` (a reduction, no arguments) of a maybe-tensor ``x`` (what a helper of the project returned
    for tensor arguments: torch_geometric's ``int(scatter(...).max())``)."""
    return (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _REDUCTIONS
            and not e.args and not e.keywords and ctx.kind(e.func.value) == tk.M)


def _function_call(ctx: Context, call: ast.Call, q: str) -> None:
    scalars = CAPTURE_SCALARS in ctx.config_flags
    dynamic = CAPTURE_DYNAMIC in ctx.config_flags
    if q in ("builtins.float", "builtins.int", "builtins.bool") and call.args and (
            ctx.kind(call.args[0]) == tk.T or _reduced_maybe_tensor(ctx, call.args[0])):
        if not scalars or q == "builtins.bool":  # `bool(t)` branches on the value: captured or not
            ctx.report("MND302", call, f"`{q[9:]}(tensor)` {NUMBER_MESSAGE}")
    elif q == "torch.nn.functional.one_hot" and not _num_classes(call):
        if not dynamic:
            ctx.report("MND304", call, "`F.one_hot` without `num_classes` in compiled code: its output size is the "
                                       "largest index plus one, read from the data, and the graph breaks")
    elif q in TENSOR_CHECKS:
        if not scalars:
            ctx.report("MND302", call, f"`{q}(...)` {CHECK_MESSAGE}")
    elif q.startswith("math.") and any(ctx.kind(a) == tk.T for a in call.args):
        if not scalars:
            ctx.report("MND302", call, f"`{q}(tensor)` {NUMBER_MESSAGE}")
    elif q in DYNAMIC_SHAPE_TORCH and q != "torch.nonzero_static":
        if not dynamic:
            ctx.report("MND304", call, f"`{q}` in compiled code: its output shape depends on the data and the graph "
                                       "breaks")
    elif q == "torch.where" and len(call.args) == 1 and not call.keywords:
        if not dynamic:
            ctx.report("MND304", call, "one-argument `torch.where(cond)` in compiled code: its output shape "
                                       "depends on the data and the graph breaks")
    elif q == "torch.repeat_interleave" and not dynamic and _tensor_repeats(ctx, call, 1):
        ctx.report("MND304", call, REPEAT_MESSAGE)


def _method_call(ctx: Context, call: ast.Call, method: str) -> None:
    if method == "item" and not call.args:
        if CAPTURE_SCALARS not in ctx.config_flags:
            ctx.report("MND301", call)
    elif method == "tolist" and not call.args:
        if CAPTURE_SCALARS not in ctx.config_flags:  # captured there when the tensor holds integers
            ctx.report("MND303", call)
    elif method == "repeat_interleave" and _tensor_repeats(ctx, call, 0):
        if CAPTURE_DYNAMIC not in ctx.config_flags:
            ctx.report("MND304", call, REPEAT_MESSAGE)
    elif method in DYNAMIC_SHAPE_METHODS:
        if CAPTURE_DYNAMIC not in ctx.config_flags:
            ctx.report("MND304", call, f"`.{method}()` in compiled code: its output shape depends on the data and "
                                       "the graph breaks")


@checker("assert")
def assert_not_tensor(ctx: Context, node: ast.Assert) -> None:
    """``assert not t``: ``not`` asks the tensor for its truth value (a break); ``assert t`` alone is kept in the
    graph by Dynamo (``torch._assert_async``) and is not reported."""
    test = node.test
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and ctx.kind(test.operand) == tk.T:
        ctx.report("MND302", test, "`assert not <tensor>` in compiled code: `not` needs the tensor's truth value "
                                   "as a Python bool and breaks the graph")


@checker("augassign")
def boolean_mask_update(ctx: Context, node: ast.AugAssign) -> None:
    """``t[mask] += v``: Python reads ``t[mask]`` (a data-dependent shape), updates it, and stores it back."""
    if isinstance(node.target, ast.Subscript):
        boolean_mask(ctx, node.target, "augmented store through a boolean mask `t[mask] += v`: Python reads "
                                       "`t[mask]` first, whose shape depends on the data, and the graph breaks")


@checker("subscript")
def boolean_mask(ctx: Context, node: ast.Subscript, message: str | None = None) -> None:
    if ctx.kind(node.value) not in (tk.T, tk.M) or CAPTURE_DYNAMIC in ctx.config_flags:
        return
    idx = node.slice
    elts = idx.elts if isinstance(idx, ast.Tuple) else [idx]
    if any(ctx.is_bool_tensor(e) for e in elts):
        ctx.report("MND305", node, message)
