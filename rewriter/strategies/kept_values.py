"""Sizes read from a tensor built from Python numbers (MND310/MND311; MND201 on a test of them, unsafe
runs only): keep a Python copy beside it.

Deformable-attention models build their feature maps' shapes as a Python list and turn it into a tensor
(``spatial_shapes = torch.as_tensor(shapes, dtype=torch.long)``), which they hand on through several calls;
the code that needs the numbers back iterates the tensor (``for level, (height, width) in
enumerate(spatial_shapes): torch.linspace(0.5, height - 0.5, height)``, ``value.split([h * w for h, w in
value_spatial_shapes])``) and Dynamo breaks on each 0-d tensor used as a size. The numbers were Python
numbers all along; only their tensor form hides them (upstream code now passes ``spatial_shapes_list``
beside the tensor by hand). The repair:

* where the tensor is built, ``_mend_keep_values(torch.as_tensor(shapes, ...), shapes)`` attaches a copy of
  the numbers to it (as nested tuples), only when the tensor is an ``int64`` or ``int32`` tensor and every
  number is a Python ``int`` whose nesting matches the tensor's shape (checked when it runs; else nothing
  is kept). A builder is ``torch.as_tensor``/``torch.tensor`` of a name with an integer dtype, or of a
  list literal of plain reads (``torch.IntTensor([self.hidden_size])``, ``torch.tensor([shape[0], n])``),
  which the copy reads a second time;
* where the numbers are read, in the functions of the same file the tensor is passed to (by keyword, or by
  position to a function or method of the file), ``_mend_kept(spatial_shapes, 2)`` hands on that copy
  (tuples of Python ints) while torch.compile traces, when the tensor has it and has the dimensions the
  reading code peels (2: rows unpacked into numbers); in eager, always the tensor itself. Dynamo reads the
  copy as constants: no break. Reads are subscripts (``shapes[i]``), loops over the tensor and unpacking
  (``batch, length = shape``).

Eager runs the original code on the original tensors: only the compiled graph sees Python ``int`` instead of
0-d integer tensors of the same value. The fix checks that every use of them is one where both act alike:
a size or bound of a torch call or tensor method, an index or slice, ``+ - * // %`` among them and with
tensors, a comparison, a name that sums them, a parameter of a ``@torch.jit.script`` function of the file
(Dynamo traces its Python source; TorchScript, which would reject an int, runs only in eager), a parameter
of every function a ``self.`` attribute may hold (``self.rope_init_fn = ROPE_INIT_FUNCTIONS[kind]``: a dict
of functions, here or in the module beside that a relative import names, checked there). A quotient or a
power of them rounds apart (float64 against float32): it may meet tensors or be stored and passed on, never
decide a size, an index or a test. Uses in code that runs only in eager (``if not
torch.compiler.is_compiling():``) are not checked. **Unsafe**: under compile, ``height - 0.5`` is a Python
float (float64) where the tensor form was float32, equal below 2**24 (a quotient within float32 rounding);
against a 0-d tensor of a narrower type (int32, float16) the result keeps that type where eager promoted
it; an int32 product past 2**31 wraps in the tensor, not in Python; the copy is read without looking at the
tensor again, so a shape tensor changed in place after it was built is seen by eager but not by the
compiled graph (a write in place that the fix can see declines it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import ARANGE_HELPER, KEEP_VALUES_HELPER, KEPT_VALUES_HELPER
from mend.rewriter.analysis import (
    all_params,
    code,
    make_call,
    self_attr,
    strip_parens,
    target_names,
    walk,
)
from mend.rewriter.context import FileContext
from mend.rewriter.parts.number_uses import NotKept, check_uses, functions_of, is_load, positional, written_names
from mend.rewriter.parts.sites import branch_node, size_site
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND310",
        before="""
            import torch
            from torch import nn


            def split_levels(value, shapes):
                return value.split([height * width for height, width in shapes], dim=1)


            class M(nn.Module):
                def forward(self, features):
                    shapes = [(f.shape[2], f.shape[3]) for f in features]
                    source = torch.cat([f.flatten(2) for f in features], 2).transpose(1, 2)
                    shapes = torch.as_tensor(shapes, dtype=torch.long)
                    return [part.sum() for part in split_levels(source, shapes)]
        """,
        after="""
            import torch
            from torch import nn
            from _mend import keep_values as _mend_keep_values, kept as _mend_kept


            def split_levels(value, shapes):
                return value.split([height * width for height, width in _mend_kept(shapes, 2)], dim=1)


            class M(nn.Module):
                def forward(self, features):
                    shapes = [(f.shape[2], f.shape[3]) for f in features]
                    source = torch.cat([f.flatten(2) for f in features], 2).transpose(1, 2)
                    shapes = _mend_keep_values(torch.as_tensor(shapes, dtype=torch.long), shapes)
                    return [part.sum() for part in split_levels(source, shapes)]
        """,
        run="compile(M())([torch.ones(1, 2, 2, 2), torch.ones(1, 2, 1, 3)])",
        unsafe=True,
    ),
)


_WHY = ("keep a Python copy of the numbers a shape tensor is built from, and read the copy under compile where "
        "the numbers are needed (unsafe: the compiled graph has Python ints where 0-d integer tensors were; "
        "float arithmetic on them is float64 instead of float32, equal below 2**24 for sums and products, a "
        "quotient within float32 rounding; a shape tensor changed in place is not seen under compile; eager "
        "reads the tensor)")
_BUILDERS = {"torch.as_tensor", "torch.tensor"}
_BUILDER_TEXT = re.compile(r"\b(as_tensor|tensor)\(\s*\w+\s*,[^)]*dtype|\barange\(|\b(as_tensor|tensor|IntTensor|LongTensor)\(\s*\[")
_INT_DTYPES = {"torch.long", "torch.int64"}
_LITERAL_DTYPES = _INT_DTYPES | {"torch.int", "torch.int32"}
_LEGACY_BUILDERS = {"torch.IntTensor", "torch.LongTensor"}  # ``torch.IntTensor([n])``: int32, a list literal
_RANGE_KEYWORDS = {"dtype", "device"}  # ``torch.arange(a, b, device=d)``: no ``out=``, no ``start=``


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    if diag.code == "MND201":  # ``if positions[0] > 0:`` on a tensor of Python numbers
        node = branch_node(ctx, diag)
        if isinstance(node, Decline):
            return node
        if not ctx.options.unsafe:
            return None  # with --unsafe-fixes only: a safe repair after it goes first
        plan = kept_values_plan(ctx, diag, node.test)
        return plan if isinstance(plan, Plan) else None
    site = size_site(ctx, diag)
    return site if isinstance(site, Decline) else kept_values_plan(ctx, diag, site)


def kept_values_plan(ctx: FileContext, diag: Diagnostic, node: cst.CSTNode) -> Plan | Decline | None:
    """The plan keeping the numbers where the tensor ``node`` reads is built and reading them from the copy
    there and at every other read in the file, a decline, or None (no tensor built from Python numbers in
    this file reaches the site)."""
    if not _BUILDER_TEXT.search(ctx.source):
        return None  # no builder in the file (most files): no whole-file walk
    ctx.prepare_all()
    func = ctx.enclosing_function(node)
    if func is None:
        return None
    builders = ctx.memo("kept_values.builders", lambda: _builders(ctx))
    reached = _merged(b.reach for b in builders if b.written is None)
    site = ctx.statement_line(node) or node
    reads = _read_sites(ctx, site)
    own = [s for s in reads if s[0].value in reached.get(func, ())]
    written = [b.written for b in builders if b.written and any(s[0].value in b.reach.get(func, ()) for s in reads)]
    if not own and written:
        return Decline(diag, f"the numbers come from a tensor built from Python numbers, but {written[0]} (the "
                             "kept copy would not see it under compile)")
    try:
        for _, _, users in own:
            check_uses(ctx, func, users)
    except NotKept as why:
        return Decline(diag, f"the numbers come from a tensor built from Python numbers, but {why}")
    edits, shown, helpers, holders = ctx.memo("kept_values.edits", lambda: _all_edits(ctx, builders, reached))
    if not own and not (edits and _reads_holder(ctx, func, site, holders)):
        return None  # no kept tensor's numbers reach the site
    return Plan(diag, f"{_WHY}: {shown}", "unsafe", edits, helpers=helpers)


def _reads_holder(ctx: FileContext, func: cst.FunctionDef, site: cst.CSTNode, holders: set[tuple]) -> bool:
    """``site`` reads a name or ``self.`` attribute that the repair makes hold Python numbers (``seq_len``
    of a method the kept numbers are passed to)."""
    cls = ctx.enclosing_class(func)
    return any((isinstance(n, cst.Name) and (func, n.value) in holders)
               or (self_attr(n) is not None and (cls, self_attr(n)) in holders) for n in walk(site))


def _all_edits(ctx: FileContext, builders: list[_Builder],
               reached: dict[cst.FunctionDef, set[str]]) -> tuple[list, str, list[str], set]:
    """Every read of the file whose uses allow it, and the builders that feed one of them, kept (one repair
    for the file: the reads of one tensor are spread over the functions it is passed to, and some have no
    finding of their own); with the helpers the edits call and the names and attributes that then hold
    the numbers."""
    edits, read, fed, holders = [], [], set(), set()
    for func, names in reached.items():
        for root, depth, users in _sites_in(ctx, func, names):
            try:
                holders |= check_uses(ctx, func, users)
            except NotKept:
                continue  # left as it was; its own finding says why
            edits.append((root, make_call(KEPT_VALUES_HELPER, root.deep_clone(), cst.Integer(str(depth)))))
            read.append(f"`{root.value}` in {func.name.value}()")
            fed.add((func, root.value))
    helpers = {KEPT_VALUES_HELPER}
    for b in builders:
        if b.written or _is_kept(ctx, b.call) or not any((f, n) in fed for f, names in b.reach.items()
                                                         for n in names):
            continue  # written in place, kept already, or no read of this file takes its numbers
        edits.append((b.call, _keep_call(ctx, b.call)))
        helpers.add(ARANGE_HELPER if _is_range_call(ctx, b.call) else KEEP_VALUES_HELPER)
    return edits, ", ".join(dict.fromkeys(read)), sorted(helpers), holders


def _sites_in(ctx: FileContext, func: cst.FunctionDef, names: set[str]) -> list[tuple[cst.Name, int, list]]:
    sites = []
    for n in walk(func.body):
        loop = n if isinstance(n, cst.For) else _comp_for(n)
        if loop is not None:
            unpacked = _unpacked(loop.target, loop.iter)
            if unpacked is not None and unpacked[0].value in names:
                sites.append(_loop_site(ctx, n, loop, *unpacked))
        elif isinstance(n, cst.Subscript) and not _inner_subscript(ctx, n):
            chain = _index_chain(n)
            if chain is not None and chain[0].value in names:
                sites.append(chain)
    return sites + [u for u in _unpacks(ctx, func) if u[0].value in names]


def _unpack_site(ctx: FileContext, func: cst.FunctionDef, stmt: cst.Assign) -> tuple[cst.Name, int, list] | None:
    """``batch, length = shape`` (names only, one level): (the unpacked name, 1, every read of the names in
    ``func``)."""
    target = stmt.targets[0].target if len(stmt.targets) == 1 else None
    if not (isinstance(target, (cst.Tuple, cst.List)) and isinstance(stmt.value, cst.Name)
            and all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements)):
        return None
    bound = {e.value.value for e in target.elements}
    users = [n for n in walk(func.body) if isinstance(n, cst.Name) and n.value in bound and is_load(ctx, n)]
    return stmt.value, 1, users


def _unpacks(ctx: FileContext, func: cst.FunctionDef) -> list[tuple[cst.Name, int, list]]:
    """Every ``a, b = shape`` of ``func`` (:func:`_unpack_site`), found once per function."""
    return ctx.memo(f"kept_values.unpacks.{id(func)}", lambda: [
        site for n in walk(func.body) if isinstance(n, cst.Assign) and (site := _unpack_site(ctx, func, n))])


def _binding_unpack(ctx: FileContext, name: cst.Name) -> tuple[cst.Name, int, list] | None:
    """The ``a, b = shape`` of the enclosing function that binds ``name``."""
    func = ctx.enclosing_function(name)
    if func is None:
        return None
    return next((site for site in _unpacks(ctx, func) if any(u is name for u in site[2])), None)


def _inner_subscript(ctx: FileContext, sub: cst.Subscript) -> bool:
    parent = ctx.parent(sub)
    return isinstance(parent, cst.Subscript) and parent.value is sub


# --- where the tensors are built, and where they go ---------------------------------------------------

@dataclass
class _Builder:
    """``name = torch.as_tensor(values, dtype=torch.long, ...)`` or ``name = torch.arange(a, b, ...)`` (or
    already kept) in a function of the file, with the names it reaches and whether one is written in
    place (a description) or None."""

    func: cst.FunctionDef
    name: str
    call: cst.Call
    reach: dict[cst.FunctionDef, set[str]] = field(default_factory=dict)
    written: str | None = None


def _builders(ctx: FileContext) -> list[_Builder]:
    out = []
    for func, name, call in _builder_sites(ctx):
        reach = _reach(ctx, {func: {name}})
        out.append(_Builder(func, name, call, reach, _written(ctx, reach)))
    return out


def _merged(reaches) -> dict[cst.FunctionDef, set[str]]:
    out: dict[cst.FunctionDef, set[str]] = {}
    for reach in reaches:
        for func, names in reach.items():
            out.setdefault(func, set()).update(names)
    return out


def _written(ctx: FileContext, reach: dict[cst.FunctionDef, set[str]]) -> str | None:
    """How a reached name is written in place (``pos.add_(1)``, ``pos[0] = 1``, ``pos += 1``), or None."""
    for func, names in reach.items():
        written = ctx.memo(f"kept_values.written.{id(func)}", lambda f=func: written_names(f.body))
        for name in sorted(names & written):
            return f"`{name}` is written in place in {func.name.value}()"
    return None


def _builder_sites(ctx: FileContext) -> list[tuple[cst.FunctionDef, str, cst.Call]]:
    out = []
    for node in ctx.parents:  # every node of the module (prepare_all), in order
        if not (isinstance(node, cst.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0].target, cst.Name)):
            continue
        call = node.value
        if isinstance(call, cst.Call) and code(call.func) == KEEP_VALUES_HELPER and call.args:
            call = call.args[0].value
        if _is_builder(ctx, call) and (func := ctx.enclosing_function(node)) is not None:
            out.append((func, node.targets[0].target.value, call))
    return out


def _is_builder(ctx: FileContext, call: cst.BaseExpression) -> bool:
    if isinstance(call, cst.Call) and _is_range_call(ctx, call):
        return _is_range(ctx, call)
    qual = ctx.imports.qualify(call.func) if isinstance(call, cst.Call) else None
    if qual not in _BUILDERS | _LEGACY_BUILDERS or not call.args:
        return False
    first = call.args[0]
    if first.keyword is not None or first.star:
        return False
    dtype = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "dtype"), None)
    if isinstance(first.value, (cst.List, cst.Tuple)):  # a literal: its dtype comes from the numbers
        return _plain_literal(first.value) and (qual in _LEGACY_BUILDERS and len(call.args) == 1
                                                or dtype is None or ctx.imports.qualify(dtype) in _LITERAL_DTYPES)
    if qual in _LEGACY_BUILDERS or not isinstance(first.value, cst.Name):
        return False  # the values are read twice: a name or a literal of plain reads only
    return dtype is not None and ctx.imports.qualify(dtype) in _INT_DTYPES


def _plain_literal(values: cst.List | cst.Tuple) -> bool:
    """Numbers, names, attributes of names and names indexed by a number, in nested lists: reading them a
    second time gives the same numbers."""
    def plain(e: cst.BaseExpression) -> bool:
        e = strip_parens(e)
        if isinstance(e, (cst.List, cst.Tuple)):
            return all(not isinstance(el, cst.StarredElement) and plain(el.value) for el in e.elements)
        if isinstance(e, cst.Subscript):
            return len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) \
                and isinstance(strip_parens(e.slice[0].slice.value), cst.Integer) and plain(e.value)
        return isinstance(e, (cst.Integer, cst.Name)) or (isinstance(e, cst.Attribute) and plain(e.value))
    return bool(values.elements) and plain(values)


def _is_range(ctx: FileContext, call: cst.Call) -> bool:
    """``torch.arange(n)`` or ``torch.arange(a, b)`` with at most ``dtype=torch.long`` and ``device=`` keywords."""
    bounds = [a for a in call.args if a.keyword is None]
    if any(a.star for a in call.args) or not 1 <= len(bounds) <= 2 \
            or any(a.keyword is not None for a in call.args[:len(bounds)]):
        return False
    for arg in call.args[len(bounds):]:
        if arg.keyword.value not in _RANGE_KEYWORDS or (
                arg.keyword.value == "dtype" and ctx.imports.qualify(arg.value) not in _INT_DTYPES):
            return False
    return True


def _is_kept(ctx: FileContext, call: cst.Call) -> bool:
    if code(call.func) == ARANGE_HELPER:
        return True
    parent = ctx.parent(ctx.parent(call))  # Arg -> Call
    return isinstance(parent, cst.Call) and code(parent.func) == KEEP_VALUES_HELPER


def _is_range_call(ctx: FileContext, call: cst.Call) -> bool:
    return code(call.func) == ARANGE_HELPER or ctx.imports.qualify(call.func) == "torch.arange"


def _keep_call(ctx: FileContext, call: cst.Call) -> cst.Call:
    if not _is_range_call(ctx, call):
        return make_call(KEEP_VALUES_HELPER, call, call.args[0].value.deep_clone())
    return call.with_changes(func=cst.Name(ARANGE_HELPER))  # the same bounds and keywords


def _reach(ctx: FileContext, seeds: dict[cst.FunctionDef, set[str]]) -> dict[cst.FunctionDef, set[str]]:
    """``seeds`` (builders' names in their functions) and the parameters they are passed to: by keyword to
    any function or method of the file with that parameter; by position to a function of the file, or to a
    method through ``self.``/``cls.``."""
    passes = ctx.memo("kept_values.passes", lambda: _passes(ctx))
    reached = {func: set(names) for func, names in seeds.items()}
    work = list(reached)
    while work:
        func = work.pop()
        for name, callee, param in passes.get(func, ()):
            if name in reached[func] and param not in reached.setdefault(callee, set()):
                reached[callee].add(param)
                work.append(callee)
    return reached


def _passes(ctx: FileContext) -> dict[cst.FunctionDef, list[tuple[str, cst.FunctionDef, str]]]:
    """For each function of the file, the names it passes on: (name, callee, the callee's parameter)."""
    functions = functions_of(ctx)
    by_param: dict[str, list[cst.FunctionDef]] = {}
    for f in functions:
        for p in all_params(f.params):
            by_param.setdefault(p.name.value, []).append(f)
    out: dict[cst.FunctionDef, list[tuple[str, cst.FunctionDef, str]]] = {}
    for call in ctx.parents:  # every node of the module (prepare_all)
        if not isinstance(call, cst.Call) or not any(isinstance(a.value, cst.Name) for a in call.args):
            continue
        func = ctx.enclosing_function(call)
        for i, arg in enumerate(call.args):
            if func is None or not isinstance(arg.value, cst.Name) or arg.star:
                continue
            name = arg.value.value
            if arg.keyword is not None:
                out.setdefault(func, []).extend((name, f, arg.keyword.value)
                                                for f in by_param.get(arg.keyword.value, ()))
            elif all(a.keyword is None and not a.star for a in call.args[:i]):
                out.setdefault(func, []).extend((name, f, p) for f, p in positional(ctx, functions, call, i))
    return out


# --- where the numbers are read ---------------------------------------------------------------------

def _read_sites(ctx: FileContext, node: cst.CSTNode) -> list[tuple[cst.Name, int, list[cst.BaseExpression]]]:
    """Each tensor whose numbers ``node`` reads: (its name where the numbers are taken, the dimensions the
    reading peels, the expressions that become Python numbers)."""
    sites: dict[int, tuple] = {}
    for n in walk(node):
        if isinstance(n, cst.Subscript):
            chain = _index_chain(n)
            if chain is not None and id(chain[0]) not in sites:
                sites[id(chain[0])] = chain
        elif isinstance(n, cst.Name):
            loop = _binding_loop(ctx, n) or _binding_unpack(ctx, n)
            if loop is not None and id(loop[0]) not in sites:
                sites[id(loop[0])] = loop
    return list(sites.values())


def _index_chain(sub: cst.Subscript) -> tuple[cst.Name, int, list] | None:
    """``shapes[i][0]``: one plain index per level down to a name (outermost subscript only)."""
    depth, cur = 0, sub
    while isinstance(cur, cst.Subscript):
        if len(cur.slice) != 1 or not _plain_index(cur.slice[0].slice):
            return None
        depth, cur = depth + 1, cur.value
    return (cur, depth, [sub]) if isinstance(cur, cst.Name) else None


def _plain_index(index: cst.BaseSlice) -> bool:
    """One integer position (a number, a name, arithmetic): a tuple takes it as the tensor does."""
    if not isinstance(index, cst.Index) or index.star is not None:
        return False
    value = strip_parens(index.value)
    return not (isinstance(value, (cst.Ellipsis, cst.Tuple, cst.List, cst.Comparison))
                or (isinstance(value, cst.Name) and value.value in ("None", "True", "False")))


def _binding_loop(ctx: FileContext, name: cst.Name) -> tuple[cst.Name, int, list] | None:
    """The ``for`` (or comprehension) around ``name`` that binds it by iterating a tensor name: ``for h, w
    in shapes``, ``for level, (h, w) in enumerate(shapes)``."""
    for anc in ctx.ancestors(name):
        if isinstance(anc, cst.FunctionDef):
            return None
        loop = anc if isinstance(anc, cst.For) else _comp_for(anc)
        if loop is None:
            continue
        unpacked = _unpacked(loop.target, loop.iter)
        if unpacked is not None and name.value in target_names(unpacked[1]):
            return _loop_site(ctx, anc, loop, *unpacked)
    return None


def _loop_site(ctx: FileContext, node: cst.CSTNode, loop: cst.For | cst.CompFor, root: cst.Name,
               target: cst.CSTNode) -> tuple[cst.Name, int, list]:
    """(the iterated name, the dimensions the loop peels, the loop variables' reads)."""
    depth = 1 + (1 if isinstance(target, (cst.Tuple, cst.List)) else 0)
    scope = loop.body if isinstance(loop, cst.For) else node
    bound = set(target_names(target))
    users = [n for n in walk(scope) if isinstance(n, cst.Name) and n.value in bound and not _is_target(ctx, n, target)
             and is_load(ctx, n)]
    return root, depth, users


def _comp_for(node: cst.CSTNode) -> cst.CompFor | None:
    if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)) \
            and node.for_in.inner_for_in is None:
        return node.for_in
    return None


def _unpacked(target: cst.BaseExpression, it: cst.BaseExpression) -> tuple[cst.Name, cst.CSTNode] | None:
    it = strip_parens(it)
    if isinstance(it, cst.Name):
        return it, target
    if isinstance(it, cst.Call) and code(it.func) == "enumerate" and len(it.args) == 1 \
            and isinstance(it.args[0].value, cst.Name) and isinstance(target, cst.Tuple) \
            and len(target.elements) == 2:
        return it.args[0].value, target.elements[1].value
    return None


def _is_target(ctx: FileContext, name: cst.Name, target: cst.CSTNode) -> bool:
    return any(anc is target for anc in ctx.ancestors(name)) or name is target
