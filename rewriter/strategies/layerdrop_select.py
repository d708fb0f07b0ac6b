"""MND201 LayerDrop above 0 in training: under compile the layer is computed and its output selected (unsafe).

The LayerDrop guard (:mod:`layerdrop_guard`, safe) removes the break where the probability is 0; in training
with ``layerdrop > 0`` the draw's test still decides in Python whether the layer runs, and the graph breaks
there on every layer. With ``--unsafe-fixes`` this strategy repairs that too, for the loop shapes
transformers' encoders and decoders use:

* ``if u < p: continue`` (maybe inside ``if self.training:``): the rest of the loop body is the layer;
* ``if u < p: to_drop = True`` then ``if to_drop: ... else: <the layer>`` (or ``if not to_drop: <the layer>``);
* ``skip = True if self.training and (u < p) else False`` then ``if not skip [or synced_gpus]: <the layer>``.

Eager keeps the original decision, guarded as the safe repair guards it: the test becomes
``if not torch.compiler.is_compiling() or <flags>: <the original> else: _mend_dropN = <the test>``. Under
compile the layer always runs, and each call of it becomes ``_mend_layer_drop(_mend_dropN, h, layer, h,
...)``: the layer's first output is ``torch.where(drop, h, output)``, ``h`` being the hidden state the layer
takes, so a dropped layer passes its input on as the original's skip does. Eager reaches the same call with
``_mend_dropN = False``, and the helper then only calls the layer: eager results, exceptions and the random
stream are the original's.

**Unsafe**, under compile only: the layer is computed also where it is dropped (its cost, and its own random
draws, such as dropout's, are taken on every step); the parameters of a dropped layer get zero gradients, not
None (optimizers with momentum or weight decay then update them); a layer that writes state when it runs (a
key/value cache passed in, in training with ``use_cache``) writes it for a dropped layer too; where the
layer's output is infinite or NaN, its gradient is 0 times that. The layer's other outputs are read after it
only under Python flags (``if output_attentions:``, ``if use_cache:``): those flags, and any other operand of
the skip test (``or synced_gpus``), keep the original under compile too (the break stays there), so the
tuples the loop collects are the original's.

Matched only where every statement of the skipped part is a call of the loop's layer assigned to one name
(also through ``self._gradient_checkpointing_func(layer.__call__, h, ...)``, alone or in an ``if``/``else``),
``h = out[0]`` for the name the layer takes as its input, or an ``if <flag>:``; declined otherwise with the
statement (Informer's distilling convolution after the layer changes the sequence length, which no selection
can follow). The draw must be ``torch.rand``: Python's ``random.uniform`` is a graph input Dynamo would
specialize on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import DRAWN_HELPER, LAYER_DROP_HELPER
from mend.rewriter.analysis import code, eager_else, names_in, paren, parse_stmt, strip_parens, walk
from mend.rewriter.context import FileContext
from mend.rewriter.parts.layerdrop import guard as guard_plan
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND201",
        before="""
            import torch
            from torch import nn


            class Layer(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)

                def forward(self, x, output_attentions=False):
                    return (torch.tanh(self.fc(x)), x.softmax(-1))


            class Decoder(nn.Module):
                def __init__(self, layerdrop=0.5):
                    super().__init__()
                    self.layers = nn.ModuleList([Layer() for _ in range(3)])
                    self.layerdrop = layerdrop

                def forward(self, hidden_states, output_attentions=False):
                    attentions = ()
                    for layer in self.layers:
                        if self.training:
                            dropout_probability = torch.rand([])
                            if dropout_probability < self.layerdrop:
                                continue
                        layer_outputs = layer(hidden_states, output_attentions=output_attentions)
                        hidden_states = layer_outputs[0]
                        if output_attentions:
                            attentions += (layer_outputs[1],)
                    return hidden_states
        """,
        after="""
            import torch
            from torch import nn
            from _mend import drawn as _mend_drawn, layer_drop as _mend_layer_drop


            class Layer(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)

                def forward(self, x, output_attentions=False):
                    return (torch.tanh(self.fc(x)), x.softmax(-1))


            class Decoder(nn.Module):
                def __init__(self, layerdrop=0.5):
                    super().__init__()
                    self.layers = nn.ModuleList([Layer() for _ in range(3)])
                    self.layerdrop = layerdrop

                def forward(self, hidden_states, output_attentions=False):
                    attentions = ()
                    for layer in self.layers:
                        _mend_drop0 = False
                        if self.training:
                            dropout_probability = _mend_drawn(torch.rand([]))
                            if not torch.compiler.is_compiling() or output_attentions:
                                if self.layerdrop > 0 and dropout_probability < self.layerdrop:
                                    continue
                            else:
                                _mend_drop0 = self.layerdrop > 0 and dropout_probability < self.layerdrop
                        layer_outputs = _mend_layer_drop(_mend_drop0, hidden_states, layer, hidden_states, output_attentions=output_attentions)
                        hidden_states = layer_outputs[0]
                        if output_attentions:
                            attentions += (layer_outputs[1],)
                    return hidden_states
        """,
        run="compile(lambda x, m=Decoder().train(): m(x * 2).sum(-1))(torch.ones(2, 4))",
        unsafe=True,
    ),
)


@dataclass
class _Region:
    """The statements LayerDrop skips, read: the layer's calls, the name they bind, the input they keep."""

    calls: list[cst.Call] = field(default_factory=list)
    output: str | None = None  # the name a call binds (``layer_outputs``; ``h, attn`` for a tuple target)
    others: set[str] = field(default_factory=set)  # the names a call binds besides the input it replaces
    kept: str | None = None  # the hidden state the layer takes and its output replaces (``hidden_states``)
    has_first: bool = False  # ``kept = output[0]`` (or a tuple target whose first name is ``kept``)
    flags: list[cst.BaseExpression] = field(default_factory=list)
    prepared: set[str] = field(default_factory=set)  # names the skipped part binds for the layer's call


class _Declined(Exception):
    pass


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    if not ctx.options.unsafe:
        return None  # the safe guard answers for safe fixes
    guard = guard_plan(ctx, diag)
    if not isinstance(guard, Plan) or DRAWN_HELPER not in guard.helpers:
        return None  # not LayerDrop, or Python's `random.uniform` draw
    test_old, test_new = guard.edits[0]
    node = ctx.find((cst.If, cst.IfExp), diag)
    try:
        return _plan(ctx, diag, node, guard, test_old, test_new)
    except _Declined as exc:
        return Decline(diag, f"LayerDrop above 0 under compile: {exc}", final=False)


def _plan(ctx: FileContext, diag: Diagnostic, node: cst.If | cst.IfExp, guard: Plan,
          test_old: cst.CSTNode, test_new: cst.BaseExpression) -> Plan:
    stmt, form, flag = _decision(ctx, node)
    loop, top = _loop_statement(ctx, stmt)
    body = list(loop.body.body)
    rest = body[body.index(top) + 1:]
    region = _Region()
    targets = names_in(loop.target)
    if form == "continue":
        _read_region(rest, targets, region)
        rest = []
    else:
        rest = _split_flag(rest, flag, form, targets, region)
    _read_after(rest, region)
    _not_after_loop(ctx, loop, region)
    torch, imports = ctx.torch_name()
    drop = ctx.fresh("drop")
    test = test_new if node.test is test_old else node.test.deep_replace(test_old, test_new)
    compiled = [parse_stmt(f"{drop} = {code(strip_parens(test))}\n")]
    if form == "ifexp":
        compiled.insert(0, parse_stmt(f"{flag} = False\n"))
    unless = " or ".join(code(paren(strip_parens(f))) for f in region.flags)
    init = parse_stmt(f"{drop} = False\n")

    def split(upd: cst.BaseStatement) -> cst.BaseStatement:
        return eager_else(torch, [upd], compiled, unless=unless)

    def prepend(upd: cst.BaseStatement) -> cst.FlattenSentinel:
        return cst.FlattenSentinel([init.with_changes(leading_lines=upd.leading_lines),
                                    upd.with_changes(leading_lines=[])])

    edits = list(guard.edits)
    edits.append((stmt, split))
    edits.append((top, prepend))
    edits += [(call, _wrap(call, drop, region.kept or "")) for call in region.calls]
    kept = f"; where `{unless}` holds the original test runs, and breaks as before" if unless else ""
    return Plan(diag, f"LayerDrop in training: under compile the layer is computed and its output selected by the "
                      f"draw (`{LAYER_DROP_HELPER}`); eager keeps the skip{kept}", "unsafe", edits, imports=imports,
                helpers=[*guard.helpers, LAYER_DROP_HELPER],
                keeps_break=f"in training where `{unless}` holds" if unless else "")


def _decision(ctx: FileContext, node: cst.If | cst.IfExp) -> tuple[cst.BaseStatement, str, str | None]:
    """The statement that decides (the ``if``, or the line of ``skip = True if ... else False``), its form
    (``continue``, ``flag``, ``ifexp``) and the flag it sets."""
    if isinstance(node, cst.IfExp):
        line = ctx.statement_line(node)
        assign = line.body[0] if line is not None and len(line.body) == 1 else None
        if not (isinstance(assign, cst.Assign) and assign.value is node and len(assign.targets) == 1
                and isinstance(assign.targets[0].target, cst.Name)
                and code(node.body) == "True" and code(node.orelse) == "False"):
            raise _Declined(f"the test is not `skip = True if ... else False` (`{code(node)}`)")
        return line, "ifexp", assign.targets[0].target.value
    if node.orelse is not None or not isinstance(node.body, cst.IndentedBlock) or len(node.body.body) != 1:
        raise _Declined("the `if` does more than skip the layer or set a flag")
    only = node.body.body[0]
    small = only.body[0] if isinstance(only, cst.SimpleStatementLine) and len(only.body) == 1 else None
    if isinstance(small, cst.Continue):
        return node, "continue", None
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
            and code(small.value) == "True":
        return node, "flag", small.targets[0].target.value
    raise _Declined(f"the `if` does more than skip the layer or set a flag (`{code(only).strip()}`)")


def _loop_statement(ctx: FileContext, stmt: cst.CSTNode) -> tuple[cst.For, cst.BaseStatement]:
    """The ``for`` loop ``stmt`` is in (within its function), and the statement of its body that holds ``stmt``."""
    chain = [stmt]
    for anc in ctx.ancestors(stmt):
        if isinstance(anc, cst.For) and len(chain) >= 2 and chain[-1] is anc.body:
            return anc, chain[-2]
        if isinstance(anc, (cst.FunctionDef, cst.Lambda, cst.While, cst.Try, cst.With, cst.ClassDef)):
            break
        chain.append(anc)
    raise _Declined("the test is not in a `for` loop's body")


def _split_flag(rest: list, flag: str, form: str, targets: set[str], region: _Region) -> list:
    """Read the ``if not flag: <layer>`` (or ``if flag: ... else: <layer>``) after the decision; the other
    statements are returned. An ``if flag:`` alone is dead under compile, where the flag stays False."""
    others, found = [], False
    for s in rest:
        if flag not in names_in(s):
            others.append(s)
            continue
        if not isinstance(s, cst.If):
            raise _Declined(f"`{flag}` is read outside an `if` (`{_first_line(s)}`)")
        test = strip_parens(s.test)
        extra: list[cst.BaseExpression] = []
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or) and form == "ifexp":
            test, extra = strip_parens(test.left), [strip_parens(test.right)]
        negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
        bare = strip_parens(test.expression) if negated else test
        if not (isinstance(bare, cst.Name) and bare.value == flag) or any(flag in names_in(e) for e in extra):
            raise _Declined(f"`{flag}` is tested in a form not followed (`{code(s.test)}`)")
        if negated and s.orelse is None and not found:
            block = s.body
        elif not negated and isinstance(s.orelse, cst.Else) and not found and not extra:
            block = s.orelse.body
        elif not negated and s.orelse is None and not extra:
            continue  # `if skip: layer_outputs = (None, None)`: not run under compile
        else:
            raise _Declined(f"`{flag}` is tested more than once around the layer (`{code(s.test)}`)")
        found = True
        for e in extra:
            _static(e, region, "the skip test")
        region.flags += extra
        _read_region(list(block.body), targets, region)
    if not found:
        raise _Declined(f"no `if not {flag}:` holds the layer")
    return others


def _read_region(stmts: list, targets: set[str], region: _Region) -> None:
    for s in stmts:
        if isinstance(s, cst.If) and _calls_only(s, targets, region):
            continue
        if isinstance(s, cst.If) and s.orelse is None:
            _static(s.test, region, f"`if {code(s.test)}:`")
            region.flags.append(s.test)
            continue
        small = s.body[0] if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 else None
        if isinstance(small, cst.Assign) and _call_assign(small, targets, region):
            continue
        if isinstance(small, cst.Assign) and _first_of_output(small, region):
            continue
        if isinstance(small, cst.Assign) and _argument(small, region):
            region.prepared |= names_in(small.targets[0].target)
            continue
        if isinstance(small, cst.Pass):
            continue
        raise _Declined(f"the skipped statements do more than call the layer (`{_first_line(s)}`)")
    if not region.calls or region.kept is None or not region.has_first:
        raise _Declined("no call of the loop's layer whose first output replaces its input")


def _calls_only(s: cst.If, targets: set[str], region: _Region) -> bool:
    """``if self.gradient_checkpointing and self.training: out = checkpoint(layer.__call__, h, ...) else: out =
    layer(h, ...)``: every branch one call of the layer."""
    branches = []
    cur: cst.CSTNode | None = s
    while isinstance(cur, cst.If):
        branches.append(cur.body)
        cur = cur.orelse
    if isinstance(cur, cst.Else):
        branches.append(cur.body)
    for block in branches:
        stmts = list(block.body) if isinstance(block, cst.IndentedBlock) else []
        smalls = [st.body[0] for st in stmts if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1]
        if len(smalls) != 1 or len(stmts) != 1 or not isinstance(smalls[0], cst.Assign) \
                or _layer_call(smalls[0].value, targets) is None:
            return False
    for block in branches:
        _call_assign(block.body[0].body[0], targets, region)
    return True


def _call_assign(assign: cst.Assign, targets: set[str], region: _Region) -> bool:
    found = _layer_call(assign.value, targets)
    if found is None or len(assign.targets) != 1:
        return False
    call, kept = found
    target = assign.targets[0].target
    if isinstance(target, cst.Name):
        output = target.value
        region.has_first = region.has_first or output == kept  # `x = layer(x)`: the selection is the name itself
    elif isinstance(target, cst.Tuple) and target.elements and isinstance(target.elements[0].value, cst.Name):
        output = code(target)
        region.has_first = region.has_first or target.elements[0].value.value == kept
    else:
        raise _Declined(f"the layer's output is bound to `{code(target)}`")
    if region.output not in (None, output) or region.kept not in (None, kept):
        raise _Declined("the layer's calls bind different names or take different inputs")
    region.output, region.kept = output, kept
    region.others |= names_in(target) - {kept}
    region.calls.append(call)
    return True


def _layer_call(value: cst.BaseExpression, targets: set[str]) -> tuple[cst.Call, str] | None:
    """``layer(h, ...)``, ``layer.__call__(h, ...)`` or ``f(layer.__call__, h, ...)`` for ``layer`` bound by the
    loop; with the name ``h`` of the input the layer's output replaces."""
    if not isinstance(value, cst.Call):
        return None
    positional = [a for a in value.args if a.keyword is None and not a.star]

    def is_layer(expr: cst.BaseExpression) -> bool:
        e = strip_parens(expr)
        if isinstance(e, cst.Attribute) and e.attr.value in ("__call__", "forward"):
            e = e.value
        return isinstance(e, cst.Name) and e.value in targets

    if is_layer(value.func):
        hidden = positional[0].value if positional else None
    elif positional and is_layer(positional[0].value):
        hidden = positional[1].value if len(positional) > 1 else None
    else:
        return None
    if not isinstance(hidden, cst.Name):
        raise _Declined("the layer's input is not a name")
    return value, hidden.value


def _argument(assign: cst.Assign, region: _Region) -> bool:
    """``past = caches[idx] if caches is not None else None``: a name bound for the layer's call, by an
    expression that calls nothing (running it where the layer is dropped changes nothing else), neither the
    layer's input nor its output."""
    theirs = region.others | {region.kept} - {None}
    return len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name) \
        and assign.targets[0].target.value not in theirs and not names_in(assign.value) & theirs \
        and not any(isinstance(n, cst.Call) for n in walk(assign.value))


def _first_of_output(assign: cst.Assign, region: _Region) -> bool:
    """``h = out[0]``: the layer's first output becomes its input's name."""
    value = assign.value
    if not (len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name) and region.output
            and isinstance(value, cst.Subscript) and code(value.value) == region.output
            and len(value.slice) == 1 and code(value.slice[0].slice) == "0"):
        return False
    if assign.targets[0].target.value != region.kept:
        raise _Declined(f"the layer's output goes to `{assign.targets[0].target.value}`, not to its input "
                        f"`{region.kept}`")
    region.has_first = True
    return True


def _read_after(rest: list, region: _Region) -> None:
    """After the skipped part, the layer's outputs are read only under flags, which then keep the original;
    the names bound for its call, not at all."""
    for s in rest:
        if names_in(s) & region.prepared:
            raise _Declined(f"a name bound for the layer's call is read after it (`{_first_line(s)}`)")
        if not names_in(s) & region.others:
            continue  # what is read after is the selected value (`x = layer(x)`) or nothing of the layer's
        if isinstance(s, cst.If) and s.orelse is None:
            _static(s.test, region, f"`if {code(s.test)}:`")
            region.flags.append(s.test)
            continue
        raise _Declined(f"the layer's output is read after it (`{_first_line(s)}`)")


def _not_after_loop(ctx: FileContext, loop: cst.For, region: _Region) -> None:
    block = ctx.parent(loop)
    body = list(block.body) if isinstance(block, cst.IndentedBlock) else []
    after = body[body.index(loop) + 1:] if loop in body else []
    for name in sorted(region.prepared | region.others):
        if any(name in names_in(s) for s in after):
            raise _Declined(f"`{name}` is read after the loop")


def _static(test: cst.BaseExpression, region: _Region, where: str) -> None:
    """A Python flag: names and attributes under ``not``/``and``/``or``, ``x is None``; none of the layer's
    outputs."""
    for n in _walk_expr(test):
        if isinstance(n, (cst.Name, cst.Attribute, cst.BooleanOperation, cst.UnaryOperation)):
            continue
        if isinstance(n, cst.Comparison) and all(isinstance(c.operator, (cst.Is, cst.IsNot))
                                                 and code(c.comparator) == "None" for c in n.comparisons):
            continue
        raise _Declined(f"{where} may not be a Python flag")
    if names_in(test) & (region.others | {region.kept} - {None}):
        raise _Declined(f"{where} reads the layer's output")


def _walk_expr(expr: cst.BaseExpression):
    e = strip_parens(expr)
    yield e
    if isinstance(e, cst.BooleanOperation):
        yield from _walk_expr(e.left)
        yield from _walk_expr(e.right)
    elif isinstance(e, cst.UnaryOperation):
        yield from _walk_expr(e.expression)


def _wrap(call: cst.Call, drop: str, kept: str) -> cst.Call:
    """``layer(h, ...)`` -> ``_mend_layer_drop(drop, h, layer, h, ...)``, the arguments as written."""
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    head = [cst.Arg(cst.Name(drop), comma=comma), cst.Arg(cst.Name(kept), comma=comma),
            cst.Arg(call.func, comma=comma if call.args else cst.MaybeSentinel.DEFAULT)]
    return call.with_changes(func=cst.Name(LAYER_DROP_HELPER), args=[*head, *call.args])


def _first_line(s: cst.CSTNode) -> str:
    text = code(s).strip().splitlines()
    return text[0] if text else ""
