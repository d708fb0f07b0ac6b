"""MND201 ``if``/``else`` whose branches call submodules: ``torch.cond`` under compile, eager keeps the ``if``.

Branches whose assignments call submodules (``self.m(...)``) cannot be predicated with ``torch.where``, since
both sides would run. A plain ``if``/``else`` (or else-less ``if``) of assignments becomes, under compile
only::

    if not torch.compiler.is_compiling():
        <the original if>                    # eager: unchanged
    else:
        def _mend_trueN():  ...; return (a, b)   # assigned names renamed, outputs = names read after
        def _mend_falseN(): ...; return (a.clone(), b)
        a, b = torch.cond(cond, _mend_trueN, _mend_falseN, ())

The branch functions close over their inputs (no operands, so no tensor proof is needed for them);
an output computed by no call in a branch is cloned, since torch.cond rejects outputs aliasing its
inputs. Always unsafe: dtypes of the two sides must agree, views of inputs fail to trace, and
parameters of the branch not taken receive zero gradients rather than None (measured, torch 2.13).
A chain mend cannot read (:func:`~mend.rewriter.parts.branches.read_chain`) is declined with its reason, and
the strategies after this one may still repair it.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import FunctionFacts, code, eager_else, parse_stmt, strip_parens
from mend.rewriter.context import FileContext
from mend.rewriter.parts.branches import IfSite, assigns, defined_before, if_site, names_read_after, read_chain
from mend.rewriter.parts.lower import Declined, is_pass, with_helpers
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND201",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.proj = nn.Linear(4, 4)

                def forward(self, x: torch.Tensor):
                    h = x * 2
                    if h.abs().sum() > 10:
                        h = self.proj(h)
                    return h + 1
        """,
        after="""
            import torch
            from torch import nn


            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.proj = nn.Linear(4, 4)

                def forward(self, x: torch.Tensor):
                    h = x * 2
                    if not torch.compiler.is_compiling():
                        if h.abs().sum() > 10:
                            h = self.proj(h)
                    else:
                        def _mend_true0():
                            _mend_h = self.proj(h)
                            return (_mend_h,)
                        def _mend_false1():
                            return (h.clone(),)
                        h, = torch.cond(h.abs().sum() > 10, _mend_true0, _mend_false1, ())
                    return h + 1
        """,
        run="compile(M())(torch.arange(8.0).reshape(2, 4))",
        unsafe=True,
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    site = if_site(ctx, diag)
    if not isinstance(site, IfSite):
        return site
    try:
        chain = read_chain(ctx, site.node, site.facts)
    except Declined as exc:
        return Decline(diag, str(exc), final=False)
    if not chain.needs_cond:
        return None
    try:
        if chain.returns:
            raise Declined("a branch with submodule calls returns; torch.cond is applied only to "
                           "branches that assign names")
        if len(chain.tests) != 1 or chain.static_prefix:
            raise Declined("branches with submodule calls are moved into torch.cond only for a "
                           "plain `if`/`else` (no elif, no static `and` prefix)")
        else_stmts = chain.bodies[1] if chain.has_else else None
        plan = _fix_cond(ctx, diag, site.node, site.facts, site.lower(chain.tests[0]), chain.bodies[0], else_stmts,
                         site.torch, site.imports)
    except Declined as exc:
        return Decline(diag, str(exc))
    return with_helpers(plan, site.lower)


class _Rename(cst.CSTTransformer):
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        return updated_node.with_changes(value=self.names.get(updated_node.value, updated_node.value))

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.Attribute:
        return updated_node.with_changes(attr=original_node.attr)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        return updated_node.with_changes(keyword=original_node.keyword)


def _branch_function(name: str, stmts: list, outputs: list[str]) -> str:
    """A zero-argument function running ``stmts`` and returning ``outputs``.

    Names assigned in the branch are renamed (``_mend_x``) from their first assignment on, so the
    nested function reads the enclosing value before it (no UnboundLocalError) and never rebinds
    it. An output the branch does not compute from a call is cloned: torch.cond rejects a branch
    output that aliases an input or a closed-over tensor.
    """
    renamed: dict[str, str] = {}
    lines = []
    last_value: dict[str, cst.BaseExpression] = {}
    for s in stmts:
        if is_pass(s):
            continue
        value = s.value.visit(_Rename(dict(renamed)))
        target = s.targets[0].target.value
        renamed[target] = f"_mend_{target}"
        last_value[target] = strip_parens(s.value)
        lines.append(f"    {renamed[target]} = {code(value)}")
    rets = []
    for o in outputs:
        v = last_value.get(o)
        ref = renamed.get(o, o)
        rets.append(ref if isinstance(v, (cst.Call, cst.BinaryOperation, cst.UnaryOperation)) else f"{ref}.clone()")
    lines.append(f"    return ({', '.join(rets)}{',' if len(rets) == 1 else ''})")
    return f"def {name}():\n" + "\n".join(lines) + "\n"


def _fix_cond(ctx: FileContext, diag: Diagnostic, node: cst.If, facts: FunctionFacts, cond: str,
              body: list, else_stmts: list | None, torch: str, imports: list) -> Plan:
    """``if c: A else: B`` with submodule calls -> ``torch.cond`` under compile; eager keeps the if."""
    live_after = names_read_after(ctx, node, facts)
    outputs: list[str] = []
    for b in [body] + ([else_stmts] if else_stmts is not None else []):
        for s in b:
            if isinstance(s, cst.Assign):
                n = s.targets[0].target.value
                if n in live_after and n not in outputs:
                    outputs.append(n)
    if not outputs:
        raise Declined("the branches assign nothing that is read after the `if`")
    branches = [body] + ([else_stmts] if else_stmts is not None else [[]])
    for n in outputs:
        if not defined_before(ctx, facts, n, node) and not all(assigns(b, n) for b in branches):
            raise Declined(f"`{n}` is not defined before the `if` and not assigned in every branch, "
                            "so torch.cond has no value for it on one side")
        values = [s.value for b in branches for s in b if isinstance(s, cst.Assign)
                  and s.targets[0].target.value == n]
        if not (n in facts.tensor_names or any(facts.is_tensor(v) for v in values)):
            raise Declined(f"cannot prove `{n}` holds a tensor (torch.cond outputs must be tensors)")
    true_fn, false_fn = ctx.fresh("true"), ctx.fresh("false")
    targets = ", ".join(outputs) + ("," if len(outputs) == 1 else "")
    texts = [
        _branch_function(true_fn, body, outputs),
        _branch_function(false_fn, else_stmts or [], outputs),
        f"{targets} = {torch}.cond({cond}, {true_fn}, {false_fn}, ())\n",
    ]
    compiled = [parse_stmt(t) for t in texts]
    split = eager_else(torch, [node], compiled)
    return Plan(diag, "data-dependent branch with submodule calls -> torch.cond under compile "
                      "(eager keeps the if)", "unsafe", [(node, split)], imports=imports)
