"""Facts about torch and Python names that ``mend check`` and ``mend fix`` both read.

Plain data and small functions over dotted names (``torch.nn.functional.relu``) and method names
(``item``): no torch import, no LibCST, no syntax trees. Each tool qualifies the names of its own tree
(:class:`mend.analyzers.static.names.Scope` for ``ast``, ``mend.rewriter.analysis.ImportMap`` for
LibCST) with the binding rules at the end of this module, then asks these tables.

Precision beats recall in both tools: a name missing from a table makes the analyzer report less and
the rewriter decline more, never the other way round.
"""

from __future__ import annotations

from collections.abc import Iterable

# --------------------------------------------------------------------------------------------
# torch functions: which calls return tensors

# Namespaces whose functions return tensors.
TENSOR_NAMESPACES = ("torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special.", "torch.ops.")
# Namespaces whose functions do not return tensors (or are not ops at all).
NON_TENSOR_NAMESPACES = (
    "torch.nn.", "torch.cuda.", "torch.backends.", "torch.distributed.", "torch.jit.", "torch.compiler.",
    "torch._dynamo.", "torch.utils.", "torch.fx.", "torch.onnx.", "torch.export.", "torch.optim.",
    "torch.autograd.", "torch._C.", "torch.version.", "torch.library.", "torch.overrides.", "torch.testing.",
    "torch.hub.", "torch.multiprocessing.", "torch.profiler.", "torch.amp.", "torch.cpu.", "torch.mps.",
    "torch.xpu.", "torch.accelerator.", "torch.types.", "torch.serialization.", "torch._logging.",
    "torch._inductor.", "torch.quantization.", "torch.ao.", "torch.random.", "torch._utils.",
)
# ``torch.<name>`` functions that do not return a tensor (or a tensor one cannot select with torch.where:
# ``torch.cond`` returns what its branches return, often a tuple).
NON_TENSOR_TORCH = frozenset(
    "torch." + n
    for n in (
        "is_tensor is_floating_point is_complex is_storage numel finfo iinfo get_default_dtype "
        "set_default_dtype is_grad_enabled is_inference_mode_enabled typename device dtype no_grad "
        "enable_grad set_grad_enabled inference_mode autocast is_autocast_enabled get_autocast_dtype "
        "get_autocast_gpu_dtype manual_seed initial_seed seed compile save load broadcast_shapes "
        "result_type promote_types can_cast use_deterministic_algorithms "
        "are_deterministic_algorithms_enabled get_num_threads set_num_threads sym_int sym_float sym_max "
        "sym_min sym_not sym_sum get_rng_state set_rng_state set_printoptions is_same_size "
        "is_deterministic_algorithms_warn_only_enabled get_device_module cond"
    ).split()
)
# torch functions whose result is a Python bool computed from tensor data: branching on one is
# data-dependent (the analyzer treats it like a tensor), but it has no tensor form (the rewriter
# cannot select with it).
DATA_BOOL_TORCH = frozenset({"torch.equal", "torch.allclose", "torch.is_nonzero"})
# Python `random` functions Dynamo traces (torch 2.13): the number drawn becomes an input of the graph (drawn
# before it runs, in the original order), so arithmetic on it stays in the graph and a branch on it is
# data-dependent (GB0170). `random.random()` and the other `random.Random` methods are C code Dynamo skips
# (GB0007: MND105).
TRACED_PYTHON_RANDOM = frozenset({"random.uniform", "random.randint", "random.randrange"})
# torch checks that read a tensor's values as a Python bool (`cond._is_all_true().item()`) and raise when it
# is False: a graph break unless the scalar is captured, where the check becomes a runtime assert.
TENSOR_CHECKS = frozenset({"torch._check_tensor_all", "torch._check_tensor_all_with"})


def returns_tensor(qual: str) -> bool:
    """Calling the torch callable ``qual`` (``torch.*``) returns a tensor.

    Functions of :data:`TENSOR_NAMESPACES` do; the non-tensor tables, deeper namespaces, classes other
    than ``*Tensor`` and private names do not; every other ``torch.<name>`` does."""
    if qual in DATA_BOOL_TORCH:
        return False
    if qual.startswith(TENSOR_NAMESPACES):
        return True
    if qual in NON_TENSOR_TORCH or qual.startswith(NON_TENSOR_NAMESPACES):
        return False
    rest = qual[len("torch."):]
    if "." in rest:
        return False
    if rest[:1].isupper():
        return rest.endswith("Tensor")
    return not rest.startswith("_")


# torch functions with effects beyond their result (files, global RNG state, compilation) and namespaces
# of such functions; random ops are recognised by :func:`is_random_op`.
EFFECTFUL_TORCH = frozenset({"torch.manual_seed", "torch.save", "torch.load", "torch.compile"})
EFFECTFUL_NAMESPACES = ("torch.cuda.", "torch.distributed.", "torch._dynamo.", "torch.autograd.")
RANDOM_OPS = frozenset({
    "dropout", "randperm", "randint", "randn", "rand_like", "randn_like", "alpha_dropout", "feature_alpha_dropout",
    "dropout1d", "dropout2d", "dropout3d",
})


def is_random_op(name: str) -> bool:
    """The op (last name, ``torch.rand`` -> ``rand``) draws from torch's generator."""
    return name.startswith(("rand", "bernoulli", "multinomial", "normal", "poisson")) or name in RANDOM_OPS


# --------------------------------------------------------------------------------------------
# tensor methods and attributes

# Methods whose result is a Python value computed from the tensor's data (a graph break under compile).
DATA_SCALAR_METHODS = frozenset({"item", "tolist", "__int__", "__float__"})
# Methods whose result is a Python bool computed from data: like DATA_BOOL_TORCH.
DATA_BOOL_METHODS = frozenset({"equal", "allclose", "is_nonzero", "__bool__"})
# Methods whose result is metadata or nothing (shapes, strides, storage, hooks, backward).
METADATA_METHODS = frozenset(
    "dim ndimension size numel nelement element_size stride storage_offset is_contiguous "
    "is_floating_point is_complex is_signed get_device data_ptr untyped_storage storage type "
    "is_set_to is_shared is_pinned dim_order has_names is_inference register_hook "
    "register_post_accumulate_grad_hook numpy __len__ is_coalesced is_nested backward".split()
)
# Every tensor method whose result is not a tensor.
NON_TENSOR_METHODS = DATA_SCALAR_METHODS | DATA_BOOL_METHODS | METADATA_METHODS
# Tensor methods that produce a tensor from a tensor (to recognise tensors behind method calls).
TENSOR_METHODS = frozenset({
    "sum", "mean", "max", "min", "amax", "amin", "prod", "any", "all", "abs", "float", "double", "half",
    "bfloat16", "long", "int", "bool", "to", "view", "reshape", "transpose", "permute", "unsqueeze",
    "squeeze", "flatten", "softmax", "log_softmax", "exp", "log", "sqrt", "rsqrt", "pow", "clamp",
    "clip", "masked_fill", "where", "sigmoid", "tanh", "relu", "contiguous", "clone", "detach",
    "argmax", "argmin", "norm", "cumsum", "sin", "cos", "mul", "add", "sub", "div", "matmul", "eq",
    "ne", "gt", "ge", "lt", "le", "isinf", "isnan", "isfinite", "logical_not", "logical_and",
    "logical_or", "expand", "expand_as", "repeat", "chunk", "split", "gather", "index_select",
    "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor", "type_as", "nonzero", "unique",
    "masked_select", "argwhere", "count_nonzero", "neg", "reciprocal", "square", "var", "std", "topk",
    "sort", "narrow", "select", "roll", "flip", "tril", "triu", "t", "cpu", "cuda", "numel_tensor",
})
# Calls whose result, unpacked (``values, indices = torch.sort(x)``), is tensors only: torch functions and, on a
# tensor, methods returning a tuple (or a named tuple) of tensors.
TENSOR_TUPLE_TORCH = frozenset(f"torch.{n}" for n in (
    "sort", "topk", "max", "min", "kthvalue", "mode", "median", "nanmedian", "cummax", "cummin", "aminmax",
    "std_mean", "var_mean", "split", "chunk", "unbind", "tensor_split", "meshgrid", "unique", "unique_consecutive",
    "frexp", "broadcast_tensors", "linalg.eigh", "linalg.qr", "linalg.svd", "linalg.slogdet"))
TENSOR_TUPLE_METHODS = frozenset({
    "sort", "topk", "max", "min", "kthvalue", "mode", "median", "nanmedian", "cummax", "cummin", "aminmax",
    "split", "chunk", "unbind", "tensor_split", "unique", "unique_consecutive", "frexp"})
# Tensor methods no list, tuple, dict, number, NumPy array or pandas frame has (NumPy and pandas spell
# reductions' ``dim=`` as ``axis=``): a name they are called on holds a tensor where the call runs.
TORCH_ONLY_METHODS = frozenset({
    "float", "double", "half", "bfloat16", "long", "unsqueeze", "masked_fill", "logical_not", "logical_and",
    "logical_or", "isinf", "isnan", "isfinite", "expand_as", "new_zeros", "new_ones", "new_full", "new_empty",
    "new_tensor", "type_as", "contiguous", "detach", "index_select", "masked_select", "narrow", "numel", "dim",
})
# Methods that mutate their receiver or register effects (in-place ``add_``-style methods are
# recognised by their trailing underscore).
EFFECT_METHODS = frozenset({
    "backward", "register_hook", "register_post_accumulate_grad_hook", "register_buffer", "append", "extend",
    "update", "pop", "insert", "remove", "clear", "setdefault", "write", "register_forward_hook",
})
# Method names that, on a tensor, read its data (GraphMend's DYNAMIC_TORCH_ATTRS plus a few).
DATA_METHODS = frozenset({
    "item", "tolist", "sum", "max", "min", "mean", "prod", "argmax", "argmin", "nonzero",
    "count_nonzero", "all", "any", "equal", "allclose", "unique", "amax", "amin", "isinf", "isnan",
    "isfinite", "norm", "std", "var", "eq", "ne", "gt", "lt", "ge", "le", "logical_not", "logical_and",
    "logical_or",
})
# Ops (methods, or ``torch.<name>``) whose result is a bool tensor: usable as a mask or a torch.where
# condition as they are.
BOOL_OPS = frozenset(
    "bool isnan isinf isfinite isneginf isposinf isin logical_and logical_or logical_not logical_xor "
    "eq ne lt le gt ge isclose signbit any all".split()
)
BOOL_TORCH = frozenset(
    "torch." + n for n in (BOOL_OPS - {"bool"}) | {"greater", "less", "greater_equal", "less_equal", "not_equal"}
)
# Attributes of a tensor that are tensors; TRANSPOSES are the ones whose shape differs from the tensor's.
TENSOR_ATTRS = frozenset("T mT H mH data real imag grad".split())
TRANSPOSES = frozenset({"T", "mT", "H", "mH"})
FLOAT_DTYPES = frozenset({"float16", "float32", "float64", "bfloat16", "half", "float", "double"})

# --------------------------------------------------------------------------------------------
# op tables of the branch repair (which sides ``torch.where`` may compute)

# Elementwise ops whose derivative is bounded (0/1 or +-1): a torch.where over them keeps gradients
# finite on the unselected side, so no autograd gate is needed.
GRAD_SAFE_OPS = frozenset({
    "clamp", "clip", "clamp_min", "clamp_max", "nan_to_num", "masked_fill", "where", "zeros_like",
    "ones_like", "full_like", "detach", "abs", "relu", "neg", "to", "float", "half", "bfloat16",
    "double", "type_as", "contiguous", "clone", "minimum", "maximum",
})
# Elementwise ops that cannot raise for a tensor of any real, non-bool dtype and any shape (empty too)
# when their other arguments are Python numbers or dtypes: a branch repair may compute them on the side
# that was not taken. Reductions that fail on empty tensors (max, min, argmax) are not here.
TOTAL_ELEMENTWISE = frozenset({
    "abs", "neg", "negative", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
    "sigmoid", "tanh", "relu", "sin", "cos", "tan", "sinh", "cosh", "atan", "asin", "acos", "square",
    "reciprocal", "erf", "sign", "floor", "ceil", "round", "trunc", "clamp", "clip", "clamp_min",
    "clamp_max", "nan_to_num", "isinf", "isnan", "isfinite", "isneginf", "isposinf", "signbit",
    "logical_not", "float", "double", "half", "bfloat16", "to", "contiguous", "clone", "detach",
    "zeros_like", "ones_like", "full_like", "gelu", "silu", "mish", "softplus", "elu", "leaky_relu",
    "hardtanh", "relu6", "mul", "add", "sub", "div", "pow",
})
# Reductions that cannot raise on any tensor, empty ones included (a 0-d result).
TOTAL_REDUCTIONS = frozenset({"any", "all", "sum", "mean", "prod", "count_nonzero", "nansum"})
# ... of which these raise for integer dtypes (measured on torch 2.13, CPU: `mean()` "could not infer output
# dtype", `gelu` "not implemented for 'Long'", `hardtanh` of uint8 with negative limits): total only on a
# tensor known to be floating.
FLOATING_ONLY = frozenset({"mean", "gelu", "silu", "mish", "softplus", "elu", "leaky_relu", "hardtanh"})
# Ops whose result shape differs from their main input's: a branch whose side uses one can hold values of
# another shape than the other side, which torch.where cannot select between (and computing the side
# not taken can fail: ``torch.cat`` of tensors that only fit when the branch is taken).
SHAPE_CHANGING = frozenset({
    "cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "reshape", "view", "flatten",
    "unflatten", "squeeze", "unsqueeze", "split", "chunk", "narrow", "pad", "repeat", "repeat_interleave",
    "expand", "expand_as", "index_select", "gather", "masked_select", "nonzero", "unique", "tile",
    "transpose", "permute", "movedim", "t", "matmul", "mm", "bmm", "einsum", "outer", "tensordot",
    "new_zeros", "new_ones", "new_full", "new_empty", "zeros", "ones", "full", "empty", "arange",
})
# torch functions whose first argument is a size, not a tensor they work on (``torch.arange(n)``).
SIZE_FIRST_FACTORIES = frozenset({"arange", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm",
                                  "linspace", "logspace", "eye", "tensor"})
# Elementwise methods that keep a tensor's shape (``t[mask].float().sum()``).
ELEMENTWISE_METHODS = frozenset({
    "float", "double", "half", "bfloat16", "abs", "exp", "log", "sqrt", "neg", "sigmoid", "tanh", "relu",
    "square", "detach", "contiguous", "clone",
})
# torch.nn modules whose call returns something other than one tensor.
NON_TENSOR_MODULES = frozenset({
    "LSTM", "GRU", "RNN", "MultiheadAttention", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
    "Identity", "Dropout",
})
# torch.nn recurrent modules Dynamo refuses to wrap unless `torch._dynamo.config.allow_rnn` is set (GB0014).
RNN_MODULES = frozenset({"LSTM", "GRU", "RNN"})
# tensors a module registers when assigned to an attribute: a parameter, or a buffer (``self.stride =
# nn.Buffer(t, persistent=False)``, torch >= 2.5, transformers 5's spelling of ``register_buffer``)
BUFFER_NAMES = frozenset({"torch.nn.Buffer", "torch.nn.parameter.Buffer"})
PARAMETER_NAMES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"}) | BUFFER_NAMES
RNN_FLAG = "allow_rnn"
# The helper `mend fix` adds for one call of such a module: `_mend_rnn(lambda: self.lstm(x))` sets the flag
# while Dynamo traces that call only (mend.rewriter.helpers).
RNN_HELPER = "_mend_rnn"

# --------------------------------------------------------------------------------------------
# compiling: how torch.compile, its opt-out and its compile-time tests are spelled

COMPILE_NAMES = frozenset({"torch.compile", "torch.compiler.compile"})
DISABLE_NAMES = frozenset({"torch.compiler.disable", "torch._dynamo.disable", "torch._disable_dynamo"})

# The helper `mend fix` adds to capture one site's value under compile: `_mend_captured(lambda: E)` traces
# `E` with scalar and dynamic-shape capture on (mend.rewriter.helpers), so what `E` turns into a number or
# sizes by the data does not break the graph there.
CAPTURE_HELPER = "_mend_captured"
# ... and `_mend_tensor_check(lambda: torch._check_tensor_all(c))`, the same for a tensor check, where the
# torch version keeps the captured value (2.13 on; before, the check runs as written).
TENSOR_CHECK_HELPER = "_mend_tensor_check"
# ... and `_mend_index(b)`, a slice bound captured as a symbolic number under compile (a stored slice).
CAPTURE_INDEX_HELPER = "_mend_index"
# What a repair whose helper acts only on torch 2.13 and later says (`_mend_index`, `_mend_fold`, `_mend_constant`:
# before 2.13 a stored slice of captured bounds breaks at the store and `assume_constant_result` cannot trace a
# module, so the helpers run the original code there and the break stays; `mend.rewriter.helpers`, `.active`).
HELPERS_ACT_FROM = (2, 13)  # the torch those helpers act on; `mend fix` declines them for an earlier target torch
HELPERS_ACT_NOTE = (f"; acts on torch {'.'.join(map(str, HELPERS_ACT_FROM))} and later (earlier torch runs the "
                    "original code: the break stays)")
# ... and a shape tensor built from Python numbers with a copy of them kept beside it:
# `_mend_keep_values(torch.as_tensor(shapes, ...), shapes)` is that tensor; `_mend_kept(shapes, 2)` hands on
# the copy, Python numbers (rewriter/strategies/kept_values.py); `_mend_arange(a, b, ...)` is `torch.arange(a, b, ...)`
# with its numbers kept the same way (a span: `a + i` for an index `i`).
# ... and the helpers that run a method while Dynamo traces (`_mend_fold`, `_mend_constant`): their `.active`
# flag is set only during that eager run, which Dynamo does not trace, so it is False under compile.
FOLD_HELPERS = frozenset({"_mend_fold", "_mend_constant"})
KEEP_VALUES_HELPER = "_mend_keep_values"
KEPT_VALUES_HELPER = "_mend_kept"
ARANGE_HELPER = "_mend_arange"
# torch calls that must guard on a captured number to work out their output's size (a range's length from
# float bounds, an interpolation's scale, a pad's bookkeeping of unbacked sizes): under capture they break
# inside the helper or fail to compile (torch 2.13), so the fix does not capture a value that reaches them.
# `F.one_hot` likewise: a captured `num_classes` fails with "Could not extract specialized integer", and one with
# no `num_classes` reads the largest index, which Dynamo refuses either way (torch 2.13).
CAPTURE_GUARDED_CALLS = frozenset({
    "torch.arange", "torch.linspace", "torch.logspace", "torch.nn.functional.interpolate", "torch.nn.functional.pad",
    "torch.nn.functional.one_hot",
})
# ... except a range counted from zero by one (`torch.arange(n)`, `torch.arange(0, n)`, dtype and device
# keywords), captured whole: its length is the captured number itself (`torch.arange(1, n)` still fails).
CAPTURE_COUNTING_RANGE = "torch.arange"
# tensor methods that must prove a captured size matches the tensor's element count (`view(b, -1, h, w)`)
CAPTURE_GUARDED_METHODS = frozenset({"view", "reshape"})
# torch calls that join tensors of different data-dependent lengths along the first dimension without
# comparing the lengths (the result's length is their sum): a list of captured tensors may go there;
# `pad_sequence`, which compares them, breaks (torch 2.13)
CAPTURE_LIST_JOINS = frozenset({"torch.cat", "torch.concat", "torch.concatenate"})
# The Dynamo config flags in force inside it.
CAPTURE_SCOPE_FLAGS = frozenset({"capture_scalar_outputs", "capture_dynamic_output_shape_ops"})

# Calls that are True under torch.compile and False in eager: the exact spellings, and any name ending
# in one of IS_COMPILING_SUFFIXES (transformers' ``is_torchdynamo_compiling``, a project's own
# ``is_compiling`` helper).
IS_COMPILING = frozenset({
    "torch.compiler.is_compiling", "torch._dynamo.is_compiling", "torch.compiler.is_dynamo_compiling",
    "torch._dynamo.external_utils.is_compiling", "torch._utils.is_compiling",
})
IS_COMPILING_SUFFIXES = ("is_compiling", "is_dynamo_compiling", "is_torchdynamo_compiling")
# Calls that are False under torch.compile (Dynamo does not script, trace with jit or export to ONNX).
FALSE_UNDER_COMPILE = frozenset({"torch.jit.is_scripting", "torch.jit.is_tracing", "torch.onnx.is_in_onnx_export"})
# Attributes naming the attention implementation a model is configured with (transformers'
# ``config._attn_implementation``): a branch on one of its values runs only for that configuration.
ATTENTION_IMPLEMENTATION_ATTRS = frozenset({"_attn_implementation", "attn_implementation"})
# Calls whose value depends on a mode the analyzer cannot see (grad mode on or off).
GRAD_MODE_TESTS = frozenset({"torch.is_grad_enabled", "torch.is_inference_mode_enabled"})


# torch arithmetic that Dynamo folds into a Python number when no argument is a tensor (measured on torch
# 2.13: `torch.div(seq_len, w, rounding_mode="trunc")` of sizes is a constant to it; sizes from it never break)
PYTHON_NUMBER_OPS = frozenset({"torch.div", "torch.floor_divide", "torch.true_divide"})

# numpy constructors whose first argument is a shape
NUMPY_SHAPED = frozenset({"numpy.zeros", "numpy.ones", "numpy.empty", "numpy.full"})
# numpy functions of Python numbers and the Python that computes the same number (MND313's repair: Dynamo
# traces numpy as tensors, Python numbers it folds). One-argument math functions (a float either way) ...
NUMPY_MATH = {f"numpy.{n}": f"math.{n}" for n in ("log", "log1p", "log2", "log10", "exp", "expm1", "sqrt")}
# ... roundings (numpy's a float, math's an int) ...
NUMPY_ROUNDING = {"numpy.ceil": "math.ceil", "numpy.floor": "math.floor", "numpy.trunc": "math.trunc"}
# ... and builtins by their number of positional arguments (`np.sum(plan)` -> `sum(plan)`)
NUMPY_BUILTINS = {"numpy.sum": ("sum", 1), "numpy.prod": ("math.prod", 1), "numpy.abs": ("abs", 1),
                  "numpy.absolute": ("abs", 1), "numpy.maximum": ("max", 2), "numpy.minimum": ("min", 2),
                  "numpy.lcm": ("math.lcm", 2), "numpy.gcd": ("math.gcd", 2)}
# `.astype(...)` targets that make a numpy number a Python int or float
NUMPY_INT_TYPES = frozenset({"int", "'int'", '"int"', '"int64"', '"int32"', "np.int64", "np.int32", "np.intp",
                             "numpy.int64", "numpy.int32", "numpy.intp"})
NUMPY_FLOAT_TYPES = frozenset({"float", "'float'", '"float"', '"float64"', "np.float64", "numpy.float64"})


def is_compiling_call(qual: str) -> bool:
    """``qual()`` tells whether torch.compile is tracing (True under compile, False in eager)."""
    return qual in IS_COMPILING or qual.endswith(IS_COMPILING_SUFFIXES)


# --------------------------------------------------------------------------------------------
# logging

# mend's helper for a message kept under compile (``mend fix``, side-effects = keep): it calls the ordered-effect
# operator ``torch.ops.mend.emit``, so a call of it does not break the graph.
EMIT_HELPER = "_mend_emit"

# mend's helper for a random draw the repaired code may leave unread (LayerDrop): ``_mend_drawn(torch.rand(...))``
# is the draw (an ordered effect reads it under compile, so the compiled graph keeps it).
DRAWN_HELPER = "_mend_drawn"

# mend's helper for a layer LayerDrop may skip, called under compile (``mend fix --unsafe-fixes``):
# ``_mend_layer_drop(drop, h, layer, h, ...)`` computes the layer and selects ``h`` where ``drop`` holds.
LAYER_DROP_HELPER = "_mend_layer_drop"

# mend's helper for an augmented store through a bool mask (MND305): ``_mend_mask_update(t, "+", mask, v)`` updates
# ``t`` in place.
MASK_UPDATE_HELPER = "_mend_mask_update"

# logging.Logger methods (and transformers' ``warning_once``/``info_once``/``warning_advice``).
LOGGER_METHODS = frozenset(
    "debug info warning warn error exception critical fatal log warning_once info_once warning_advice".split()
)
# logging.Logger methods that ask about the logger's configuration (``if logger.isEnabledFor(DEBUG):``): Dynamo
# breaks on them as on the logging ones, and they report nothing (no message to keep).
LOGGER_QUERIES = frozenset("isEnabledFor getEffectiveLevel hasHandlers".split())
# Module-level functions of ``logging`` that log.
LOGGING_FUNCS = frozenset(f"logging.{m}" for m in "debug info warning warn error exception critical fatal log".split())


# --------------------------------------------------------------------------------------------
# how imports bind names (the core of both tools' name qualification)


def import_binding(name: str, asname: str | None) -> tuple[str, str]:
    """``import name [as asname]``: the local name bound and the dotted name it stands for."""
    if asname:
        return asname, name
    top = name.split(".", 1)[0]
    return top, top


def from_import_binding(base: str, name: str, asname: str | None) -> tuple[str, str]:
    """``from base import name [as asname]``: the local name bound and the dotted name it stands for."""
    return asname or name, f"{base}.{name}" if base else name


def resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    """Absolute module name for ``from <level dots><target> import ...`` inside ``module``."""
    if level == 0:
        return target or ""
    parts = module.split(".") if module else []
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
    if target:
        parts.append(target)
    return ".".join(parts)


def qualified(base: str, attrs: Iterable[str]) -> str:
    """The dotted name of ``<head>.a.b`` once ``<head>`` is known to stand for ``base``."""
    rest = ".".join(attrs)
    return f"{base}.{rest}" if rest else base
