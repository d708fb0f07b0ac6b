"""MND310-MND329: a tensor (or a numpy value, which Dynamo traces as one) used where Python needs a number
(a size, a bound, a slice, a range).

Dynamo keeps a tensor's values out of the Python it traces. A 0-d tensor (``n = mask.sum()``,
``seq_len = torch.max(position_ids) + 1``, a row of a ``spatial_shapes`` tensor in a loop) handed to an
argument that must be a Python ``int``/``float`` makes it ask for the value: the graph breaks there.
These rules read the tensor kinds of :mod:`mend.analyzers.static.tensors`; only certain tensors
(``T``) count, never maybe-tensors or numbers already taken out with ``.item()``.
"""

from __future__ import annotations

import ast

from mend.analyzers.static import tensors as tk
from mend.analyzers.static.rules.base import FixInfo, Rule, checker, register
from mend.analyzers.static.rules.context import Context
from mend.analyzers.static.rules.scalars import CAPTURE_SCALARS, SCOPED_CAPTURE
from mend.analyzers.static.torch_facts import NUMPY_SHAPED

_HDR = "import torch\nfrom torch import nn\n"

# MND310 and MND311 share one repair: integer buffers folded (rewriter/strategies/int_buffers.py), a shape
# tensor's Python copy kept (rewriter/strategies/kept_values.py), a method of Python values folded to constants
# (rewriter/strategies/constant_method.py), else capture
_SIZE_FIX = FixInfo(
    "sometimes", "unsafe",
    "fold a module's integer buffers to Python numbers under compile, read a shape tensor's kept Python copy, fold "
    "a method of Python values to constants, or capture the size",
    "When the size comes from 0-d integer buffers a module builds from Python numbers in `__init__` "
    "(EnCodec's and Mimi's `stride`, `kernel_size`, `padding_total`), compiled code reads them as "
    "numbers: a method that computes only from them and the shapes of its arguments is run while "
    "Dynamo traces (`_mend_fold`, `torch._dynamo.assume_constant_result`), and a statement passing a "
    "buffer on reads it as `_mend_fold(getattr, self, name)`; eager runs the original code "
    "(**unsafe**: the numbers are read once, while Dynamo traces, so a later in-place write to those "
    "buffers is not seen by the compiled graph; a folded method returns a Python number instead of a "
    "0-d tensor under compile). Declined when the file writes the buffers, when a folded method is "
    "called from outside its class, or when a buffer is used as a tensor in the same statement. "
    "When the numbers come from a tensor the file builds from a Python list (`spatial_shapes = "
    "torch.as_tensor(shapes, dtype=torch.long)`, deformable attention) and hands on by keyword, or by position "
    "to a function or method of the file, the builder keeps a copy of the list beside the tensor "
    "(`_mend_keep_values`: only for an int64 tensor whose numbers are all Python ints nested as its shape; "
    "`torch.arange(a, b)` of Python ints keeps a `range` the same way, `_mend_arange`) and "
    "every loop or index of the file that takes numbers out of it reads the copy (`for h, w in "
    "_mend_kept(spatial_shapes, 2)`: the copy when the tensor has it, has those dimensions and, in eager, was "
    "not written in place since; else the tensor, as before); the numbers are followed into the names, "
    "parameters and `self.` attributes they are stored or passed to. Declined where a number read so is used where a "
    "Python int and a 0-d tensor differ (a method call on it, true division, a call of another function, a "
    "comparison used as a value). **Unsafe**: the numbers are Python ints; float arithmetic on them is float64 "
    "where the tensor's was float32 (equal below 2**24); under compile the copy is read without the in-place "
    "check. When the site is in a method of Python values, or one it calls through `self.` (Funnel's relative "
    "positions, computed from `seq_len: int`, a dtype and a device), that method runs while Dynamo traces and its "
    "results become constants of the graph (`_mend_constant`, `torch._dynamo.assume_constant_result`); eager runs "
    "the original. Only where every parameter is annotated as a Python value and the methods read of the module "
    "only other methods, `self.config` and dropout modules (then only in eval mode), call only torch, `math` and "
    "builtins, draw no random numbers and assign no attribute (**unsafe**: computed once per traced input size; "
    "a config changed after compilation is not seen). Other tensor sizes and bounds: scalar capture for the "
    "site. " + SCOPED_CAPTURE,
    strategies=("int_buffers", "kept_values", "constant_method", "capture"),
)

register(
    Rule(
        "MND310", "tensor-as-size",
        "tensor used as a size or bound in compiled code: Dynamo needs its value as a Python number and breaks "
        "the graph",
        ("GB0033",), "break",
        what="""
            Finds tensors passed where torch needs Python numbers: the bounds of `torch.arange`,
            `torch.linspace` and `torch.logspace`, the sizes of factories (`torch.zeros`, `torch.full`,
            `torch.empty`, `torch.randn`, `x.new_zeros`, ...), of `view`/`reshape`/`repeat`/`expand`/
            `tile`/`unflatten`/`narrow`/`split` and `torch.split` (also a list of tensors, or a comprehension
            of them), the pads of `F.pad`, the `size` of `F.interpolate` and the `num_classes` of
            `F.one_hot` (`F.one_hot(ids, max(ids.max() + 1, n))`).
            The tensor may come through locals, reductions (`n = mask.sum()`, `torch.max(ids) + 1`),
            indexing, tuple unpacking and loops over a tensor (`for h, w in spatial_shapes:`).
            Shapes (`x.shape[0]`, `x.size(1)`) are static and not reported, nor is a name bound before an
            earlier graph break of the function (Dynamo resumes with it as a frame input, and takes an
            input's value as a size without breaking).
        """,
        why="""
            A size or bound is part of the graph's structure: Dynamo cannot leave it symbolic when it
            comes from tensor data ("Data dependent operator", GB0033) and breaks the graph at the call.
        """,
        use_instead="""
            Use a static size (`x.shape[1]`, a config value) and mask the rest, or take the number out
            once, before the compiled region, and pass it in as an `int`.
        """,
        fix=_SIZE_FIX,
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x, mask):
                    n = mask.sum()
                    return torch.arange(n) + x.shape[0]
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x, mask):
                    n = x.shape[1]
                    return torch.arange(n) * mask
        """,),
    ),
    Rule(
        "MND311", "tensor-slice-bound",
        "tensor used as a slice bound in compiled code: Dynamo calls `.item()` on it, breaks the graph and "
        "skips the frame",
        ("GB0124",), "break",
        what="""
            Finds slices whose bounds or step are tensors: `x[start:end]` with `start = offsets[i]`,
            `x[:, cu_seqlens[i - 1]:cu_seqlens[i]]`, `cache[:seq_len]` with
            `seq_len = torch.max(position_ids) + 1`; also of a Python list or tuple (`crops[start:end]` with
            `for end in torch.cumsum(counts, 0):`), which converts the bound the same way.
        """,
        why="""
            A slice needs Python integers: Dynamo converts a tensor bound with `.item()`, which it does
            not capture by default (GB0124); it cannot resume inside the subscript and skips the whole
            frame.
        """,
        use_instead="""
            Slice with static bounds and mask, gather with an index tensor (`torch.index_select`,
            `torch.gather`), or compute the bounds outside the compiled region.
        """,
        fix=_SIZE_FIX,
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x, lengths):
                    end = lengths.max()
                    return x[:end] * 2
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x, lengths):
                    end = x.shape[0] - 1
                    return x[:end] * lengths.max()
        """,),
    ),
    Rule(
        "MND312", "range-over-tensor",
        "`range()` of a tensor in compiled code: Dynamo cannot trace the builtin with a tensor argument and "
        "breaks the graph",
        ("GB0059",), "break",
        what="Finds `range(n)` (any argument) where `n` is a tensor, such as a count from `mask.sum()`.",
        why="""
            `range` needs Python integers; Dynamo fails to trace the builtin on a tensor ("Failed to
            trace builtin operator", GB0059) and breaks the graph.
        """,
        use_instead="Loop over a static count (`x.shape[0]`, a config value), or vectorise the loop.",
        no_fix="the trip count must become static; which one depends on the model",
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    n = (x.sum(-1) > 0).sum()
                    for i in range(n):
                        x = x + i
                    return x
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    for i in range(x.shape[0]):
                        x = x + i
                    return x
        """,),
    ),
    Rule(
        "MND313", "numpy-value-as-number",
        "numpy value taken as a Python number in compiled code: Dynamo traces numpy as tensor operations, so "
        "`.item()`, a size or a random draw breaks the graph",
        ("GB0208", "GB0033"), "break",
        what="""
            Finds, in traced code, numpy results that Python must read as numbers: `.item()`/`.tolist()`
            of a numpy expression (`np.ceil(np.log1p(n)).astype("int").item()`), a numpy result inside
            the shape of `np.zeros`/`np.ones`/`np.empty`/`np.full` (`np.zeros((n, np.sum(plan)))`), a slice
            bound read from a numpy array (`idx = np.array(spans[name]); X[:, idx[0]:idx[1]]`), and
            `np.random.*` draws.
        """,
        why="""
            Dynamo runs numpy calls as tensor operations (`torch._numpy`), even on Python numbers and
            lists: their results are tensors to it. Reading one as a Python number is a `.item()` on
            traced data: "torch.* op returned non-Tensor" (GB0208) or a data-dependent operator (GB0033)
            breaks the graph there (measured on torch 2.13: informer's `log_L_K`, BigBird's block plan,
            VITS's layer drop).
        """,
        use_instead="""
            Compute numbers with `math` and Python's builtins (`math.ceil(math.log1p(n))`, `sum(plan)`),
            draw random numbers outside the compiled function or with torch, or precompute the value in
            `__init__`.
        """,
        fix=FixInfo(
            "sometimes", "unsafe", "compute the number with `math` and builtins, which Dynamo folds",
            "numpy on Python numbers becomes the same computation in Python: `np.log`/`log1p`/`log2`/`log10`/"
            "`exp`/`expm1`/`sqrt` -> `math.*`, `np.ceil`/`floor`/`trunc` -> `math.*` (`float(...)` unless "
            "`.astype(int)` follows), `np.sum` -> `sum`, `np.prod` -> `math.prod`, `np.abs` -> `abs`, "
            "`np.maximum`/`minimum` -> `max`/`min`, `.astype(int)`/`.astype(float)` -> `int()`/`float()`; "
            "`.item()` is dropped, and in a shape of `np.zeros`/`ones`/`empty`/`full` only the numpy parts "
            "are rewritten (**unsafe**: numpy wraps int64 where Python ints grow, `math`'s log/exp may round "
            "an ulp off numpy's, `math` raises where numpy returns inf or nan, and `sum` of a 2-d array adds "
            "its rows where `np.sum` adds everything). Declined for a tensor argument (reading it as a "
            "number breaks the graph the same), other numpy functions, `.tolist()`, and random draws "
            "(numpy's generator state is the program's).",
            strategies=("numpy_math",),
        ),
        invalid=("import numpy as np\n" + _HDR + """
            class M(nn.Module):
                def forward(self, x):
                    log_len = np.ceil(np.log1p(x.size(1))).astype("int").item()
                    return x[:, :log_len]
        """,),
        valid=("import math\n" + _HDR + """
            class M(nn.Module):
                def forward(self, x):
                    log_len = math.ceil(math.log1p(x.size(1)))
                    return x[:, :log_len]
        """,),
    ),
)

# torch functions whose positional arguments (from the index given) are sizes or bounds, and keyword
# arguments that are
SIZE_FUNCTIONS: dict[str, tuple[int, frozenset[str]]] = {
    **{f"torch.{n}": (0, frozenset({"start", "end", "step", "steps"})) for n in ("arange", "linspace", "logspace")},
    **{f"torch.{n}": (0, frozenset({"size"})) for n in ("zeros", "ones", "empty", "rand", "randn", "full", "eye")},
    "torch.randint": (0, frozenset({"low", "high", "size"})),
    "torch.nn.functional.pad": (1, frozenset({"pad"})),
    "torch.nn.functional.interpolate": (1, frozenset({"size"})),
    "torch.nn.functional.one_hot": (1, frozenset({"num_classes"})),
    "torch.split": (1, frozenset({"split_size_or_sections"})),
}
# the full argument of torch.full is its fill value, not a size
ONLY_FIRST = frozenset({"torch.full"})
# tensor methods whose positional arguments (from the index given) are sizes
SIZE_METHODS: dict[str, int] = {
    **dict.fromkeys(("view", "reshape", "repeat", "expand", "tile", "new_zeros", "new_ones", "new_empty"), 0),
    "new_full": 0, "unflatten": 1, "narrow": 1, "split": 0,
}
METHOD_FIRST_ONLY = frozenset({"new_full", "split"})


def _tensor_number(ctx: Context, e: ast.AST) -> bool:
    """``e`` is (or holds, as a tuple/list of sizes) a certain tensor."""
    if isinstance(e, (ast.Tuple, ast.List)):
        return any(_tensor_number(ctx, x) for x in e.elts)
    if isinstance(e, ast.Starred):
        return False  # `*sizes`: a list of numbers as often as a tensor
    if ctx.resumed_input(e):
        return False  # a 0-d tensor that is an input of the frame: Dynamo takes it as a size without breaking
    return ctx.kind(e) == tk.T or ctx.element_kind(e) == tk.T  # `[h * w for h, w in spatial_shapes]`


def _size_args(call: ast.Call, first: int, only_first: bool, keywords: frozenset[str]) -> list[ast.AST]:
    args = call.args[first:first + 1] if only_first else call.args[first:]
    return [*args, *(k.value for k in call.keywords if k.arg in keywords)]


@checker("call")
def tensor_sizes(ctx: Context, call: ast.Call) -> None:
    q = ctx.qualify(call.func)
    if q is not None:
        if q == "builtins.range":
            if any(ctx.kind(a) == tk.T for a in call.args):
                ctx.report("MND312", call)
            return
        spec = SIZE_FUNCTIONS.get(q)
        if spec is None:
            return
        args = _size_args(call, spec[0], q in ONLY_FIRST, spec[1])
        what = f"`{q.replace('torch.nn.functional.', 'F.')}`"
    elif isinstance(call.func, ast.Attribute) and call.func.attr in SIZE_METHODS:
        if ctx.kind(call.func.value) not in (tk.T, tk.M):
            return
        method = call.func.attr
        args = _size_args(call, SIZE_METHODS[method], method in METHOD_FIRST_ONLY, frozenset({"size", "sizes"}))
        what = f"`.{method}()`"
    else:
        return
    if CAPTURE_SCALARS not in ctx.config_flags and any(_tensor_number(ctx, a) for a in args):
        ctx.report("MND310", call, f"tensor used as a size or bound of {what} in compiled code: Dynamo needs its "
                                   "value as a Python number and breaks the graph")


# numpy.random functions that set or read the generator's state rather than draw (`np.random.seed(s)` does not
# break the graph: BigBird's block-sparse attention, measured on the zoo)
NUMPY_RANDOM_STATE = frozenset({"seed", "get_state", "set_state"})


@checker("call")
def numpy_numbers(ctx: Context, call: ast.Call) -> None:
    q = ctx.qualify(call.func) or ""
    if q.startswith("numpy.random.") and q.rsplit(".", 1)[-1] not in NUMPY_RANDOM_STATE:
        ctx.report("MND313", call, f"`{q.replace('numpy.', 'np.')}()` in compiled code: Dynamo traces numpy as "
                                   "tensor operations, and a random draw taken as a number breaks the graph")
    elif q in NUMPY_SHAPED and call.args and _numpy_value(ctx, call.args[0]):
        ctx.report("MND313", call, f"numpy result in the shape of `{q.replace('numpy.', 'np.')}` in compiled "
                                   "code: Dynamo traces numpy as tensor operations, and a size breaks the graph")
    elif (isinstance(call.func, ast.Attribute) and call.func.attr in ("item", "tolist") and not call.args
          and _numpy_value(ctx, call.func.value)):
        ctx.report("MND313", call, f"`.{call.func.attr}()` of a numpy value in compiled code: Dynamo traces "
                                   "numpy as tensor operations, and the number breaks the graph")


def _numpy_value(ctx: Context, e: ast.AST, depth: int = 0) -> bool:
    """``e`` is (or holds) the result of a numpy call: ``np.sum(plan)``, ``np.ceil(...).astype("int")``."""
    if depth > 8:
        return False
    if isinstance(e, (ast.Tuple, ast.List)):
        return any(_numpy_value(ctx, x, depth + 1) for x in e.elts)
    if isinstance(e, ast.BinOp):
        return _numpy_value(ctx, e.left, depth + 1) or _numpy_value(ctx, e.right, depth + 1)
    if isinstance(e, ast.Subscript):
        return _numpy_value(ctx, e.value, depth + 1)
    if isinstance(e, ast.Name):  # a local last assigned a numpy value
        value = ctx.local_values.get(e.id)
        return isinstance(value, ast.AST) and _numpy_value(ctx, value, depth + 1)
    if isinstance(e, ast.Call):
        q = ctx.qualify(e.func) or ""
        if q.startswith("numpy."):
            return True
        return (isinstance(e.func, ast.Attribute) and e.func.attr not in ("item", "tolist")  # those give Python's
                and _numpy_value(ctx, e.func.value, depth + 1))
    return False


@checker("subscript")
def tensor_slice_bounds(ctx: Context, node: ast.Subscript) -> None:
    """A slice with a tensor bound, of a tensor or of anything else (a Python list or tuple slices with
    ``__index__``, the same ``.item()``)."""
    if CAPTURE_SCALARS in ctx.config_flags:
        return
    idx = node.slice
    bounds = [b for part in (idx.elts if isinstance(idx, ast.Tuple) else [idx]) if isinstance(part, ast.Slice)
              for b in (part.lower, part.upper, part.step) if b is not None]
    if any(ctx.kind(b) == tk.T for b in bounds):
        ctx.report("MND311", node)
    elif any(_numpy_value(ctx, b) for b in bounds):
        ctx.report("MND313", node, "slice bound from a numpy value in compiled code: Dynamo traces numpy as tensor "
                                   "operations, and a bound read from one breaks the graph")


@checker("assign")
def tensor_slice_bounds_stored(ctx: Context, node: ast.Assign) -> None:
    """``mask[start:end, start:end] = 0``: the slice of a stored subscript needs numbers too."""
    for t in node.targets:
        if isinstance(t, ast.Subscript):
            tensor_slice_bounds(ctx, t)
