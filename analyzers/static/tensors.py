"""Light tensor-ness inference for one function, without types and without importing torch.

Every expression gets a *kind*:

* ``T``: certainly a tensor (a torch factory/op result, a tensor method result, a parameter
  annotated ``torch.Tensor``, a submodule output in ``forward``, a registered buffer or parameter,
  a non-default parameter of ``forward``; see ``docs/check.md``);
* ``M``: maybe a tensor (``Optional[torch.Tensor]``, a ``forward`` parameter defaulting to ``None``):
  enough for ``.item()``-style method rules, not for truthiness rules;
* ``S``: a Python number computed from tensor data (``.item()``, ``float(t)``): the break already
  happened where it was produced, so branching on it later is ordinary Python;
* ``N``: anything else (shapes, dtypes, ``x.dim()``, ``self.training``, constants, unknowns).

Precision beats recall: when in doubt the answer is ``N``.
"""

from __future__ import annotations

import ast

N, M, T, S = 0, 1, 2, 3

TENSOR_NAMESPACES = ("torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special.", "torch.ops.")
NON_TENSOR_NAMESPACES = (
    "torch.nn.", "torch.cuda.", "torch.backends.", "torch.distributed.", "torch.jit.", "torch.compiler.",
    "torch._dynamo.", "torch.utils.", "torch.fx.", "torch.onnx.", "torch.export.", "torch.optim.",
    "torch.autograd.", "torch._C.", "torch.version.", "torch.library.", "torch.overrides.", "torch.testing.",
    "torch.hub.", "torch.multiprocessing.", "torch.profiler.", "torch.amp.", "torch.cpu.", "torch.mps.",
    "torch.xpu.", "torch.accelerator.", "torch.types.", "torch.serialization.", "torch._logging.",
    "torch._inductor.", "torch.quantization.", "torch.ao.", "torch.random.", "torch._utils.",
)
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
        "is_deterministic_algorithms_warn_only_enabled get_device_module"
    ).split()
)
# torch functions whose result is a Python bool computed from tensor data.
DATA_BOOL_TORCH = frozenset({"torch.equal", "torch.allclose", "torch.is_nonzero"})

NON_TENSOR_METHODS = frozenset(
    "dim ndimension size numel nelement element_size stride storage_offset is_contiguous "
    "is_floating_point is_complex is_signed get_device data_ptr untyped_storage storage type "
    "is_set_to is_shared is_pinned dim_order has_names is_inference register_hook "
    "register_post_accumulate_grad_hook numpy __len__ is_coalesced is_nested".split()
)
DATA_SCALAR_METHODS = frozenset({"item", "tolist"})
NON_TENSOR_ATTRS = frozenset(
    "shape dtype device ndim layout is_cuda is_cpu is_meta is_mps is_sparse is_quantized is_mkldnn "
    "requires_grad is_leaf grad_fn names itemsize nbytes output_nr _version is_nested".split()
)
TENSOR_ATTRS = frozenset("T mT H mH data real imag grad".split())

BOOL_TENSOR_TORCH = frozenset(
    "torch." + n
    for n in "isnan isinf isfinite isneginf isposinf isin logical_and logical_or logical_not logical_xor "
    "eq ne lt le gt ge greater less greater_equal less_equal not_equal isclose signbit".split()
)
BOOL_METHODS = frozenset(
    "bool isnan isinf isfinite logical_and logical_or logical_not logical_xor eq ne lt le gt ge "
    "isclose signbit isin".split()
)


def torch_call_kind(qual: str) -> int:
    """Kind of the result of calling the torch function ``qual`` (``torch.*``)."""
    if qual in DATA_BOOL_TORCH:
        return T
    if qual.startswith(TENSOR_NAMESPACES):
        return T
    if qual in NON_TENSOR_TORCH or qual.startswith(NON_TENSOR_NAMESPACES):
        return N
    rest = qual[len("torch."):]
    if "." in rest:
        return N
    if rest[:1].isupper():
        return T if rest.endswith("Tensor") else N
    if rest.startswith("_"):
        return N
    return T


def is_tensor_annotation(ann: ast.AST | None, qualify) -> int:
    """Kind implied by an annotation: ``T`` for tensors, ``M`` for optional tensors, else ``N``."""
    if ann is None:
        return N
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return N
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        parts = [ann.left, ann.right]
        kinds = [is_tensor_annotation(p, qualify) for p in parts]
        if any(k in (T, M) for k in kinds):
            return M
        return N
    if isinstance(ann, ast.Subscript):
        head = qualify(ann.value) or ""
        tail = head.rsplit(".", 1)[-1]
        if tail in ("Optional", "Union"):
            inner = ann.slice
            elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            if any(is_tensor_annotation(e, qualify) in (T, M) for e in elts):
                return M
        return N
    q = qualify(ann)
    if q is None:
        if isinstance(ann, ast.Name) and ann.id == "Tensor":
            return T
        return N
    if q.startswith("torch.") and q.endswith("Tensor") and q.count(".") == 1:
        return T
    if q in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
        return T
    return N
