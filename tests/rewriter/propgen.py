"""Hypothesis strategies that write small Python modules in the shapes ``mend fix`` repairs and declines.

A generated :class:`Program` is the source of one module whose compiled function is either
``M.forward`` of an ``nn.Module`` (a compiled region by default, see docs/check.md) or a function
decorated with ``@torch.compile(backend="eager")``. Its body is a few *blocks*, each one shape of
one fix family:

* data-dependent branches: ``if``/``elif``/``else`` with assignments (also of a dtype read beside
  the update, Zamba2's convolution; of the one buffer both sides register, LongRoPE's), branches
  that return,
  conditional expressions, nested ifs, augmented assignments, shape-changing sides (``torch.cat``,
  ``reshape``, slicing, reductions), tuple targets, submodule calls (``torch.cond``);
* conditions written every way the analyzer sees them: ``.sum() > k``, ``.any()``, ``.item()``,
  ``bool(...)``, through a local, ``not``, ``and``/``or`` chains with static parts (dtype, shape,
  ``mask is not None``), and per-element tensors (ambiguous truth value when they hold more than
  one element);
* side effects mixed in (``print``, ``logger.info``/``warning``, ``warnings.warn``), alone or as
  the whole body of an ``if`` on a tensor;
* validation ``raise ValueError("...")`` under a tensor condition, ``assert t.item() <= n``;
* Python scalars from tensors: ``.item()`` feeding arithmetic, ``max(n, c)``, ``float(t)``,
  ``len(t.tolist())``, masked reductions ``t[m].sum()``, ``copy.deepcopy(t)``;
* data-dependent sizes (scalar and dynamic-shape capture): a count from a tensor as a slice bound or a
  factory's size or a range's length, ``nonzero``, boolean-mask selection and stores, ``.tolist()`` counts
  as ``split`` sizes;
* sizes from a module's integer buffers (EnCodec's padding): ``F.pad`` by numbers computed from 0-d
  ``int64`` buffers registered in ``__init__`` and a method on the input's shape (module programs).
* what training adds: LayerDrop (a ``torch.rand`` draw per layer, the layer skipped below the configured
  probability, in the ``if`` and the conditional-expression forms), augmented stores through a boolean mask
  (``t[mask] += 1.0``), ``assert not torch.isnan(h).any()``.

Every function takes ``x`` and ``y`` (tensors; ``y`` may broadcast against ``x``) and, in some
programs, ``mask=None``. Names a block may read are tracked, so most programs run; some raise on
some inputs (an index into an empty tensor, a dtype an op rejects, a truth value of a many-element
tensor), which is part of what the differential runner compares.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

LOGGER = "mend_propgen"
WIDTH = 4  # the last dimension of x (and of nn.Linear(WIDTH, WIDTH))


@dataclass(frozen=True)
class Program:
    source: str
    kind: str  # "module": ``make()`` returns the nn.Module; "function": ``f`` is @torch.compile'd
    has_mask: bool
    blocks: tuple[str, ...]  # the block kinds, in order (for reports)

    def __str__(self) -> str:  # hypothesis prints the falsifying example with this
        return f"Program(kind={self.kind!r}, blocks={self.blocks})\n{self.source}"


@dataclass
class _Env:
    """What the function body may read at this point."""

    names: list[str]  # tensor names that are always bound
    kind: str
    has_mask: bool
    counter: int = 0
    imports: set[str] = field(default_factory=set)
    init: list[str] = field(default_factory=list)  # extra ``__init__`` lines (module programs)
    methods: list[str] = field(default_factory=list)  # extra methods (module programs)

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"


def _indent(lines: list[str], n: int = 1) -> list[str]:
    return ["    " * n + ln if ln else ln for ln in lines]


# --- expressions -----------------------------------------------------------------------------------

# New values for a name ``{n}``, with ``{o}`` another bound tensor name.
SAME_SHAPE = [
    "{n} + 1", "{n} - 1", "{n} * 2", "-{n}", "{n}.clamp(min=0)", "torch.clamp({n}, -1, 1)",
    "torch.nan_to_num({n})", "{n}.masked_fill({n} < 0, 0)", "{n}.abs()", "torch.relu({n})",
    "{n} / 2", "{n}.exp()", "torch.zeros_like({n})", "{n}.detach()", "{n} + {o}", "{n} - {o}",
    "{n} * {o}", "torch.maximum({n}, {o})",
]
CHANGES_DTYPE = ["{n} + 0.5", "{n}.float()", "{n}.half()", "{n}.to(torch.float64)", "{n}.long()", "{n} > 0"]
CHANGES_SHAPE = [
    "torch.cat([{n}, {o}], dim=0)", "torch.cat(({n}, {o}), dim=-1)", "{n}.reshape(-1)", "{n}[:1]",
    "{n}[1:]", "{n}[0]", "{n}.sum(0)", "{n}.sum(-1, keepdim=True)", "{n}.unsqueeze(0)",
    "{n}.repeat(2, 1)", "{n} + {o}[0]",
]
SUBMODULE = ["self.lin({n})", "torch.relu(self.lin({n}))", "self.lin({n}) + {n}"]

# Tensor conditions over ``{a}`` (and ``{b}``, another bound name): one element (SCALAR_CONDS), many
# elements (ELEMENT_CONDS: Python's truth value is ambiguous), a static test first (an `and` chain).
SCALAR_CONDS = [
    "{a}.sum() > 0", "{a}.sum() > 5", "{a}.mean() < 0", "({a} > 0).any()", "({a} > 0).all()",
    "{a}.max() > 1", "torch.isnan({a}).any()", "torch.isinf({a}).any() or torch.isnan({a}).any()",
    "{a}.sum().item() > 0", "{a}.sum().item() != 0", "{a}.abs().sum() > 10", "({a} > 0).sum() > 2",
    "not ({a}.sum() > 0)", "{a}.sum() > 0 and {b}.mean() < 1", "{a}.sum() > 0 or {b}.sum() < 0",
    "({a} == {a}).all()", "{a}[0, 0] > 0",
]
ELEMENT_CONDS = ["{a} > 0", "{a}.sum(-1) > 0", "{a}.abs()"]
STATIC_PREFIX_CONDS = [
    "{a}.dtype == torch.float16 and torch.isinf({a}).any()",
    "{a}.shape[0] > 1 and {a}.sum() > 0",
    "{a}.sum() > 0 and {a}.dim() == 2",
]
MASK_CONDS = ["mask is not None and mask.any()", "mask is not None and mask.sum() > 2"]

MESSAGES = ["tick", "large activations", "empty mask", "nan found"]


def _names2(env: _Env) -> st.SearchStrategy[tuple[str, str]]:
    return st.tuples(st.sampled_from(env.names), st.sampled_from(env.names))


@st.composite
def condition(draw, env: _Env, allow_local: bool = True) -> tuple[list[str], str]:
    """(lines computing it first, condition text)."""
    a, b = draw(_names2(env))
    pools = [SCALAR_CONDS, SCALAR_CONDS, ELEMENT_CONDS, STATIC_PREFIX_CONDS]
    if env.has_mask:
        pools.append(MASK_CONDS)
    text = draw(st.sampled_from(draw(st.sampled_from(pools)))).format(a=a, b=b)
    how = draw(st.sampled_from(["inline", "inline", "inline", "local", "bool", "item"] if allow_local
                               else ["inline"]))
    if how == "local":
        c = env.fresh("c")
        return [f"{c} = {text}"], c
    if how == "bool":
        return [], f"bool({text})"
    if how == "item":
        n = env.fresh("n")
        return [f"{n} = {a}.sum().item()"], f"{n} > 0"
    return [], text


@st.composite
def new_value(draw, env: _Env, n: str, submodules: bool = False) -> str:
    """A new value for ``n``: mostly of its shape and dtype, sometimes of another dtype or shape."""
    o = draw(st.sampled_from(env.names))
    pools = [SAME_SHAPE, SAME_SHAPE, SAME_SHAPE, CHANGES_DTYPE, CHANGES_SHAPE]
    if submodules and env.kind == "module":
        pools.append(SUBMODULE)
    return draw(st.sampled_from(draw(st.sampled_from(pools)))).format(n=n, o=o)


@st.composite
def side_effect(draw, env: _Env) -> str:
    a = draw(st.sampled_from(env.names))
    msg = draw(st.sampled_from(MESSAGES))
    env.imports.add("logging")
    form = draw(st.sampled_from(["print", "print_value", "info", "warning", "warn"]))
    if form == "print":
        return f'print("{msg}", tuple({a}.shape))'
    if form == "print_value":
        return f'print("{msg}", {a}.sum())'
    if form == "info":
        return f'logger.info("{msg} %s", tuple({a}.shape))'
    if form == "warning":
        return f'logger.warning("{msg}")'
    env.imports.add("warnings")
    return f'warnings.warn("{msg}")'


@st.composite
def branch_body(draw, env: _Env, targets: list[str], submodules: bool, depth: int) -> list[str]:
    """One to three statements of a branch that assigns (and sometimes does more)."""
    out: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        form = draw(st.sampled_from(
            ["assign"] * 6 + ["tuple", "aug", "pass", "effect", "raise"] + (["nested"] if depth < 1 else [])))
        t = draw(st.sampled_from(targets))
        if form == "assign":
            out.append(f"{t} = {draw(new_value(env, t, submodules=submodules))}")
        elif form == "tuple":
            u = draw(st.sampled_from(targets))
            out.append(f"{t}, {u} = {draw(new_value(env, t))}, {draw(new_value(env, u))}")
        elif form == "aug":
            out.append(f"{t} {draw(st.sampled_from(['+=', '-=', '*=']))} {draw(st.sampled_from(['1', '2', env.names[0]]))}")
        elif form == "pass":
            out.append("pass")
        elif form == "effect":
            out.append(draw(side_effect(env)))
        elif form == "raise":
            out.append(f'raise ValueError("{draw(st.sampled_from(MESSAGES))}")')
        else:
            pre, cond = draw(condition(env, allow_local=False))
            out += pre + [f"if {cond}:"] + _indent(draw(branch_body(env, targets, submodules, depth + 1)))
    return out


# --- blocks ----------------------------------------------------------------------------------------

@st.composite
def if_chain(draw, env: _Env) -> tuple[str, list[str]]:
    """``if``/``elif``/``else`` whose branches assign (SAM's pattern and its neighbours)."""
    lines: list[str] = []
    targets = list(env.names)
    new = None
    if draw(st.booleans()):  # a name first assigned in the branches
        new = env.fresh("t")
        targets.append(new)
    submodules = draw(st.booleans()) and env.kind == "module"
    pre, cond = draw(condition(env))
    lines += pre + [f"if {cond}:"] + _indent(draw(branch_body(env, targets, submodules, 0)))
    for _ in range(draw(st.integers(0, 2))):
        pre, cond = draw(condition(env, allow_local=False))
        lines += [f"elif {cond}:"] + _indent(draw(branch_body(env, targets, submodules, 0)))
    has_else = draw(st.booleans())
    if has_else:
        lines += ["else:"] + _indent(draw(branch_body(env, targets, submodules, 0)))
    if new is not None and has_else and draw(st.booleans()):
        env.names.append(new)  # read later: unbound on the paths that do not assign it
    return "if-assign", lines


@st.composite
def submodule_if(draw, env: _Env) -> tuple[str, list[str]]:
    """A plain ``if``/``else`` of assignments that call a submodule (the ``torch.cond`` shape)."""
    if env.kind != "module":
        return draw(if_chain(env))
    pre, cond = draw(condition(env))
    t = draw(st.sampled_from(env.names))

    def side(values: list[str]) -> list[str]:
        return [f"    {t} = {draw(st.sampled_from(values)).format(n=t, o=draw(st.sampled_from(env.names)))}"]

    lines = pre + [f"if {cond}:"] + side(SUBMODULE)
    if draw(st.booleans()):
        lines += ["else:"] + side(SAME_SHAPE + CHANGES_DTYPE)
    return "if-submodule", lines


@st.composite
def dtype_update(draw, env: _Env) -> tuple[str, list[str]]:
    """Zamba2's convolution: a branch also assigns a dtype read (``dtype = h.dtype``) that the update
    and the code after it use; the old dtype is another tensor's, so it may or may not be the same."""
    pre, cond = draw(condition(env))
    t, src = draw(st.sampled_from(env.names)), draw(st.sampled_from(env.names))
    d = env.fresh("dtype")
    value = draw(new_value(env, t))
    return "if-dtype", pre + [f"{d} = {src}.dtype", f"if {cond}:", f"    {d} = {t}.dtype",
                              f"    {t} = ({value}).to({d})", f"{t} = {t}.to({d})"]


@st.composite
def buffer_if(draw, env: _Env) -> tuple[str, list[str]]:
    """LongRoPE: both sides register the module's one buffer, after a lazily created attribute or a
    ``.to()`` move (module programs; a plain ``if`` chain in functions)."""
    if env.kind != "module":
        return draw(if_chain(env))
    pre, cond = draw(condition(env))
    t = draw(st.sampled_from(env.names))
    return "if-buffer", pre + [
        f"if {cond}:",
        '    if not hasattr(self, "long_buf"):',
        f"        self.long_buf = torch.linspace(0.5, 2.0, {WIDTH})",
        '    self.register_buffer("buf", self.long_buf, persistent=False)',
        "else:",
        f"    self.short_buf = self.short_buf.to({t}.device)",
        '    self.register_buffer("buf", self.short_buf, persistent=False)',
        f"{t} = {t} * self.buf",
    ]


@st.composite
def if_return(draw, env: _Env) -> tuple[str, list[str]]:
    """Branches that return (the function ends here)."""
    lines: list[str] = []
    pre, cond = draw(condition(env))
    n = draw(st.sampled_from(env.names))
    lines += pre + [f"if {cond}:", f"    return {draw(new_value(env, n))}"]
    for _ in range(draw(st.integers(0, 1))):
        _, cond = draw(condition(env, allow_local=False))
        lines += [f"elif {cond}:", f"    return {draw(new_value(env, n))}"]
    if draw(st.booleans()):
        lines += ["else:", f"    return {draw(new_value(env, n))}"]
    else:
        lines += [f"return {draw(new_value(env, n))}"]
    return "if-return", lines


@st.composite
def ternary(draw, env: _Env) -> tuple[str, list[str]]:
    pre, cond = draw(condition(env))
    n = draw(st.sampled_from(env.names))
    t = draw(st.sampled_from(env.names + [env.fresh("t")]))
    a, b = draw(new_value(env, n)), draw(st.sampled_from([n, draw(new_value(env, n))]))
    if t not in env.names:
        env.names.append(t)
    return "ternary", pre + [f"{t} = {a} if {cond} else {b}"]


@st.composite
def nested_if(draw, env: _Env) -> tuple[str, list[str]]:
    """An ``if`` inside a static ``if`` or inside another tensor ``if``."""
    outer = draw(st.sampled_from(["x.shape[0] > 1", "x.dim() == 2", "self_training", "tensor"]))
    if outer == "tensor":
        pre, outer_text = draw(condition(env, allow_local=False))
    else:
        pre, outer_text = [], ("self.training" if env.kind == "module" else "x.dim() == 2") \
            if outer == "self_training" else outer
    _, inner = draw(if_chain(env))
    return "nested-if", pre + [f"if {outer_text}:"] + _indent(inner)


@st.composite
def reporting_if(draw, env: _Env) -> tuple[str, list[str]]:
    pre, cond = draw(condition(env))
    body = [draw(side_effect(env)) for _ in range(draw(st.integers(1, 2)))]
    return "reporting-if", pre + [f"if {cond}:"] + _indent(body)


@st.composite
def effect(draw, env: _Env) -> tuple[str, list[str]]:
    return "side-effect", [draw(side_effect(env))]


@st.composite
def validation(draw, env: _Env) -> tuple[str, list[str]]:
    pre, cond = draw(condition(env))
    exc = draw(st.sampled_from(["ValueError", "ValueError", "RuntimeError"]))
    msg = draw(st.sampled_from(['"every row needs one position"', '"bad input"', 'f"bad {x.shape}"']))
    if draw(st.integers(0, 3)) == 0:  # a count only an eager-only check reads (Qwen2-VL's token count)
        a, n = draw(st.sampled_from(env.names)), env.fresh("n")
        red = draw(st.sampled_from(["({a} > 0).sum()", "({a} < 0).any()", "{a}.abs().sum()", "{a}.max()"]))
        limit = draw(st.sampled_from(["3", "{a}.shape[0]"]))
        read = draw(st.sampled_from(["", " + 0"]))
        eager = draw(st.sampled_from(["not torch.compiler.is_compiling() and ", ""]))  # eager-only, or checked
        return "validation", [f"{n} = {red.format(a=a)}.item()",
                              f"if {eager}{n}{read} > {limit.format(a=a)}:",
                              f'    raise {exc}(f"{{{n}}} over the limit")']
    return "validation", pre + [f"if {cond}:", f"    raise {exc}({msg})"]


@st.composite
def item_arith(draw, env: _Env) -> tuple[str, list[str]]:
    """``.item()`` whose number feeds tensor arithmetic."""
    a = draw(st.sampled_from(env.names))
    t = draw(st.sampled_from(env.names))
    red = draw(st.sampled_from(["sum", "mean", "max", "abs().sum"]))
    n = env.fresh("n")
    use = draw(st.sampled_from([
        "{t} * ({n} / 3)", "{t} + {n}", "{t} / max({n}, 1)", "{t} * max({n}, 1.5)", "{t} + {n} * 0.1",
        "{t} * min({n}, 2)", "{t} - ({n} + 1)",
    ]))
    if draw(st.booleans()):
        return "item-arith", [f"{n} = {a}.{red}().item()", f"{t} = " + use.format(t=t, n=n)]
    return "item-arith", [f"{t} = " + use.format(t=t, n=f"{a}.{red}().item()")]


@st.composite
def item_assert(draw, env: _Env) -> tuple[str, list[str]]:
    a = draw(st.sampled_from(env.names))
    form = draw(st.sampled_from([
        "assert {a}.abs().max().item() <= 100", 'assert ({a} > -5).all().item(), "out of range"',
        "assert {a}.numel() >= 0 and {a}.sum().item() < 1e6",
    ]))
    return "item-assert", [form.format(a=a)]


@st.composite
def scalars(draw, env: _Env) -> tuple[str, list[str]]:
    """``float(t)``, ``int(t)``, ``len(t.tolist())``, masked reductions, ``copy.deepcopy``."""
    a = draw(st.sampled_from(env.names))
    t = draw(st.sampled_from(env.names))
    form = draw(st.sampled_from(["float", "int", "tolist", "tolist0", "masked_sum", "masked_mean", "deepcopy"]))
    k = env.fresh("k")
    if form == "float":
        return "float", [f"{t} = {t} * float({a}.sum())"]
    if form == "int":
        return "float", [f"{t} = {t} + int({a}.sum())"]
    if form == "tolist":
        return "tolist", [f"{k} = len({a}.tolist())", f"{t} = {t} + {k}"]
    if form == "tolist0":
        return "tolist", [f"{k} = len({a}.sum().tolist())", f"{t} = {t} + {k}"]
    if form in ("masked_sum", "masked_mean"):
        meth = form.split("_")[1]
        return "masked", [f"{k} = {a}[{a} > 0].{meth}()", f"{t} = {t} + {k}"]
    env.imports.add("copy")
    return "deepcopy", [f"{k} = copy.deepcopy({a})", f"{t} = {k} * 2"]


@st.composite
def sizes(draw, env: _Env) -> tuple[str, list[str]]:
    """A value whose size comes from the data: what only Dynamo's capture can trace."""
    a = draw(st.sampled_from(env.names))
    t = draw(st.sampled_from(env.names))
    n, k = env.fresh("n"), env.fresh("k")
    form = draw(st.sampled_from(["slice-item", "mask-store", "slice-tensor", "slice-store", "factory", "nonzero",
                                 "mask", "split", "range"]))
    if form == "slice-item":
        lines = [f"{n} = ({a} > 0).sum().item()", f"{k} = {a}.reshape(-1)[:{n}]"]
    elif form == "slice-tensor":
        lines = [f"{n} = ({a} > 0).sum()", f"{k} = {a}.reshape(-1)[{n} // 2:]"]
    elif form == "slice-store":
        lines = [f"{n} = ({a} > 0).sum()", f"{k} = torch.zeros_like({a}).reshape(-1)", f"{k}[{n} // 2:{n}] = 1"]
    elif form == "factory":
        lines = [f"{n} = ({a} > 0).sum()", f"{k} = torch.ones({n}, dtype={a}.dtype) * 2"]
    elif form == "nonzero":
        lines = [f"{k} = torch.nonzero({a} > 0).to({a}.dtype)"]
    elif form == "mask":
        lines = [f"{k} = {a}[{a} > 0].cumsum(0)"]
    elif form == "range":
        lines = [f"{n} = ({a} > 0).sum()", f"{k} = torch.arange({n}, dtype={a}.dtype)"]
    elif form == "mask-store":
        lines = [f"{k} = {a}.clone()", f"{k}[torch.where(({a} > 0) & ({a} < 2))] = 0"]
    else:
        lines = [f"{n} = ({a} > 0).sum(-1).tolist()",
                 f"{k} = torch.stack([p.sum() for p in {a}[{a} > 0].split({n})])"]
    use = draw(st.sampled_from(["{t} + {k}.sum()", "{t} * {k}.shape[0]", "{t} - {k}.numel()"]))
    return "sizes", lines + [f"{t} = " + use.format(t=t, k=k)]


@st.composite
def numpy_numbers(draw, env: _Env) -> tuple[str, list[str]]:
    """numpy on Python numbers (shapes, literals) read as a number: Dynamo traces it as tensors and breaks."""
    a = draw(st.sampled_from(env.names))
    t = draw(st.sampled_from(env.names))
    n, k = env.fresh("n"), env.fresh("k")
    env.imports.add("numpy")
    form = draw(st.sampled_from(["log", "sum", "max", "sqrt", "shape"]))
    if form == "log":
        lines = [f'{n} = np.ceil(np.log1p({a}.shape[-1])).astype("int").item()']
    elif form == "sum":
        lines = [f"{n} = np.sum([{a}.shape[0], {a}.shape[-1], 2]).item()"]
    elif form == "max":
        lines = [f"{n} = (np.maximum({a}.shape[-1], 3) * 2 - np.abs(-{a}.dim())).item()"]
    elif form == "sqrt":
        lines = [f"{n} = np.floor(np.sqrt({a}.numel())).item()"]
    else:
        lines = [f"{k} = np.ones(({a}.shape[0], np.sum([{a}.shape[-1], 1])), dtype=np.float32)",
                 f"{n} = torch.from_numpy({k}).sum()"]
    use = draw(st.sampled_from(["{t} + {n}", "{t} * {n}", "{t}[..., :{n}].sum() + {t}"]))
    if form == "shape" and "[..." in use:
        use = "{t} + {n}"
    return "numpy-numbers", lines + [f"{t} = " + use.format(t=t, n=n)]


_EXTRA_PADDING = """
def _extra_padding{i}(self, t):
    length = t.shape[-1]
    n_frames = (length - self.kernel_size{i} + self.padding_total{i}) / self.stride{i} + 1
    n_frames = torch.ceil(n_frames).to(torch.int64) - 1
    ideal_length = n_frames * self.stride{i} + self.kernel_size{i} - self.padding_total{i}
    return ideal_length - length
"""


@st.composite
def int_buffers(draw, env: _Env) -> tuple[str, list[str]]:
    """``F.pad`` by numbers from 0-d int64 buffers (EnCodec's conv padding); a module's own block."""
    a = draw(st.sampled_from(env.names))
    t = draw(st.sampled_from(env.names))
    if env.kind != "module":  # buffers need a module: a plain size from the shape instead
        return "int-buffers", [f"{t} = {t} * {a}.shape[-1]"]
    i = env.fresh("")
    kernel, stride = draw(st.integers(1, 9)), draw(st.integers(1, 4))
    env.init += [f"kernel_size{i} = torch.tensor({kernel}, dtype=torch.int64)",
                 f"stride{i} = torch.tensor({stride}, dtype=torch.int64)",
                 f'self.register_buffer("kernel_size{i}", kernel_size{i}, persistent=False)',
                 f'self.register_buffer("stride{i}", stride{i}, persistent=False)',
                 f'self.register_buffer("padding_total{i}", kernel_size{i} - stride{i}, persistent=False)']
    env.methods += _EXTRA_PADDING.format(i=i).strip().splitlines() + [""]
    e, k = env.fresh("e"), env.fresh("k")
    pads = draw(st.sampled_from(["(self.padding_total{i} // 2, {e})", "({e}, self.stride{i})",
                                 "(self.padding_total{i} - self.padding_total{i} // 2, {e} + self.stride{i})"]))
    use = draw(st.sampled_from(["{t} * {k}.shape[-1]", "{t} + {k}.sum()"]))
    return "int-buffers", [f"{e} = self._extra_padding{i}({a})",
                           f"{k} = torch.nn.functional.pad({a}, {pads.format(i=i, e=e)})",
                           f"{t} = " + use.format(t=t, k=k)]


_LEVELS = """
def _levels{i}(self, t, shapes):
    out = t.sum() * 0
    for lvl, (h, w) in enumerate(shapes):
        out = out + {use}
    return out
"""


@st.composite
def kept_values(draw, env: _Env) -> tuple[str, list[str]]:
    """A shape tensor built from Python numbers whose numbers are read back as sizes (deformable attention's
    ``spatial_shapes``): in a method it is passed to (module programs) or by index where it is built."""
    a = draw(st.sampled_from(env.names))
    t = draw(st.sampled_from(env.names))
    sizes, shapes, k = env.fresh("sizes"), env.fresh("shapes"), env.fresh("k")
    lines = [f"{sizes} = [({a}.shape[0], {a}.shape[-1]), (2, {a}.dim())]",
             f"{shapes} = torch.as_tensor({sizes}, dtype=torch.long)"]
    if env.kind == "module":
        i = env.fresh("")
        use = draw(st.sampled_from(["torch.linspace(0.5, h - 0.5, h, dtype=t.dtype).sum() * w",
                                    "t.reshape(-1)[: h * w].sum() + lvl",
                                    "torch.ones(h, w + 1, dtype=t.dtype).sum() / h"]))
        env.methods += _LEVELS.format(i=i, use=use).strip().splitlines() + [""]
        lines.append(f"{k} = self._levels{i}({a}, {shapes})")
    else:
        lines.append(f"{k} = torch.ones({shapes}[0][0], {shapes}[1][1] + 1, dtype={a}.dtype).sum()")
    literal = draw(st.sampled_from(["", "int32", "unpacked"]))
    if literal == "int32":  # VITS: a one-element int32 tensor of a Python number, its number a slice bound
        n = env.fresh("n")
        lines += [f"{n} = torch.IntTensor([{a}.shape[-1] // 2])", f"{k} = {k} + {a}[..., : {n}[0]].sum()"]
    elif literal == "unpacked":  # mega: a literal shape tensor unpacked into numbers
        shape, rows, cols = env.fresh("shape"), env.fresh("rows"), env.fresh("cols")
        lines += [f"{shape} = torch.tensor([{a}.shape[0], 2])", f"{rows}, {cols} = {shape}",
                  f"if {cols} > 1:", f"    {k} = {k} + {a}[: {rows}, : {cols}].sum()"]
    return "kept-values", lines + [f"{t} = {t} + {k}"]


_STEPS = """
def _steps{i}(self, t, positions, cache=None):
    n = t.shape[-1]
    if cache is not None:
        n += positions[0]
    use_cache = cache is not None and positions[-1] > {limit}
    if use_cache:
        t = t * 2
    return t.reshape(-1)[: n].sum() + positions[-1] * 2 + torch.ones_like(t) * ((positions[-1] + 1) / 3)
"""


@st.composite
def kept_range(draw, env: _Env) -> tuple[str, list[str]]:
    """Positions built by ``torch.arange`` whose numbers are read back as bounds and tests (the cache
    positions of decoders): in a method they are passed to (module programs) or where they are built."""
    a = draw(st.sampled_from(env.names))
    t = draw(st.sampled_from(env.names))
    positions, k = env.fresh("positions"), env.fresh("k")
    start = draw(st.sampled_from(["0", "1", f"{a}.dim()"]))
    lines = [f"{positions} = torch.arange({start}, {start} + {a}.shape[-1], device={a}.device)"]
    if env.kind == "module":
        i = env.fresh("")
        env.methods += _STEPS.format(i=i, limit=draw(st.sampled_from(["0", "2"]))).strip().splitlines() + [""]
        cache = draw(st.sampled_from(["None", a]))
        lines.append(f"{k} = self._steps{i}({a}, {positions}, cache={cache})")
    else:
        lines.append(f"{k} = {a}.reshape(-1)[: {positions}[-1] - {start} + 1].sum()")
    return "kept-range", lines + [f"{t} = {t} + {k}"]


@st.composite
def routed_store(draw, env: _Env) -> tuple[str, list[str]]:
    """Switch-style expert routing: each row is stored from the expert its router picks (``out[mask] =
    expert(x[mask])``); module programs (function programs add a row-wise maximum instead)."""
    a = draw(st.sampled_from(env.names))
    t = draw(st.sampled_from(env.names))
    if env.kind != "module":
        return "routed-store", [f"{t} = {t} + {a}.amax(-1, keepdim=True)"]
    i = env.fresh("")
    env.init += [f"self.experts{i} = nn.ModuleList(nn.Linear({WIDTH}, {WIDTH}) for _ in range(3))",
                 f"self.router{i} = nn.Linear({WIDTH}, 3)"]
    choice, out, mask = env.fresh("choice"), env.fresh("routed"), env.fresh("mask")
    init = draw(st.sampled_from([f"{a}.clone()", f"torch.zeros_like({a})"]))
    cast = draw(st.sampled_from(["", f".to({out}.dtype)"]))
    return "routed-store", [f"{choice} = self.router{i}({a}).argmax(-1)",
                            f"{out} = {init}",
                            f"for idx, expert in enumerate(self.experts{i}):",
                            f"    {mask} = {choice} == idx",
                            f"    {out}[{mask}] = expert({a}[{mask}]){cast}",
                            f"{t} = {t} + {out}"]


@st.composite
def grouped_rows(draw, env: _Env) -> tuple[str, list[str]]:
    """X-MOD-style routing: runs of equal ids (``torch.unique_consecutive``) split the rows, each run goes
    through the module its id names; module programs (function programs add a row-wise minimum instead)."""
    t = draw(st.sampled_from(env.names))
    if env.kind != "module":
        return "grouped-rows", [f"{t} = {t} + x.amin(-1, keepdim=True)"]
    i = env.fresh("")
    env.init += [f"self.adapters{i} = nn.ModuleDict({{k: nn.Linear({WIDTH}, {WIDTH}) for k in ('en', 'de', 'fr')}})"]
    ids, counts, chunks, outs, out = (env.fresh(s) for s in ("ids", "counts", "chunks", "outs", "routed"))
    j, k, chunk, name = (env.fresh(s) for s in ("j", "k", "chunk", "name"))
    made = draw(st.sampled_from(["(x[:, 0] > 0).long()", "(x[:, 0] > 0).long() + (x[:, -1] > 0).long()",
                                 "torch.zeros(x.shape[0], dtype=torch.long)"]))
    return "grouped-rows", [f"{ids} = {made}",
                            f"{ids}, {counts} = torch.unique_consecutive({ids}, return_counts=True)",
                            f"{chunks} = torch.split(x, {counts}.tolist(), 0)",
                            f"{outs} = []",
                            f"for {j}, ({k}, {chunk}) in enumerate(zip({ids}, {chunks})):",
                            f"    {name} = list(self.adapters{i}.keys())[int({k}.item())]",
                            f"    {outs}.append(self.adapters{i}[{name}]({chunk}))",
                            f"{out} = torch.cat({outs}, 0)",
                            f"{t} = {t} + {out}"]


@st.composite
def mask_drop(draw, env: _Env) -> tuple[str, list[str]]:
    """A mask of all ones set to None as a fast path (idefics' patch mask, Mamba's state mask), read by
    code that treats a mask of ones as no mask; the mask derived from a tensor, so it is all ones for
    some inputs and not for others."""
    t = draw(st.sampled_from(env.names))
    m = env.fresh("mask")  # of the tensor it is applied to (a reader that broadcasts to it is not a mask's)
    made = draw(st.sampled_from([f"{t} >= 0", f"{t} == {t}", f"{t} > -1e9", f"torch.ones_like({t}, dtype=torch.bool)"]))
    test = draw(st.sampled_from([f"not torch.any(~{m})", f"torch.all({m})", f"{m}.all()", f"torch.all({m} == 1)",
                                 f"not ({m} == 0).any()"]))
    if draw(st.booleans()):
        test = f"{t}.dim() > 3 or ({m} is not None and {test})"
    target = m
    lines = [f"{m} = {made}"]
    if draw(st.booleans()):
        target = env.fresh("state_mask")
        lines.append(f"{target} = {m}")
    lines += [f"if {test}:", f"    {target} = None"]
    use = draw(st.sampled_from(["{t} * {m}", "{t}.masked_fill(~{m}, 0)", "torch.where({m}, {t}, {t} - {t})"]))
    reader = use.format(t=t, m=target)
    return "mask-drop", lines + [f"{t} = {t} if {target} is None else {reader}"]


_FALLBACK = """
def _attend{i}(self, h: torch.Tensor, keep: torch.Tensor):
    if {test}:
{report}        return self._written_out{i}(h, keep)
    out = torch.where(keep, h, torch.zeros_like(h)) * 2
    return out, None, (h, keep)

def _written_out{i}(self, h: torch.Tensor, keep: torch.Tensor):
    return h * keep * 2, None, (h, keep)
"""


@st.composite
def fallback(draw, env: _Env) -> tuple[str, list[str]]:
    """A fast path that falls back to another implementation when a tensor test says it cannot take the
    input, returning early (musicgen's SDPA attention); the two differ where the input has NaN or inf, so a
    selection that took the wrong side shows. Module programs (a method); functions get a product."""
    t = draw(st.sampled_from(env.names))
    if env.kind != "module":
        return "fallback", [f"{t} = {t} * ({t} > 0)"]
    i, out = env.fresh(""), env.fresh("attended")
    test = draw(st.sampled_from(["not keep.any()", "(~keep).all()", "keep.sum() == 0", "keep.sum() < keep.numel()",
                                 "keep.shape[0] > 1 and not keep.any()", "keep is not None and (keep == 0).all()"]))
    report = draw(st.sampled_from(["", f"        logger.warning('falling back {i}')\n"]))
    env.methods += _FALLBACK.format(i=i, test=test, report=report).strip("\n").splitlines() + [""]
    made = draw(st.sampled_from([f"{t} > 0", f"{t} > 1e9", f"{t} == {t}", f"torch.isfinite({t})"]))
    return "fallback", [f"{out}, _, _ = self._attend{i}({t}, {made})", f"{t} = {t} + {out}"]


@st.composite
def tensor_check(draw, env: _Env) -> tuple[str, list[str]]:
    """``torch._check_tensor_all`` on a tensor test that holds for some inputs and not for others."""
    t = draw(st.sampled_from(env.names))
    test = draw(st.sampled_from([f"{t} == {t}", f"{t} > -1e9", f"{t} < 3", f"torch.isfinite({t})"]))
    message = draw(st.sampled_from(["", ", lambda: 'out of range'"]))
    check = draw(st.sampled_from(["torch._check_tensor_all({test}{message})",
                                  "torch._check_tensor_all_with(ValueError, {test}{message})"]))
    return "tensor-check", [check.format(test=test, message=message), f"{t} = {t} * 2"]


@st.composite
def store_select(draw, env: _Env) -> tuple[str, list[str]]:
    """One store into a tensor under a data-dependent test (smolvlm keeps one image when every image is
    padding); the test holds for some inputs and not for others."""
    t = draw(st.sampled_from(env.names))
    keep = env.fresh("keep")
    made = draw(st.sampled_from([f"{t}.sum(-1) > 0", f"{t}.amax(-1) > 1e9", f"({t} == {t}).all(-1)",
                                 f"{t}[:, 0] > 0"]))
    test = draw(st.sampled_from([f"not any({keep})", f"not {keep}.any()", f"{keep}.sum() == 0",
                                 f"{keep}.all()"]))
    store = draw(st.sampled_from([f"{keep}[0] = True", f"{keep}[-1:] = {keep}[:1] | True", f"{keep}[0] = 0",
                                  f"{keep}[{keep} == False] = True",  # a number through a bool mask
                                  f"{t}[{t}.sum(-1).eq(0)] = 1"]))
    return "store-select", [f"{keep} = {made}", f"if {test}:", f"    {store}",
                            f"{t} = {t} * {keep}[:, None].to({t}.dtype)"]


_POSITIONS = """
def _positions{i}(self, n: int, dtype: torch.dtype):
    pos = torch.arange(0, n, dtype=torch.int64).to(dtype)
    out = pos.sum() * 0
    for block in range(2):
        out = out + self._relative{i}(pos, 2 ** block).to(dtype).sum()
        pos = pos[::2]
    return out

def _relative{i}(self, pos: torch.Tensor, stride: int):
    return torch.arange(pos[-1], pos[0] - 1, -stride)
"""


@st.composite
def constant_method(draw, env: _Env) -> tuple[str, list[str]]:
    """Ranges bounded by values of other ranges, in a method of Python values (Funnel's relative positions);
    a module's own methods."""
    a = draw(st.sampled_from(env.names))
    t = draw(st.sampled_from(env.names))
    if env.kind != "module":
        return "constant-method", [f"{t} = {t} + {a}.shape[-1]"]
    i, k = env.fresh(""), env.fresh("k")
    env.methods += _POSITIONS.format(i=i).strip().splitlines() + [""]
    return "constant-method", [f"{k} = self._positions{i}({a}.shape[-1] + 1, torch.float32)",
                               f"{t} = {t} + {k}.to({t}.dtype)"]


@st.composite
def layerdrop(draw, env: _Env) -> tuple[str, list[str]]:
    """LayerDrop in training: one ``torch.rand`` draw per layer of a ``ModuleList``, the layer skipped when the
    draw is below the configured probability: BART's ``if self.training:`` with ``continue``, Whisper's flag,
    M2M100's conditional expression ``True if self.training and (u < p) else False``, FSMT's ``if
    self.training and (u < p):``; the probability 0.0 (the usual), or one that drops layers; the layer updating
    the tensor or a float state the loop carries (``h = layer(h)``, which ``--unsafe-fixes`` selects under compile). Module programs
    (in training, as built); function programs compare the draw with a literal (declined)."""
    t = draw(st.sampled_from(env.names))
    size = draw(st.sampled_from(["[]", "[]", "()", "1"]))
    u = env.fresh("u")
    if env.kind != "module":
        return "layerdrop", [f"{u} = torch.rand({size})", f"if {u} < {draw(st.sampled_from(['0.0', '0.5']))}:",
                             f"    {t} = {t} * 2"]
    i, layer = env.fresh(""), env.fresh("layer")
    env.init += [f"self.layers{i} = nn.ModuleList(nn.Linear({WIDTH}, {WIDTH}) for _ in range(3))",
                 f"self.layerdrop{i} = {draw(st.sampled_from(['0.0', '0.0', '0.5', '1.0']))}"]
    p = f"self.layerdrop{i}"
    test = draw(st.sampled_from([f"{u} < {p}", f"{u} < {p}", f"{p} > {u}", f"{u} <= {p}"]))  # `<=`: declined
    carried = draw(st.booleans())  # a float state the layers carry, `h = layer(h)`: what --unsafe-fixes selects
    h = env.fresh("h")
    apply = f"{h} = {layer}({h})" if carried else f"{t} = {layer}({t}.float()).to({t}.dtype) + {t}"
    form = draw(st.sampled_from(["continue", "flag", "ifexp", "prefix"]))
    if form == "continue":
        body = ["if self.training:", f"    {u} = torch.rand({size})", f"    if {test}:", "        continue", apply]
    elif form == "flag":
        drop = env.fresh("to_drop")
        body = [f"{drop} = False", "if self.training:", f"    {u} = torch.rand({size})",
                f"    if {test}:  # skip the layer", f"        {drop} = True", f"if not {drop}:", f"    {apply}"]
    elif form == "ifexp":
        skip = env.fresh("skip")
        body = [f"{u} = torch.rand({size})", f"{skip} = True if self.training and ({test}) else False",
                f"if not {skip}:", f"    {apply}"]
    else:
        body = [f"{u} = torch.rand({size})", f"if self.training and ({test}):", "    continue", apply]
    loop = [f"for {layer} in self.layers{i}:"] + _indent(body)
    if carried:
        loop = [f"{h} = {t}.float()", *loop, f"{t} = {h}.to({t}.dtype) + {t}"]
    return "layerdrop", loop


@st.composite
def mask_update(draw, env: _Env) -> tuple[str, list[str]]:
    """An augmented store through a boolean mask, ``t[mask] += 1.0`` (a segmentation model's update), in
    place on an input or on a copy that a view of it sees; numbers that overflow a dtype or divide by zero
    too."""
    t, a = draw(st.sampled_from(env.names)), draw(st.sampled_from(env.names))
    masks = [f"{t} > 0", f"{t}.isnan()", f"{a} < 0", f"{t}[:, 0] > 0", f"({t} > 0) & ({t} < 2)"]
    m = draw(st.sampled_from(masks + (["mask"] if env.has_mask else [])))
    op = draw(st.sampled_from(["+=", "-=", "*=", "/="]))
    number = draw(st.sampled_from(["1.0", "1", "0.5", "2", "0.0", "-3", "1e39"]))
    lines: list[str] = []
    target = t
    if draw(st.booleans()):
        target, view = env.fresh("k"), env.fresh("v")
        lines += [f"{target} = {t} * 1", f"{view} = {target}[0]"]  # a view of the copy sees the update
    store = f"{target}[{m}] {op} {number}"
    lines += ["if mask is not None:", f"    {store}"] if m == "mask" else [store]
    if target != t:
        lines.append(f"{t} = {target} + {view}")
    return "mask-update", lines


@st.composite
def assert_not(draw, env: _Env) -> tuple[str, list[str]]:
    """The checks training loops keep on activations: ``assert not torch.isnan(h).any()``, with a message or
    without; they hold for some inputs and fail for others."""
    t = draw(st.sampled_from(env.names))
    test = draw(st.sampled_from([f"torch.isnan({t}).any()", f"{t}.isinf().any()", f"({t} > 1e4).any()",
                                 f"{t}.sum() < 0", f"torch.isnan({t}).all()"]))
    message = draw(st.sampled_from(["", ', "NaN in the activations"']))
    return "assert-not", [f"assert not {test}{message}", f"{t} = {t} * 2"]


BLOCKS = {
    "if-assign": if_chain,
    "if-submodule": submodule_if,
    "if-dtype": dtype_update,
    "if-buffer": buffer_if,
    "if-return": if_return,
    "ternary": ternary,
    "nested-if": nested_if,
    "reporting-if": reporting_if,
    "side-effect": effect,
    "validation": validation,
    "item-arith": item_arith,
    "item-assert": item_assert,
    "scalars": scalars,
    "sizes": sizes,
    "int-buffers": int_buffers,
    "numpy-numbers": numpy_numbers,
    "kept-values": kept_values,
    "kept-range": kept_range,
    "routed-store": routed_store,
    "mask-drop": mask_drop,
    "grouped-rows": grouped_rows,
    "constant-method": constant_method,
    "fallback": fallback,
    "tensor-check": tensor_check,
    "store-select": store_select,
    "layerdrop": layerdrop,
    "mask-update": mask_update,
    "assert-not": assert_not,
}


# --- programs --------------------------------------------------------------------------------------

@st.composite
def programs(draw, blocks: tuple[str, ...] = tuple(BLOCKS), max_blocks: int = 3) -> Program:
    """A module with one compiled function made of 1..max_blocks blocks drawn from ``blocks``."""
    kind = draw(st.sampled_from(["module", "function"]))
    has_mask = draw(st.booleans())
    annotate = draw(st.sampled_from([True, True, False]))
    env = _Env(names=["x", "y"], kind=kind, has_mask=has_mask)
    body: list[str] = []
    if draw(st.booleans()):
        body.append("z = x * 1")
        env.names.append("z")
    kinds = []
    ended = False
    for _ in range(draw(st.integers(1, max_blocks))):
        name = draw(st.sampled_from(blocks))
        kind_name, lines = draw(BLOCKS[name](env))
        kinds.append(kind_name)
        body += lines
        if kind_name == "if-return":
            ended = True
            break
    if not ended:
        ret = draw(st.sampled_from(env.names))
        other = draw(st.sampled_from(env.names))
        body.append(draw(st.sampled_from([f"return {ret}", f"return {ret}, {other}"])))
    ann = ": torch.Tensor" if annotate else ""
    params = f"x{ann}, y{ann}" + (", mask=None" if has_mask else "")
    head = ["import copy"] if "copy" in env.imports else []
    head += ["import logging"]
    head += ["import warnings"] if "warnings" in env.imports else []
    head += ["import numpy as np"] if "numpy" in env.imports else []
    head += ["", "import torch", "from torch import nn", "", f'logger = logging.getLogger("{LOGGER}")', "", ""]
    if kind == "module":
        lines = head + [
            "class M(nn.Module):",
            "    def __init__(self):",
            "        super().__init__()",
            f"        self.lin = nn.Linear({WIDTH}, {WIDTH})",
            f'        self.register_buffer("buf", torch.ones({WIDTH}), persistent=False)',
            "        self.short_buf = self.buf",
        ] + _indent(env.init, 2) + [""] + _indent(env.methods) + [
            f"    def forward(self, {params}):",
        ] + _indent(body, 2) + ["", "", "def make():", "    torch.manual_seed(0)", "    return M()"]
    else:
        lines = head + ['@torch.compile(backend="eager")', f"def f({params}):"] + _indent(body)
    return Program("\n".join(lines) + "\n", kind, has_mask, tuple(kinds))


def program_from_source(source: str, has_mask: bool | None = None) -> Program:
    """A hand-written program (regression tests): ``make()`` for a module, else ``f``."""
    kind = "module" if "def make(" in source else "function"
    mask = "mask" in source if has_mask is None else has_mask
    return Program(source, kind, mask, ("explicit",))


__all__ = ["BLOCKS", "LOGGER", "Program", "WIDTH", "program_from_source", "programs"]
