"""Helper functions that repaired code calls, inserted into the repaired file itself.

Decision: helpers are **self-contained** in the user's file (they need only torch), so a repaired
copy of a library runs with nothing but its own dependencies. Each helper (a function, and for
``_mend_emit`` the statement registering it with Dynamo) is added once per file, after the top-level
imports, and never again on a second run (a helper is present when its function is). The same sources back
:mod:`mend.rewriter.runtime`, for compile boundaries that live outside the repaired tree.
"""

from __future__ import annotations

import libcst as cst

HELPER_SOURCES: dict[str, str] = {
    "_mend_masked_sum": '''
def _mend_masked_sum(t, mask):
    """``t[mask].sum()`` with a static shape under torch.compile; eager runs the original (added by mend fix)."""
    if not torch.compiler.is_compiling():
        return t[mask].sum()  # noqa: MND305
    mask = mask.reshape(mask.shape + (1,) * (t.dim() - mask.dim()))
    return torch.where(mask, t, torch.zeros((), dtype=t.dtype, device=t.device)).sum()
''',
    "_mend_masked_mean": '''
def _mend_masked_mean(t, mask):
    """``t[mask].mean()`` with a static shape under torch.compile; eager, and a dtype ``mean()`` rejects,
    run the original (added by mend fix)."""
    if not torch.compiler.is_compiling() or not (t.is_floating_point() or t.is_complex()):
        return t[mask].mean()  # noqa: MND305
    count = mask.sum() * (t.numel() // max(mask.numel(), 1))
    mask = mask.reshape(mask.shape + (1,) * (t.dim() - mask.dim()))
    return torch.where(mask, t, torch.zeros((), dtype=t.dtype, device=t.device)).sum() / count
''',
    "_mend_routed_store": '''
def _mend_routed_store(t, mask, rows):
    """``t[mask] = rows[mask]`` with a static shape (added by mend fix): ``t`` keeps its values where the
    boolean ``mask`` is False and takes ``rows``' where it is True; an index tensor stores as before."""
    if mask.dtype != torch.bool:
        t[mask] = rows[mask]  # noqa: MND305 - an index tensor: no data-dependent shape
        return
    mask = mask.reshape(mask.shape + (1,) * (t.dim() - mask.dim()))
    t.copy_(torch.where(mask, rows, t))
''',
    "_mend_grouped_rows": '''
def _mend_grouped_rows(ids, modules, x):
    """Each row of ``x`` through the module its id picks from ``modules``, with static shapes (added by mend
    fix): every module runs on every row, each row takes its own id's output. No rows: no runs to
    concatenate, an error as in the original."""
    if x.shape[0] == 0:
        torch.cat([], 0)
    outs = torch.stack([m(x) for m in modules], 0)
    return outs[ids.long(), torch.arange(x.shape[0], device=x.device)]
''',
    "_mend_tolist_len": '''
def _mend_tolist_len(t):
    """``len(t.tolist())`` without the list: ``t.shape[0]`` (added by mend fix). The list of a 0-d
    tensor is a number, whose ``len()`` the original asks for (and raises there)."""
    if len(t.shape) == 0:
        return len(t.tolist())  # noqa: MND303
    return t.shape[0]
''',
    "_mend_tensor_equal": '''
def _mend_tensor_equal(a, b):
    """``torch.equal(a, b)`` as a bool tensor; shapes and dtypes are compared statically (added by mend fix)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return torch.zeros((), dtype=torch.bool, device=a.device)
    return (a == b).all()
''',
    "_mend_fold": '''
@torch._dynamo.assume_constant_result
def _mend_fold(fn, *args):
    """``fn(*args)`` run while torch.compile traces, on the real buffers, its 0-d tensor result handed on as a
    Python number (added by mend fix). A ``torch.Size`` argument stands for a tensor ``fn`` reads only the
    shape of. ``_mend_fold.active`` tells a folded method to run its original code."""

    class _Shaped:
        def __init__(self, shape):
            self.shape = shape

        def size(self, dim=None):
            return self.shape if dim is None else self.shape[dim]

        def dim(self):
            return len(self.shape)

    _mend_fold.active = True
    try:
        out = fn(*[_Shaped(a) if isinstance(a, torch.Size) else a for a in args])
    finally:
        _mend_fold.active = False
    return out.tolist() if isinstance(out, torch.Tensor) else out


# torch before 2.13 fails while tracing where a module is handed to assume_constant_result (see _mend_constant)
_mend_fold.active = tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 13)
''',
    "_mend_constant": '''
@torch._dynamo.assume_constant_result
def _mend_constant(fn, *args):
    """``fn(*args)``, a method computed only from Python values and the model's config, run while
    torch.compile traces: its results, tensors included, become constants of the graph (added by mend fix).
    ``_mend_constant.active`` tells the method to run its original code."""
    _mend_constant.active = True
    try:
        return fn(*args)
    finally:
        _mend_constant.active = False


# torch before 2.13 fails while tracing (InternalTorchDynamoError: a module is not a constant) where a module
# is handed to assume_constant_result: there the method runs as written, its breaks stay
_mend_constant.active = tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 13)
''',
    "_mend_captured": '''
def _mend_captured(fn):
    """``fn()``; while torch.compile traces, the tensor values it turns into Python numbers and its
    operators with data-dependent output shapes are captured in the graph as symbolic values instead
    of breaking it, for this call only (added by mend fix). Eager: just ``fn()``."""
    if not torch.compiler.is_compiling():
        if fn.__code__ not in _mend_captured.eager:  # run eagerly: Dynamo compiles no frame of its own for
            _mend_captured.eager.add(fn.__code__)     # the expression, as for the original's inline code
            getattr(torch._dynamo.eval_frame, "skip_code", id)(fn.__code__)
        return fn()
    if not hasattr(torch._dynamo, "patch_dynamo_config"):  # an older torch: the expression breaks as before
        return fn()
    old = _mend_capture_frame((True, True))
    with torch._dynamo.patch_dynamo_config(capture_scalar_outputs=True):
        out = fn()
    _mend_capture_frame(old)
    return out


@torch._dynamo.assume_constant_result
def _mend_capture_frame(flags):
    """Set the traced frame's scalar and dynamic-shape capture to ``flags``; returns the old pair. Runs
    while Dynamo traces: the frame's ShapeEnv reads these settings at each data-dependent operator. The
    backend traces the frame's graph again (AOTAutograd, so Inductor) with the same ShapeEnv after Dynamo
    is done: capture is on again for that, or the captured operators fail there."""
    import dataclasses

    from torch._dynamo.symbolic_convert import InstructionTranslator
    from torch._guards import TracingContext

    try:
        env = TracingContext.get().fake_mode.shape_env
        old = (env.settings.allow_scalar_outputs, env.settings.allow_dynamic_output_shape_ops)
        env.settings = dataclasses.replace(env.settings, allow_scalar_outputs=flags[0],
                                           allow_dynamic_output_shape_ops=flags[1])
        output = InstructionTranslator.current_tx().output
    except Exception:  # another torch layout: no capture, the operator breaks the graph as before
        return flags
    backend = getattr(output, "compiler_fn", None)
    if backend is not None and not getattr(backend, "_mend_capture", False):
        output.compiler_fn = _mend_capture_backend(backend, env)
    return old


def _mend_capture_backend(backend, env):
    """``backend`` compiling a frame with captured values (added by mend fix): capture on while it traces the
    graph again, and a failure there (an operator that must guard on a captured value, say) a fallback
    Dynamo knows (a graph break: the frame runs as it would without the compiled graph), not a crash."""
    import dataclasses

    from torch._subclasses.fake_tensor import DataDependentOutputException

    def compile_with_capture(gm, example_inputs, *args, **kwargs):
        env.settings = dataclasses.replace(env.settings, allow_scalar_outputs=True,
                                           allow_dynamic_output_shape_ops=True)
        try:
            return backend(gm, example_inputs, *args, **kwargs)
        except Exception as exc:
            if isinstance(exc, IndexError) or type(exc).__name__ in _mend_capture_backend.passed:
                raise
            raise DataDependentOutputException(torch.ops.aten._local_scalar_dense.default) from exc

    compile_with_capture._mend_capture = True
    compile_with_capture.__name__ = getattr(backend, "__name__", "backend")
    return compile_with_capture


# exceptions Dynamo handles itself around a backend (a restart, a skipped frame): passed on as they are
_mend_capture_backend.passed = frozenset({"ShortenTraceback", "TensorifyScalarRestartAnalysis", "SkipFrame"})


# A frame of the helper itself is never compiled on its own (it runs where the original expression ran).
_mend_captured.eager = {_mend_captured.__code__}
getattr(torch._dynamo.eval_frame, "skip_code", id)(_mend_captured.__code__)
''',
    "_mend_tensor_check": '''
def _mend_tensor_check(fn):
    """``fn()``, a tensor check (``torch._check_tensor_all``); under torch.compile on torch 2.13 and later its
    value is captured for the call (``_mend_captured``), so the check stays in the graph as a runtime assert
    (added by mend fix). Earlier torch loses the captured value (``PendingUnbackedSymbolNotFound``): there the
    check runs as written."""
    if _mend_tensor_check.active:
        return _mend_captured(fn)
    return fn()


_mend_tensor_check.active = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 13)
''',
    "_mend_rnn": '''
def _mend_rnn(fn):
    """``fn()``, a call of an ``nn.LSTM``/``GRU``/``RNN``; while torch.compile traces it, Dynamo's
    ``allow_rnn`` is on for this call only, so the recurrent layer is in the graph (added by mend fix)."""
    if not torch.compiler.is_compiling():
        if fn.__code__ not in _mend_rnn.eager:  # run eagerly: Dynamo compiles no frame of its own for it
            _mend_rnn.eager.add(fn.__code__)
            getattr(torch._dynamo.eval_frame, "skip_code", id)(fn.__code__)
        return fn()
    old = _mend_rnn_flag(True)
    out = fn()
    _mend_rnn_flag(old)
    return out


@torch._dynamo.assume_constant_result
def _mend_rnn_flag(on):
    """Set ``torch._dynamo.config.allow_rnn``; returns the old value. Runs while Dynamo traces (Dynamo reads
    the flag when it meets the module), so the setting outside tracing never changes."""
    old = getattr(torch._dynamo.config, "allow_rnn", False)
    if hasattr(torch._dynamo.config, "allow_rnn"):
        torch._dynamo.config.allow_rnn = on
    return old


_mend_rnn.eager = {_mend_rnn.__code__}
getattr(torch._dynamo.eval_frame, "skip_code", id)(_mend_rnn.__code__)
''',
    "_mend_index": '''
def _mend_index(t):
    """A slice bound (added by mend fix): eager hands on ``t`` itself; under torch.compile the number of a
    one-element tensor, captured as a symbol (``_mend_captured``), so the slice stays in the graph."""
    if torch.compiler.is_compiling() and isinstance(t, torch.Tensor):
        return _mend_captured(lambda: t.item())
    return t
''',
    "_mend_keep_values": '''
def _mend_keep_values(t, values):
    """``t``, an int64 or int32 tensor built from the Python numbers ``values``, with a copy of them (nested
    tuples) for ``_mend_kept`` (added by mend fix). Kept only where every number is a Python int and the
    nesting matches ``t``'s shape, so the copy holds exactly the tensor's values (an int32 tensor of a number
    out of its range is never built: the constructor raises)."""

    def rows(v, shape):
        if not shape:
            return v if type(v) is int or isinstance(v, torch.SymInt) else None
        if not isinstance(v, (list, tuple)) or len(v) != shape[0]:
            return None
        out = tuple(rows(x, shape[1:]) for x in v)
        return None if any(x is None for x in out) else out

    kept = rows(values, tuple(t.shape)) if t.dtype in (torch.int64, torch.int32) and t.dim() > 0 else None
    if kept is not None:
        t._mend_values = kept
    return t
''',
    "_mend_arange": '''
def _mend_arange(*bounds, **kwargs):
    """``torch.arange(*bounds, **kwargs)`` with a copy of its numbers (a ``_MendSpan``) for ``_mend_kept``
    (added by mend fix). Kept only for ``arange(n)``/``arange(a, b)`` of Python ints with an int64 result,
    so the copy holds exactly the tensor's values."""
    t = torch.arange(*bounds, **kwargs)
    if t.dtype == torch.int64 and len(bounds) <= 2 and all(type(b) is int for b in bounds):
        t._mend_values = _MendSpan(t, bounds[0] if len(bounds) == 2 else 0, t.shape[0])
    return t


class _MendSpan:
    """The numbers of ``torch.arange(start, start + n)`` as Python numbers (added by mend fix): an index
    gives ``start + i``, a negative one counts from the end, one out of range raises ``IndexError``, any
    other index reads the tensor. Sizes may be symbolic under torch.compile: nothing here specializes them
    (a ``range`` would, one compile per length)."""

    def __init__(self, t, start, n):
        self.t, self.start, self.n = t, start, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if type(i) is not int:
            return self.t[i]
        if not -self.n <= i < self.n:
            raise IndexError(f"index {i} is out of bounds for dimension 0 with size {self.n}")
        return self.start + (i if i >= 0 else self.n + i)

    def __iter__(self):
        return iter([self.start + i for i in range(self.n)])
''',
    "_mend_kept": '''
def _mend_kept(t, dims):
    """While torch.compile traces: the Python numbers a ``dims``-dimensional tensor ``t`` was built from,
    where ``_mend_keep_values`` or ``_mend_arange`` kept them, read as constants; else, and always in
    eager, ``t`` itself (added by mend fix). Eager runs the original code on the tensor."""
    if not torch.compiler.is_compiling():
        return t
    kept = getattr(t, "_mend_values", None)
    return t if kept is None or t.dim() != dims else kept
''',
    "_mend_any": '''
def _mend_any(t, every=False):
    """``any(t)`` (``all(t)`` with ``every``) as a bool tensor where ``t`` is a 1-D tensor: ``torch.any`` /
    ``torch.all``, which read its numbers as Python's does (added by mend fix). Any other ``t`` goes to
    Python's ``any``/``all``, as before, its answer as a bool tensor (a 0-d tensor raises TypeError there,
    rows of several numbers RuntimeError; decided while tracing)."""
    if isinstance(t, torch.Tensor) and t.dim() == 1:
        return torch.all(t) if every else torch.any(t)
    return torch.as_tensor(all(t) if every else any(t))
''',
    "_mend_where": '''
def _mend_where(cond, new, old):
    """``new if cond else old`` as tensor ops while torch.compile traces (added by mend fix).

    torch.where when both sides are tensors of one shape, dtype and device and the condition is one
    element; tuples and lists of one length element by element, None on both sides as it is; all
    decided while tracing; otherwise the original selection (a graph break there)."""
    if isinstance(cond, torch.Tensor) and cond.numel() == 1:
        if (isinstance(new, torch.Tensor) and isinstance(old, torch.Tensor) and new.shape == old.shape
                and new.dtype == old.dtype and new.device == old.device):
            return torch.where(cond.reshape(()), new, old)
        if type(new) in (tuple, list) and type(old) is type(new) and len(new) == len(old):
            return type(new)(_mend_where(cond, a, b) for a, b in zip(new, old))
        if new is None and old is None:
            return None
    return new if cond else old  # noqa: MND201
''',
    "_mend_mask_if": '''
def _mend_mask_if(cond, mask):
    """The elements of the bool tensor ``mask`` where the test ``cond`` holds, none where it fails (added by
    mend fix): ``if cond: t[mask] = v`` stores ``t[_mend_mask_if(cond, mask)] = v`` on every path while
    torch.compile traces. A one-element tensor test is combined with ``torch.logical_and``; any other test
    is asked as the original ``if`` asks it (a graph break there, or its error)."""
    if isinstance(cond, torch.Tensor) and cond.numel() == 1:
        return torch.logical_and(cond.reshape(()), mask)
    return mask if cond else torch.zeros_like(mask)  # noqa: MND201
''',
    "_mend_same": '''
def _mend_same(cond, new, old):
    """``new if cond else old`` for a Python value such as a dtype (added by mend fix): ``old`` when
    ``new`` is the same object, decided while torch.compile traces, so no selection is needed;
    otherwise the original selection (a graph break there)."""
    if new is old:
        return old
    return new if cond else old  # noqa: MND201
''',
    "_mend_elif": '''
def _mend_elif(taken, cond):
    """The condition of an ``elif`` whose earlier branches were ``taken`` (added by mend fix).

    One tensor op when both are one element, decided while tracing; otherwise as Python asks: the
    truth of ``taken``, then the truth of ``cond`` only where no earlier branch was taken (an
    ambiguous many-element condition raises exactly where the original raises)."""
    if taken.numel() == 1 and cond.numel() == 1:
        return torch.logical_and(torch.logical_not(taken.reshape(())), cond.reshape(()))
    if taken:  # noqa: MND201
        return torch.zeros((), dtype=torch.bool, device=cond.device)
    return torch.full((), bool(cond), dtype=torch.bool, device=cond.device)
''',
    "_mend_truth": '''
def _mend_truth(cond):
    """Ask for the truth of ``cond`` where that can fail, as the original ``if`` does (added by mend fix):
    a tensor of more than one element, or of none, raises as in eager. Decided while tracing: a
    one-element condition costs nothing."""
    if isinstance(cond, torch.Tensor) and cond.numel() != 1:
        bool(cond)  # noqa: MND302
''',
    "_mend_emit": """
def _mend_emit(module, spec, *args):
    \"\"\"Make the reporting call ``spec`` names (``logger.info``, ``print``: a global of the module named
    ``module``, or a builtin) from compiled code, with ``args`` (added by mend fix).

    Through the ordered-effect operator ``torch.ops.mend.emit`` the call runs inside the compiled graph
    where it stood, on every call, also from an inlined submodule or helper. An argument the operator
    cannot carry (a tensor that requires grad, whose text would lose its ``grad_fn``; another object)
    makes the call as written instead, at a graph break. ``spec``: the callee, then ``:name`` for each
    keyword argument (their values end ``args``), then `` i.view`` for argument ``i``: ``shape``,
    ``tuple``, ``list`` (a tensor whose shape is reported), ``global`` (the name of a builtin or imported
    object), ``format.N`` (a ``str.format`` template of the next ``N`` arguments), ``when`` (a condition:
    the call is made only where it holds; it is not an argument).\"\"\"
    packed = _mend_emit_pack(spec, args)
    if packed is None:
        _mend_emit_now(module, spec, *args)  # noqa: MND504 - only for what the graph cannot carry
    else:
        torch.ops.mend.emit(module, *packed)


def _mend_emit_pack(spec, args):
    \"\"\"``(spec, strs, ints, floats, tensors)``: ``args`` as the operator's lists, their kinds appended to
    ``spec`` after ``|``; None where one cannot travel. Runs while Dynamo traces.\"\"\"
    views = dict(v.split(".", 1) for v in spec.split(" ")[1:])
    kinds, strs, ints, floats, tensors = [], [], [], [], []
    for i, a in enumerate(args):
        if views.get(str(i)) in ("shape", "tuple", "list"):
            dims = list(a.shape)
            kinds.append("S" + str(len(dims)))
            ints.extend(dims)
        elif isinstance(a, str):
            kinds.append("s")
            strs.append(a)
        elif isinstance(a, torch.Tensor):
            if a.requires_grad and torch.is_grad_enabled() and views.get(str(i)) != "when":
                return None
            kinds.append("t")
            tensors.append(a)
        elif isinstance(a, bool):
            kinds.append("b")
            ints.append(int(a))
        elif isinstance(a, int):
            kinds.append("i")
            ints.append(a)
        elif isinstance(a, float):
            kinds.append("f")
            floats.append(a)
        elif a is None:
            kinds.append("n")
        else:
            return None
    return spec + "|" + ",".join(kinds), strs, ints, floats, tensors


def _mend_emit_run(module, spec, strs, ints, floats, tensors):
    \"\"\"The operator's body, run by the compiled graph: the arguments rebuilt, then the call.\"\"\"
    spec, kinds = spec.split("|")
    pools = {"s": iter(strs), "i": iter(ints), "f": iter(floats), "t": iter(tensors)}
    args = []
    for kind in filter(None, kinds.split(",")):
        if kind[0] == "S":
            args.append(torch.Size([next(pools["i"]) for _ in range(int(kind[1:]))]))
        elif kind in ("b", "n"):
            args.append(bool(next(pools["i"])) if kind == "b" else None)
        else:
            args.append(next(pools[kind]))
    _mend_emit_call(module, spec, args)


@torch.compiler.disable
def _mend_emit_now(module, spec, *args):
    \"\"\"The call as written, outside the graph (Dynamo breaks the graph here).\"\"\"
    views = dict(v.split(".", 1) for v in spec.split(" ")[1:])
    shaped = {"shape", "tuple", "list"}
    _mend_emit_call(module, spec, [a.shape if views.get(str(i)) in shaped else a for i, a in enumerate(args)])


def _mend_emit_call(module, spec, args):
    \"\"\"The reporting call of ``spec`` with ``args`` (shapes already taken), its views applied.\"\"\"
    import builtins
    import sys
    import warnings as w

    scope = vars(torch.ops.mend).get("scopes", {}).get(module) or vars(sys.modules[module])

    def find(name):
        head, *path = name.split(".")
        obj = scope[head] if head in scope else getattr(builtins, head)
        for part in path:
            obj = getattr(obj, part)
        return obj

    call, *views = spec.split(" ")
    name, *keywords = call.split(":")
    args = list(args)
    for view in sorted(views, key=lambda v: -int(v.split(".")[0])):  # right to left: indices stay valid
        i, how = view.split(".", 1)
        i = int(i)
        if how == "when":
            if not bool(args.pop(i)):
                return
        elif how == "global":
            args[i] = find(args[i])
        elif how in ("tuple", "list"):
            args[i] = tuple(args[i]) if how == "tuple" else list(args[i])
        elif how.startswith("format."):
            n = int(how.split(".")[1])
            args[i : i + n + 1] = [args[i].format(*args[i + 1 : i + n + 1])]
    cut = len(args) - len(keywords)
    args, kwargs = args[:cut], dict(zip(keywords, args[cut:]))
    name, _, line = name.partition("@")
    fn = find(name)
    if fn is w.warn and line:  # attributed to the call's own line, as the original call was
        category = kwargs.get("category", args[1] if len(args) > 1 else None)
        w.warn_explicit(args[0], category or UserWarning, scope.get("__file__", module), int(line), module,
                        scope.setdefault("__warningregistry__", {}), scope)
        return
    fn(*args, **kwargs)


def _mend_emit_define(module, scope):
    \"\"\"``torch.ops.mend.emit``, defined once per process (every repaired file shares it) and registered as an
    ordered effect: compilers keep it, in program order, and run it on every call. ``scope``: the globals of
    ``module``, where its calls find their callee (also for a module loaded outside ``sys.modules``).\"\"\"
    vars(torch.ops.mend).setdefault("scopes", {})[module] = scope
    try:
        return torch.ops.mend.emit.default
    except (AttributeError, RuntimeError):
        pass
    torch.library.custom_op("mend::emit", _mend_emit_run, mutates_args=(), schema=(
        "(str module, str spec, str[] strs, SymInt[] ints, float[] floats, Tensor[] tensors) -> ()"))
    torch.library.register_fake("mend::emit", lambda *args: None)
    from torch._higher_order_ops import effects

    effects._register_effectful_op(torch.ops.mend.emit.default, effects._EffectType.ORDERED)
    return torch.ops.mend.emit.default


_mend_emit_define(__name__, globals())
""",
    "_mend_restore_exceptions": '''
def _mend_restore_exceptions(compiled):
    """Re-raise checks that mend moved into the graph with their original exception type and
    message (added by mend fix). Wraps a compiled function, or a compiled module in place."""
    import builtins
    import functools

    def restored(exc):
        # Only the check's own error: a plain RuntimeError whose message is the marker, never an
        # error that merely quotes the source line holding it (Dynamo's "from user code" trailer).
        text = str(exc)
        end = text.find("] ")
        if type(exc) is not RuntimeError or not text.startswith("[mend:") or end < 0:
            return None
        name = text[6:end]
        cls = getattr(builtins, name, None) if name.isidentifier() else None
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            return None
        return cls(text[end + 2 :])

    if getattr(compiled, "_mend_restoring", False):
        return compiled
    if isinstance(compiled, torch.nn.Module):
        base = type(compiled)

        def __call__(self, *args, **kwargs):
            try:
                return base.__call__(self, *args, **kwargs)
            except RuntimeError as exc:
                new = restored(exc)
                if new is None:
                    raise
                raise new from None

        compiled.__class__ = type(base.__name__, (base,), {"__call__": __call__, "_mend_restoring": True})
        return compiled

    @functools.wraps(compiled)
    def wrapper(*args, **kwargs):
        try:
            return compiled(*args, **kwargs)
        except RuntimeError as exc:
            new = restored(exc)
            if new is None:
                raise
            raise new from None

    wrapper._mend_restoring = True
    return wrapper
''',
}


def _top_level_defs(module: cst.Module) -> set[str]:
    return {s.name.value for s in module.body if isinstance(s, cst.FunctionDef)}


def _is_import_line(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
    )


def insert_helpers(module: cst.Module, names: list[str]) -> cst.Module:
    """Add the named helpers after the last top-level import (once per file)."""
    present = _top_level_defs(module)
    wanted = [n for n in names if n not in present]
    if not wanted:
        return module
    body = list(module.body)
    idx = 0
    for i, stmt in enumerate(body):
        if _is_import_line(stmt):
            idx = i + 1
        elif isinstance(stmt, cst.If) and all(_is_import_line(s) for s in stmt.body.body if True):
            # ``if TYPE_CHECKING:`` import blocks count as part of the imports
            if i == idx:
                idx = i + 1
    new_defs = []
    for name in wanted:
        stmts = list(cst.parse_module(HELPER_SOURCES[name].strip() + "\n").body)
        assert isinstance(stmts[0], cst.FunctionDef) and stmts[0].name.value == name
        stmts[0] = stmts[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
        new_defs.extend(stmts)
    if idx < len(body):
        nxt = body[idx]
        if hasattr(nxt, "leading_lines"):
            body[idx] = nxt.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()] + [
                ln for ln in nxt.leading_lines if ln.comment is not None
            ])
    body[idx:idx] = new_defs
    return module.with_changes(body=body)
