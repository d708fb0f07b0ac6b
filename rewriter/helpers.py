"""The functions repaired code calls (``_mend_where``, ``_mend_captured``, ...): real code, run in the user's program.

A repair that needs more than the changed lines calls one of these under a private name, ``_mend_<name>``
(``_mend_any`` and ``_mend_elif`` are ``any_`` and ``elif_`` here: a builtin and a keyword). By default
``mend fix`` copies the ones a tree needs into one module of the repaired tree, ``_mend.py`` at the top of
its package (or beside loose scripts), and the repaired files import them from it:
``from ._mend import where as _mend_where``; with ``--helpers=import`` they import them from here
(``from mend.rewriter.helpers import where as _mend_where``), and the code depends on mend. The import hook
(``mend run --repair``) always imports them from here. :mod:`mend.rewriter.helper_module` reads this file's
source to write the tree's copy: each function (and class), with the statements right after it, is one
unit; a unit that calls another brings it along. So every unit needs only ``torch`` from the module.

Each helper a repaired file calls is an ``eager_frame``: where Dynamo skips the frame that calls it, it runs
as Python, as the lines it stands for did, rather than as a compiled graph of its own.

This module imports torch: the static path (``mend check``, ``mend fix``) never imports it.
"""

import torch


def eager_frame(fn):
    """``fn`` (a decorator), whose code Dynamo never compiles as a frame of its own: called from code
    torch.compile traces, it is traced inline as before; called from code that runs as Python (a frame Dynamo
    skipped, a loop it fell back on), it runs as Python, as the original lines it stands for did, not as
    a compiled graph of its own on each call. ``fn`` may be a code object."""
    code = getattr(fn, "__code__", fn)
    frames = torch._C._dynamo.eval_frame
    try:
        skip, default = frames._FrameAction.SKIP, frames._FrameAction.DEFAULT
        frames.set_code_exec_strategy(code, frames._FrameExecStrategy(skip, default))
    except AttributeError:  # an older torch
        getattr(torch._dynamo.eval_frame, "skip_code", id)(code)
    return fn


eager_frame(eager_frame)  # it runs from the helpers' eager paths, while Dynamo may be compiling their callers


# --- data-dependent branches (MND201) ------------------------------------------------------------------


@eager_frame
def where(cond, new, old):
    """``new if cond else old`` as tensor ops while torch.compile traces.

    torch.where when both sides are tensors of one shape, dtype and device and the condition is one
    element; tuples and lists of one length element by element, None on both sides as it is; all
    decided while tracing; otherwise the original selection (a graph break there)."""
    if isinstance(cond, torch.Tensor) and cond.numel() == 1:
        if (isinstance(new, torch.Tensor) and isinstance(old, torch.Tensor) and new.shape == old.shape
                and new.dtype == old.dtype and new.device == old.device):
            return torch.where(cond.reshape(()), new, old)
        if type(new) in (tuple, list) and type(old) is type(new) and len(new) == len(old):
            return type(new)(where(cond, a, b) for a, b in zip(new, old))
        if new is None and old is None:
            return None
    return new if cond else old  # noqa: MND201


@eager_frame
def same(cond, new, old):
    """``new if cond else old`` for a Python value such as a dtype: ``old`` when
    ``new`` is the same object, decided while torch.compile traces, so no selection is needed;
    otherwise the original selection (a graph break there)."""
    if new is old:
        return old
    return new if cond else old  # noqa: MND201


@eager_frame
def elif_(taken, cond):
    """The condition of an ``elif`` whose earlier branches were ``taken``.

    One tensor op when both are one element, decided while tracing; otherwise as Python asks: the
    truth of ``taken``, then the truth of ``cond`` only where no earlier branch was taken (an
    ambiguous many-element condition raises exactly where the original raises)."""
    if taken.numel() == 1 and cond.numel() == 1:
        return torch.logical_and(torch.logical_not(taken.reshape(())), cond.reshape(()))
    if taken:  # noqa: MND201
        return torch.zeros((), dtype=torch.bool, device=cond.device)
    return torch.full((), bool(cond), dtype=torch.bool, device=cond.device)


@eager_frame
def truth(cond):
    """Ask for the truth of ``cond`` where that can fail, as the original ``if`` does:
    a tensor of more than one element, or of none, raises as in eager. Decided while tracing: a
    one-element condition costs nothing."""
    if isinstance(cond, torch.Tensor) and cond.numel() != 1:
        bool(cond)  # noqa: MND302


@eager_frame
def any_(t, every=False):
    """``any(t)`` (``all(t)`` with ``every``) as a bool tensor where ``t`` is a 1-D tensor: ``torch.any`` /
    ``torch.all``, which read its numbers as Python's does. Any other ``t`` goes to
    Python's ``any``/``all``, as before, its answer as a bool tensor (a 0-d tensor raises TypeError there,
    rows of several numbers RuntimeError; decided while tracing)."""
    if isinstance(t, torch.Tensor) and t.dim() == 1:
        return torch.all(t) if every else torch.any(t)
    return torch.as_tensor(all(t) if every else any(t))


@eager_frame
def mask_if(cond, mask):
    """The elements of the bool tensor ``mask`` where the test ``cond`` holds, none where it fails: ``if cond:
    t[mask] = v`` stores ``t[_mend_mask_if(cond, mask)] = v`` on every path while torch.compile traces. A one-element tensor test is combined with ``torch.logical_and``; any other test
    is asked as the original ``if`` asks it (a graph break there, or its error)."""
    if isinstance(cond, torch.Tensor) and cond.numel() == 1:
        return torch.logical_and(cond.reshape(()), mask)
    return mask if cond else torch.zeros_like(mask)  # noqa: MND201


@eager_frame
def tensor_equal(a, b):
    """``torch.equal(a, b)`` as a bool tensor; shapes and dtypes are compared statically."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return torch.zeros((), dtype=torch.bool, device=a.device)
    return (a == b).all()


def _keep_run(t):
    """The body of ``torch.ops.mend.keep``: nothing (its use is that it reads ``t``)."""


def _keep_define():
    """``torch.ops.mend.keep(t)``, defined once per process and registered as an ordered effect: compilers
    keep it, and so the operator that made ``t``, though nothing else reads ``t``."""
    try:
        return torch.ops.mend.keep.default
    except (AttributeError, RuntimeError):
        pass
    torch.library.custom_op("mend::keep", _keep_run, mutates_args=(), schema="(Tensor t) -> ()")
    torch.library.register_fake("mend::keep", lambda t: None)
    from torch._higher_order_ops import effects

    effects._register_effectful_op(torch.ops.mend.keep.default, effects._EffectType.ORDERED)
    return torch.ops.mend.keep.default


@eager_frame
def drawn(t):
    """``t``, a random draw the code may leave unread (a LayerDrop draw whose test Python decides on the
    configured probability). A compiled graph drops an operator nothing reads, and the random stream after
    it would move; under torch.compile an ordered effect reads ``t``, so the graph draws it where eager
    does. Eager: ``t``."""
    if torch.compiler.is_compiling():
        torch.ops.mend.keep(t)
    return t


_keep_define()


@eager_frame
def layer_drop(drop, kept, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, the call of a layer LayerDrop may skip, whose first output becomes ``kept`` (the
    layer's input) where ``drop`` holds: the compiled form of skipping the layer. ``drop`` is the LayerDrop
    test, a one-element bool tensor under compile (``torch.where`` selects, decided while tracing) or False
    (eager, the configuration without LayerDrop): then the call as written. An output whose shape, dtype or
    device is not the input's is selected as Python does (a graph break there, never another value)."""
    out = fn(*args, **kwargs)
    if not isinstance(drop, torch.Tensor) and not drop:
        return out
    first = out[0] if isinstance(out, tuple) else out
    if (isinstance(drop, torch.Tensor) and drop.numel() == 1 and isinstance(first, torch.Tensor)
            and isinstance(kept, torch.Tensor) and first.shape == kept.shape and first.dtype == kept.dtype
            and first.device == kept.device):
        chosen = torch.where(drop.reshape(()), kept, first)
    else:
        chosen = kept if drop else first  # noqa: MND201
    return (chosen, *out[1:]) if isinstance(out, tuple) else chosen


# --- masked reductions and stores, routed rows (MND304, MND305) ---------------------------------------


@eager_frame
def masked_sum(t, mask):
    """``t[mask].sum()`` with a static shape under torch.compile; eager runs the original."""
    if not torch.compiler.is_compiling():
        return t[mask].sum()  # noqa: MND305
    mask = mask.reshape(mask.shape + (1,) * (t.dim() - mask.dim()))
    return torch.where(mask, t, torch.zeros((), dtype=t.dtype, device=t.device)).sum()


@eager_frame
def masked_mean(t, mask):
    """``t[mask].mean()`` with a static shape under torch.compile; eager, and a dtype ``mean()`` rejects,
    run the original."""
    if not torch.compiler.is_compiling() or not (t.is_floating_point() or t.is_complex()):
        return t[mask].mean()  # noqa: MND305
    count = mask.sum() * (t.numel() // max(mask.numel(), 1))
    mask = mask.reshape(mask.shape + (1,) * (t.dim() - mask.dim()))
    return torch.where(mask, t, torch.zeros((), dtype=t.dtype, device=t.device)).sum() / count


@eager_frame
def mask_update(t, op, mask, value):
    """``t[mask] op= value`` (``op``: ``"+"``, ``"-"``, ``"*"``, ``"/"``; ``value`` a Python number) without a
    data-dependent shape under torch.compile: the in-place op on a copy of every element, stored into ``t``
    where the boolean ``mask`` holds (``t.copy_(torch.where(...))``: in place, aliases see it). Eager, a mask
    that is not ``t``'s leading dimensions or on another device, a leaf that requires grad, and a dtype the
    in-place op could reject run the original (a graph break there)."""
    if (torch.compiler.is_compiling() and isinstance(t, torch.Tensor) and isinstance(mask, torch.Tensor)
            and mask.dtype == torch.bool and mask.shape == t.shape[:mask.dim()] and mask.device == t.device
            and not (t.requires_grad and t.is_leaf)
            and (t.is_floating_point() or t.is_complex() or (
                op != "/" and t.dtype != torch.bool and type(value) is int))
            and _mask_op_finite(t, op, value)):
        updated = _mask_op(t.clone(), op, value)
        mask = mask.reshape(mask.shape + (1,) * (t.dim() - mask.dim()))
        t.copy_(torch.where(mask, updated, t))
        return
    part = t[mask]  # noqa: MND305 - the original statement, as Python runs `t[mask] op= value`
    part = _mask_op(part, op, value)
    t[mask] = part


def _mask_op_finite(t, op, value):
    """Whether ``value`` (and, for ``/``, its inverse) is a finite nonzero number of ``t``'s dtype: the backward of
    the op on the unmasked elements multiplies zeros by it, and inf (or a 0 it rounds to) would make them NaN."""
    if not (t.is_floating_point() or t.is_complex()) or op in ("+", "-"):
        return True
    info = torch.finfo(t.dtype)
    size = abs(value)
    if op == "*":
        return size <= info.max
    return info.tiny <= size <= info.max and 1 / size <= info.max


def _mask_op(a, op, value):
    """``a op= value`` (the in-place operator of ``t[mask] op= value``)."""
    if op == "+":
        a += value
    elif op == "-":
        a -= value
    elif op == "*":
        a *= value
    else:
        a /= value
    return a


@eager_frame
def routed_store(t, mask, rows):
    """``t[mask] = rows[mask]`` with a static shape: ``t`` keeps its values where the
    boolean ``mask`` is False and takes ``rows``' where it is True; an index tensor stores as before."""
    if mask.dtype != torch.bool:
        t[mask] = rows[mask]  # noqa: MND305 - an index tensor: no data-dependent shape
        return
    mask = mask.reshape(mask.shape + (1,) * (t.dim() - mask.dim()))
    t.copy_(torch.where(mask, rows, t))


@eager_frame
def grouped_rows(ids, modules, x):
    """Each row of ``x`` through the module its id picks from ``modules``, with static shapes : every module runs on every row, each row takes its own id's output. No rows: no runs to
    concatenate, an error as in the original."""
    if x.shape[0] == 0:
        torch.cat([], 0)
    outs = torch.stack([m(x) for m in modules], 0)
    return outs[ids.long(), torch.arange(x.shape[0], device=x.device)]


# --- numbers read from tensors: capture for one site (MND301-MND311), MND512 -------------------------


@eager_frame
def tolist_len(t):
    """``len(t.tolist())`` without the list: ``t.shape[0]``. The list of a 0-d
    tensor is a number, whose ``len()`` the original asks for (and raises there)."""
    if len(t.shape) == 0:
        return len(t.tolist())  # noqa: MND303
    return t.shape[0]


@eager_frame
def captured(fn):
    """``fn()``; while torch.compile traces, the tensor values it turns into Python numbers and its
    operators with data-dependent output shapes are captured in the graph as symbolic values instead
    of breaking it, for this call only. Eager: just ``fn()``."""
    if not torch.compiler.is_compiling():
        if id(fn.__code__) not in captured.eager:  # run eagerly: Dynamo compiles no frame of its own for
            # the expression, as for the original's inline code. By identity: Dynamo marks one code object,
            # and the same source loaded again (a reload) makes an equal one it has not marked.
            captured.eager[id(fn.__code__)] = fn.__code__
            eager_frame(fn)
        return fn()
    if not hasattr(torch._dynamo, "patch_dynamo_config"):  # an older torch: the expression breaks as before
        return fn()
    old = _capture_frame((True, True))
    with torch._dynamo.patch_dynamo_config(capture_scalar_outputs=True):
        out = fn()
    _capture_frame(old)
    return out


# A frame of the function itself is never compiled on its own (it runs where the original expression ran).
captured.eager = {id(captured.__code__): captured.__code__}


@torch._dynamo.assume_constant_result
def _capture_frame(flags):
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
        output.compiler_fn = _capture_backend(backend, env)
    return old


def _capture_backend(backend, env):
    """``backend`` compiling a frame with captured values: capture on while it traces the
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
            if isinstance(exc, IndexError) or type(exc).__name__ in _capture_backend.passed:
                raise
            raise DataDependentOutputException(torch.ops.aten._local_scalar_dense.default) from exc

    compile_with_capture._mend_capture = True
    compile_with_capture.__name__ = getattr(backend, "__name__", "backend")
    return compile_with_capture


# exceptions Dynamo handles itself around a backend (a restart, a skipped frame): passed on as they are
_capture_backend.passed = frozenset({"ShortenTraceback", "TensorifyScalarRestartAnalysis", "SkipFrame"})



@eager_frame
def index(t):
    """A slice bound: eager hands on ``t`` itself; under torch.compile on torch 2.13 and later the number of a
    one-element tensor, captured as a symbol (``captured``), so the slice stays in the graph. Earlier torch
    fails to store into a slice of captured bounds (``constrain_as_size_example``, torch 2.11: the break only
    moves to the store): there the bound is handed on as it is, and breaks as the original does."""
    if index.active and torch.compiler.is_compiling() and isinstance(t, torch.Tensor):
        return captured(lambda: t.item())
    return t


index.active = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 13)


@eager_frame
def tensor_check(fn):
    """``fn()``, a tensor check (``torch._check_tensor_all``); under torch.compile on torch 2.13 and later its
    value is captured for the call (``captured``), so the check stays in the graph as a runtime assert
   . Earlier torch loses the captured value (``PendingUnbackedSymbolNotFound``): there the
    check runs as written."""
    if tensor_check.active:
        return captured(fn)
    return fn()


tensor_check.active = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 13)


@eager_frame
def rnn(fn):
    """``fn()``, a call of an ``nn.LSTM``/``GRU``/``RNN``; while torch.compile traces it, Dynamo's
    ``allow_rnn`` is on for this call only, so the recurrent layer is in the graph."""
    if not torch.compiler.is_compiling():
        if fn.__code__ not in rnn.eager:  # run eagerly: Dynamo compiles no frame of its own for it
            rnn.eager.add(fn.__code__)
            eager_frame(fn)
        return fn()
    old = _rnn_flag(True)
    out = fn()
    _rnn_flag(old)
    return out


rnn.eager = {rnn.__code__}


@torch._dynamo.assume_constant_result
def _rnn_flag(on):
    """Set ``torch._dynamo.config.allow_rnn``; returns the old value. Runs while Dynamo traces (Dynamo reads
    the flag when it meets the module), so the setting outside tracing never changes."""
    old = getattr(torch._dynamo.config, "allow_rnn", False)
    if hasattr(torch._dynamo.config, "allow_rnn"):
        torch._dynamo.config.allow_rnn = on
    return old



# --- sizes as Python numbers: folded methods, kept copies (MND310, MND311) -----------------------------


@eager_frame
@torch._dynamo.assume_constant_result
def fold(fn, *args):
    """``fn(*args)`` run while torch.compile traces, on the real buffers, its 0-d tensor result handed on as a
    Python number. A ``torch.Size`` argument stands for a tensor ``fn`` reads only the
    shape of. ``fold.active`` tells a folded method to run its original code."""

    class _Shaped:
        def __init__(self, shape):
            self.shape = shape

        def size(self, dim=None):
            return self.shape if dim is None else self.shape[dim]

        def dim(self):
            return len(self.shape)

    fold.active = True
    try:
        out = fn(*[_Shaped(a) if isinstance(a, torch.Size) else a for a in args])
    finally:
        fold.active = False
    return out.tolist() if isinstance(out, torch.Tensor) else out


# torch before 2.13 fails while tracing where a module is handed to assume_constant_result (see constant)
fold.active = tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 13)


@eager_frame
@torch._dynamo.assume_constant_result
def constant(fn, *args):
    """``fn(*args)``, a method computed only from Python values and the model's config, run while
    torch.compile traces: its results, tensors included, become constants of the graph.
    ``constant.active`` tells the method to run its original code."""
    constant.active = True
    try:
        return fn(*args)
    finally:
        constant.active = False


# torch before 2.13 fails while tracing (InternalTorchDynamoError: a module is not a constant) where a module
# is handed to assume_constant_result: there the method runs as written, its breaks stay
constant.active = tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 13)


@eager_frame
def keep_values(t, values):
    """``t``, an int64 or int32 tensor built from the Python numbers ``values``, with a copy of them (nested
    tuples) for ``kept``. Kept only where every number is a Python int and the
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


@eager_frame
def arange(*bounds, **kwargs):
    """``torch.arange(*bounds, **kwargs)`` with a copy of its numbers (a ``_Span``) for ``kept``
   . Kept only for ``arange(n)``/``arange(a, b)`` of Python ints with an int64 result,
    so the copy holds exactly the tensor's values."""
    t = torch.arange(*bounds, **kwargs)
    if t.dtype == torch.int64 and len(bounds) <= 2 and all(type(b) is int for b in bounds):
        t._mend_values = _Span(t, bounds[0] if len(bounds) == 2 else 0, t.shape[0])
    return t


class _Span:
    """The numbers of ``torch.arange(start, start + n)`` as Python numbers: an index
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


@eager_frame
def kept(t, dims):
    """While torch.compile traces: the Python numbers a ``dims``-dimensional tensor ``t`` was built from,
    where ``keep_values`` or ``arange`` kept them, read as constants; else, and always in
    eager, ``t`` itself. Eager runs the original code on the tensor."""
    if not torch.compiler.is_compiling():
        return t
    kept = getattr(t, "_mend_values", None)
    return t if kept is None or t.dim() != dims else kept


# --- output kept under compile (MND101-MND103), checks moved into the graph (MND203) -------------------


def _emit_pack(spec, args):
    """``(spec, strs, ints, floats, tensors)``: ``args`` as the operator's lists, their kinds appended to
    ``spec`` after ``|``; None where one cannot travel. Runs while Dynamo traces."""
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


def _emit_run(module, spec, strs, ints, floats, tensors):
    """The operator's body, run by the compiled graph: the arguments rebuilt, then the call."""
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
    _emit_call(module, spec, args)


@torch.compiler.disable
def _emit_now(module, spec, *args):
    """The call as written, outside the graph (Dynamo breaks the graph here)."""
    views = dict(v.split(".", 1) for v in spec.split(" ")[1:])
    shaped = {"shape", "tuple", "list"}
    _emit_call(module, spec, [a.shape if views.get(str(i)) in shaped else a for i, a in enumerate(args)])


def _emit_call(module, spec, args):
    """The reporting call of ``spec`` with ``args`` (shapes already taken), its views applied. The callee is
    found in the module named ``module`` (its globals, or a builtin)."""
    import builtins
    import sys
    import warnings as w

    # a file repaired by an older mend registered its globals itself (``scopes``); else the module by its name
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


def _emit_define():
    """``torch.ops.mend.emit``, defined once per process (every helper module shares it) and registered as an
    ordered effect: compilers keep it, in program order, and run it on every call."""
    try:
        return torch.ops.mend.emit.default
    except (AttributeError, RuntimeError):
        pass
    torch.library.custom_op("mend::emit", _emit_run, mutates_args=(), schema=(
        "(str module, str spec, str[] strs, SymInt[] ints, float[] floats, Tensor[] tensors) -> ()"))
    torch.library.register_fake("mend::emit", lambda *args: None)
    from torch._higher_order_ops import effects

    effects._register_effectful_op(torch.ops.mend.emit.default, effects._EffectType.ORDERED)
    return torch.ops.mend.emit.default


@eager_frame
def emit(module, spec, *args):
    """Make the reporting call ``spec`` names (``logger.info``, ``print``: a global of the module named
    ``module``, or a builtin) from compiled code, with ``args``.

    Through the ordered-effect operator ``torch.ops.mend.emit`` the call runs inside the compiled graph
    where it stood, on every call, also from an inlined submodule or helper. An argument the operator
    cannot carry (a tensor that requires grad, whose text would lose its ``grad_fn``; another object)
    makes the call as written instead, at a graph break. ``spec``: the callee, then ``:name`` for each
    keyword argument (their values end ``args``), then `` i.view`` for argument ``i``: ``shape``,
    ``tuple``, ``list`` (a tensor whose shape is reported), ``global`` (the name of a builtin or imported
    object), ``format.N`` (a ``str.format`` template of the next ``N`` arguments), ``when`` (a condition:
    the call is made only where it holds; it is not an argument)."""
    packed = _emit_pack(spec, args)
    if packed is None:
        _emit_now(module, spec, *args)  # noqa: MND504 - only for what the graph cannot carry
    else:
        spec, strs, ints, floats, tensors = packed
        # Inductor (torch 2.13, an inference graph) frees buffers at an effect operator that takes no
        # tensor, before the kernels after it read them: an empty tensor (its kinds never read it) goes along
        torch.ops.mend.emit(module, spec, strs, ints, floats, tensors or [torch.empty(0)])


_emit_define()


def restore_exceptions(compiled):
    """Re-raise checks that mend moved into the graph with their original exception type and
    message. Wraps a compiled function, or a compiled module in place."""
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
