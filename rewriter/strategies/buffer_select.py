"""MND201: a data-dependent branch that selects which tensor a module buffer holds (LongRoPE).

transformers' ``longrope_frequency_update`` (``modeling_rope_utils.py``, Phi-3/Phi-4 with LongRoPE
scaling) picks the rotary frequencies by the longest position it is called with::

    if seq_len > original_max_position_embeddings:          # seq_len = torch.max(position_ids) + 1
        if not hasattr(self, "long_inv_freq"):
            self.long_inv_freq, _ = self.rope_init_fn(self.config, device, seq_len=...)
        self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)
    else:
        self.original_inv_freq = self.original_inv_freq.to(device)
        self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)

Under compile both sides' preparations run (a lazily created attribute is created now; a ``.to()`` move
of an attribute gives it the value it had), then the buffer is registered once, holding the selected
value: ``self.register_buffer("inv_freq", _mend_where(cond, long, short), persistent=False)``.

Not ``self.inv_freq.copy_(torch.where(...))`` (the published GraphMend repair): right after
``__init__`` the buffer *is* ``original_inv_freq`` (``self.original_inv_freq = self.inv_freq``), so an
in-place copy of the long frequencies would overwrite the short ones for every later call.

Unsafe: the buffer holds a new tensor equal to the selected one, not that tensor itself; the lazy
attribute is created (its initialiser run) even when the short side is selected; a ``.to()`` move
happens on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import FunctionFacts, code, eager_else, names_in, parse_stmt, strip_parens, walk
from mend.rewriter.context import FileContext
from mend.rewriter.parts.branches import IfSite, if_site, names_read_after
from mend.rewriter.parts.lower import Declined, drop_item, with_helpers
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND201",
        before='''
            import torch
            from torch import nn


            class Rotary(nn.Module):
                """LongRoPE: short or long frequencies, by the longest position."""

                def __init__(self):
                    super().__init__()
                    self.register_buffer("inv_freq", torch.ones(4), persistent=False)
                    self.original_inv_freq = self.inv_freq
                    self.long_inv_freq = torch.full((4,), 0.5)

                def forward(self, position_ids):
                    seq_len = torch.max(position_ids) + 1
                    if seq_len > 8:
                        self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)
                    else:
                        self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)
                    return position_ids[:, None].float() * self.inv_freq
        ''',
        after='''
            import torch
            from torch import nn
            from _mend import where as _mend_where


            class Rotary(nn.Module):
                """LongRoPE: short or long frequencies, by the longest position."""

                def __init__(self):
                    super().__init__()
                    self.register_buffer("inv_freq", torch.ones(4), persistent=False)
                    self.original_inv_freq = self.inv_freq
                    self.long_inv_freq = torch.full((4,), 0.5)

                def forward(self, position_ids):
                    seq_len = torch.max(position_ids) + 1
                    if not torch.compiler.is_compiling():
                        if seq_len > 8:
                            self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)
                        else:
                            self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)
                    else:
                        self.register_buffer("inv_freq", _mend_where(seq_len > 8, self.long_inv_freq, self.original_inv_freq), persistent=False)
                    return position_ids[:, None].float() * self.inv_freq
        ''',
        run="compile(Rotary())(torch.arange(12))",
        unsafe=True,
    ),
)


@dataclass
class BufferSelection:
    """The two sides of the branch: statements before the registration, and the registration call."""

    preps: tuple[list[cst.BaseStatement], list[cst.BaseStatement]]
    calls: tuple[cst.Call, cst.Call]


def _statements(block: cst.BaseSuite) -> list[cst.BaseStatement]:
    if isinstance(block, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=list(block.body))]
    return list(block.body)


def _register_call(stmt: cst.BaseStatement) -> cst.Call | None:
    """``X.register_buffer("name", value, ...)`` as a whole statement."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
        return None
    call = stmt.body[0].value
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "register_buffer" and isinstance(call.func.value, cst.Name)):
        return None
    positional = [a for a in call.args if a.keyword is None]
    if len(positional) != 2 or any(a.star for a in call.args) or not isinstance(positional[0].value, cst.SimpleString):
        return None
    return call


def match(node: cst.If) -> BufferSelection | None:
    """``if c: ...; X.register_buffer("b", A, **kw) else: ...; X.register_buffer("b", B, **kw)``: the
    same receiver, buffer name and keyword arguments on both sides; None for any other ``if``."""
    if not isinstance(node.orelse, cst.Else):
        return None
    sides = (_statements(node.body), _statements(node.orelse.body))
    calls = tuple(_register_call(s[-1]) if s else None for s in sides)
    if calls[0] is None or calls[1] is None:
        return None
    a, b = calls

    def fixed_parts(c: cst.Call) -> tuple[str, ...]:
        return (code(c.func), code(c.args[0].value), *sorted(code(x) for x in c.args if x.keyword is not None))

    if fixed_parts(a) != fixed_parts(b):
        return None
    return BufferSelection((sides[0][:-1], sides[1][:-1]), (a, b))


def compiled_statements(sel: BufferSelection, facts: FunctionFacts, cond: str) -> list[cst.BaseStatement]:
    """The statements compiled code runs instead of the branch; ``ValueError`` with the reason when a
    preparation cannot run on both sides or a value is not a plain read."""
    assigned = []
    for prep in sel.preps:
        names: set[str] = set()
        for stmt in prep:
            names |= _hoistable(stmt, facts)
        assigned.append(names)
    values = [c.args[1].value for c in sel.calls]
    for v in values:
        if not facts.is_pure(v):
            raise ValueError(f"the buffer's value `{code(v)}` has calls mend cannot prove side-effect free")
    for k in (0, 1):
        other = 1 - k
        read = set().union(*(_attributes(s) for s in sel.preps[other])) | _attributes(values[other])
        clash = assigned[k] & read
        if clash:
            raise ValueError(f"one side sets `{sorted(clash)[0]}`, which the other side reads; both sides' "
                             "preparations cannot run before the selection")
    call = sel.calls[0]
    selected = f"_mend_where({cond}, {code(strip_parens(values[0]))}, {code(strip_parens(values[1]))})"
    args = [code(call.args[0].value), selected] + [f"{x.keyword.value}={code(x.value)}" for x in call.args
                                                   if x.keyword is not None]
    out = [s.with_changes(leading_lines=[]) for prep in sel.preps for s in prep]
    return out + [parse_stmt(f"{code(call.func)}({', '.join(args)})\n")]


def local_names(sel: BufferSelection) -> set[str]:
    """Plain names the preparations assign (``_`` in ``X.a, _ = ...``): compiled code assigns them on
    both sides, so the code after the branch must not read them."""
    return {n.value for prep in sel.preps for stmt in prep for n in walk(stmt)
            if isinstance(n, cst.AssignTarget) for n in _flat_targets(n.target) if isinstance(n, cst.Name)}


def _flat_targets(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [e.value for e in target.elements]
    return [target]


def _attributes(node: cst.CSTNode) -> set[str]:
    return {code(n) for n in walk(node) if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name)}


def _hoistable(stmt: cst.BaseStatement, facts: FunctionFacts) -> set[str]:
    """The attributes ``stmt`` sets, when it may run on both sides; else ``ValueError``.

    * ``X.a = X.a.to(...)``: a move; where ``X.a`` is already there it is the same tensor;
    * ``if not hasattr(X, "a"): X.a = ...`` (also ``X.a, _ = ...``): a lazily created attribute whose
      initialiser reads no tensor the branch computes: created earlier, with the value it would get.
    """
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        target = _move_target(stmt.body[0])
        if target is not None:
            return {target}
    if isinstance(stmt, cst.If) and stmt.orelse is None:
        attr = _lazy_attribute(stmt.test)
        body = _statements(stmt.body)
        if attr is not None and len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine) \
                and len(body[0].body) == 1 and isinstance(body[0].body[0], cst.Assign):
            assign = body[0].body[0]
            targets = _target_names(assign)
            if attr in targets and all(t == attr or t == "_" for t in targets) \
                    and not (facts.tensor_names & names_in(assign.value)):
                return {attr}
    first = code(stmt.with_changes(leading_lines=[])).strip().splitlines()[0]
    raise ValueError(f"`{first}` cannot run on both sides (only `X.a = X.a.to(...)` "
                     "and `if not hasattr(X, \"a\"): X.a = ...` are run before the selection)")


def _move_target(assign: cst.Assign) -> str | None:
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Attribute):
        return None
    target = code(assign.targets[0].target)
    v = assign.value
    if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "to" \
            and code(v.func.value) == target:
        return target
    return None


def _lazy_attribute(test: cst.BaseExpression) -> str | None:
    """``not hasattr(X, "a")`` -> ``X.a``."""
    test = strip_parens(test)
    if not (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)):
        return None
    call = strip_parens(test.expression)
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "hasattr"
            and len(call.args) == 2 and isinstance(call.args[0].value, cst.Name)
            and isinstance(call.args[1].value, cst.SimpleString)):
        return None
    name = call.args[1].value.evaluated_value
    return f"{call.args[0].value.value}.{name}" if isinstance(name, str) and name.isidentifier() else None


def _target_names(assign: cst.Assign) -> list[str]:
    out = []
    for t in assign.targets:
        elts = t.target.elements if isinstance(t.target, cst.Tuple) else [t.target]
        for e in elts:
            e = e.value if isinstance(e, cst.Element) else e
            out.append(code(e) if isinstance(e, (cst.Attribute, cst.Name)) else "?")
    return out


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    site = if_site(ctx, diag)
    if not isinstance(site, IfSite):
        return site
    try:
        plan = _fix_buffer_selection(ctx, diag, site) if match(site.node) is not None else None
    except Declined as exc:
        return Decline(diag, str(exc))
    return with_helpers(plan, site.lower) if plan is not None else None


def _fix_buffer_selection(ctx: FileContext, diag: Diagnostic, site: IfSite) -> Plan:
    """Both sides register one buffer: under compile it is registered once, holding the selected value
    (LongRoPE's ``inv_freq``); eager keeps the branch."""
    node, facts = site.node, site.facts
    selection = match(node)
    if not facts.is_pure(drop_item(node.test)):
        raise Declined("the condition has calls mend cannot prove side-effect free")
    read_later = local_names(selection) & names_read_after(ctx, node, facts)
    if read_later:
        raise Declined(f"`{sorted(read_later)[0]}`, assigned by one side, is read after the `if`")
    try:
        compiled = compiled_statements(selection, facts, site.lower(node.test))
    except ValueError as exc:
        raise Declined(str(exc)) from None
    split = eager_else(site.torch, [node], compiled)
    return Plan(diag, "data-dependent branch (buffer) -> one register_buffer of the torch.where-selected value "
                      "under compile (eager keeps the branch)", "unsafe", [(node, split)], imports=site.imports,
                helpers=["_mend_where"])
