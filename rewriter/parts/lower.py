"""A Python test over tensors as one bool tensor: what the branch repairs (MND201, MND203) share.

:class:`Lower` writes a condition as a bool-tensor expression: ``and``/``or``/``not`` become
``torch.logical_*``, ``.item()``/``float()`` become ``.double()`` (compares like the Python number), ``bool(t)``
is ``t``, ``any(t)``/``all(t)`` of a 1-D tensor ``_mend_any(t)``. A leading *static* prefix of an ``and`` chain
(``h.dtype == torch.float16 and ...``) stays a Python test (:func:`split_static_prefix`). A condition that
cannot be lowered raises :class:`Declined` with the reason.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.static.torch_facts import BOOL_OPS
from mend.rewriter.analysis import FunctionFacts, code, parse_expr, strip_parens, walk


class Declined(Exception):
    """The repair cannot be made; the message says why."""


class Lower:
    """Lower a Python condition over tensors to a bool-tensor expression (text)."""

    def __init__(self, facts: FunctionFacts, torch: str) -> None:
        self.facts = facts
        self.torch = torch
        self.helpers: list[str] = []  # helpers the lowered text calls

    def __call__(self, expr: cst.BaseExpression) -> str:
        expr = strip_parens(expr)
        t = self.torch
        if isinstance(expr, cst.BooleanOperation):
            fn = "logical_and" if isinstance(expr.operator, cst.And) else "logical_or"
            return f"{t}.{fn}({self(expr.left)}, {self(expr.right)})"
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            return f"{t}.logical_not({self(expr.expression)})"
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "bool" \
                and len(expr.args) == 1 and not expr.args[0].keyword and "bool" not in self.facts.stores:
            return self(expr.args[0].value)
        if builtin_reduction(self.facts, expr):  # ``any(t)``: ``torch.any(t)`` for a 1-D tensor
            self.helpers.append("_mend_any")
            every = ", every=True" if expr.func.value == "all" else ""
            return f"_mend_any({code(expr.args[0].value)}{every})"
        if not self.facts.reads_data(drop_item(expr)):
            raise Declined(f"`{code(expr)}` is not a tensor condition; only a leading static part "
                            "of an `and` chain can stay in Python")
        if isinstance(expr, cst.Call):
            qual = self.facts.imports.qualify(expr.func) or ""
            if qual in {"torch.equal", "torch.allclose"} or (
                isinstance(expr.func, cst.Attribute) and expr.func.attr.value in {"equal", "allclose", "tolist"}
            ):
                raise Declined("`torch.equal`/`allclose` return Python bools; no tensor form here")
        expr = item_to_double(expr, self.facts)
        if isinstance(expr, cst.Comparison):
            if len(expr.comparisons) != 1:
                raise Declined("chained comparisons are not lowered")
            op = expr.comparisons[0].operator
            if isinstance(op, (cst.Is, cst.IsNot, cst.In, cst.NotIn)):
                raise Declined("`is`/`in` tests are not tensor conditions")
            return code(expr)
        if isinstance(expr, cst.Call):
            name = (expr.func.attr.value if isinstance(expr.func, cst.Attribute)
                    else (self.facts.imports.qualify(expr.func) or "").rsplit(".", 1)[-1])
            if name in BOOL_OPS:
                return code(expr)
        return f"({code(expr)}).bool()" if not isinstance(expr, (cst.Name, cst.Call, cst.Attribute)) \
            else f"{code(expr)}.bool()"


def builtin_reduction(facts: FunctionFacts, expr: cst.BaseExpression) -> bool:
    """``any(t)`` / ``all(t)`` of a tensor (the builtins, not shadowed)."""
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("any", "all") \
        and expr.func.value not in facts.stores and len(expr.args) == 1 and not expr.args[0].keyword \
        and not expr.args[0].star and facts.reads_data(expr.args[0].value)


class _DropItem(cst.CSTTransformer):
    """``t.item()``, ``bool(t)``, ``float(t)`` -> ``t``: what a condition reads, for the purity and
    tensor-ness questions (the lowering itself keeps their meaning: :func:`item_to_double`)."""

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = updated_node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "item" and not updated_node.args:
            return func.value
        if isinstance(func, cst.Name) and func.value in {"bool", "float"} and len(updated_node.args) == 1 \
                and not updated_node.args[0].keyword:
            return updated_node.args[0].value
        return updated_node


class _ItemToDouble(cst.CSTTransformer):
    def __init__(self, facts: FunctionFacts) -> None:
        self.facts = facts

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = updated_node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "item" and not updated_node.args:
            return updated_node.with_changes(func=func.with_changes(attr=cst.Name("double")))
        if isinstance(func, cst.Name) and func.value == "float" and len(updated_node.args) == 1 \
                and not updated_node.args[0].keyword and self.facts.reads_data(updated_node.args[0].value):
            return parse_expr(f"({code(updated_node.args[0].value)}).double()")
        return updated_node


def item_to_double(expr: cst.BaseExpression, facts: FunctionFacts) -> cst.BaseExpression:
    """``t.item()`` / ``float(t)`` -> ``t.double()`` in a lowered condition: a 0-d float64 tensor computes and compares
    like the Python number (``t.item() >= 0.1`` on a float16 ``t`` would otherwise compare against
    0.1 rounded to float16; ``t.item() * 2`` would overflow in float16). Exact for integers below 2**53."""
    out = expr.visit(_ItemToDouble(facts))
    assert isinstance(out, cst.BaseExpression)
    return out


def drop_item(expr: cst.BaseExpression) -> cst.BaseExpression:
    out = expr.visit(_DropItem())
    assert isinstance(out, cst.BaseExpression)
    return out


def split_static_prefix(test: cst.BaseExpression, facts: FunctionFacts) -> tuple[list, list]:
    """Operands of a top-level ``and`` chain: (static prefix, rest)."""
    ops: list[cst.BaseExpression] = []

    def flat(e: cst.BaseExpression) -> None:
        e2 = strip_parens(e) if not getattr(e, "lpar", None) else e
        if isinstance(e2, cst.BooleanOperation) and isinstance(e2.operator, cst.And) and not e2.lpar:
            flat(e2.left)
            flat(e2.right)
        else:
            ops.append(e)

    flat(strip_parens(test))  # the parentheses around a whole test spread over lines are not a group
    i = 0
    while i < len(ops) and not facts.reads_data(drop_item(strip_parens(ops[i]))):
        i += 1
    return ops[:i], ops[i:]


def no_tensor_part(test: cst.BaseExpression, facts: FunctionFacts) -> str:
    """Why ``test`` has no part mend can write as a tensor (the decline's reason): the values it reads, and
    what this function shows of each (an ``.item()`` reads a number, but of a value mend must know is a
    tensor: NumPy's arrays and scalars have ``.item()`` too)."""
    notes: list[str] = []
    items = {code(n.func.value) for n in walk(test) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
             and n.func.attr.value == "item"}
    for node in _values_read(test):
        note = _not_a_tensor(node, facts)
        if note and code(node) in items:
            note += f" (`{code(node)}.item()` does not tell: NumPy's values have `.item()` too)"
        if note and note not in notes:
            notes.append(note)
    head = f"the condition `{short(code(test).strip())}` reads no value mend knows to be a tensor"
    return f"{head}: {'; '.join(notes[:3])}" if notes else head


def short(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters for a message."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _values_read(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The names and ``self.`` attributes ``test`` reads, in order (a called function is not one)."""
    out: list[cst.BaseExpression] = []

    def visit(e: cst.CSTNode) -> None:
        if isinstance(e, cst.Attribute):
            base = e
            while isinstance(base, cst.Attribute):
                base = base.value
            if isinstance(base, cst.Name) and base.value in {"self", "cls"}:
                out.append(e)
                return
            visit(e.value)
            return
        if isinstance(e, cst.Name):
            if e.value not in {"True", "False", "None"}:
                out.append(e)
            return
        if isinstance(e, cst.Call):
            if isinstance(e.func, cst.Attribute):
                visit(e.func.value)  # the receiver of a method; a function's name is not a value read
            for a in e.args:
                visit(a.value)
            return
        for child in e.children:
            visit(child)

    visit(test)
    return out


def _not_a_tensor(node: cst.BaseExpression, facts: FunctionFacts) -> str | None:
    """What mend knows of ``node`` (a name or a ``self.`` attribute) that is not a tensor, or None."""
    if isinstance(node, cst.Attribute):
        return f"`{code(node)}` is an attribute, which mend does not follow to a tensor (a buffer, say)"
    name = node.value
    if name in facts.tensor_names or name in facts.imports.names:
        return None
    if name in facts.params:
        return f"`{name}` is a parameter without a `torch.Tensor` annotation or a use only tensors have"
    values = [s.value for s in facts.stores.get(name, []) if isinstance(s, cst.Assign)]
    other = next((v for v in values if not facts.is_tensor(v)), None)
    if other is not None:
        also = "also " if any(facts.is_tensor(v) for v in values) else ""
        return f"`{name}` is {also}assigned `{code(other).strip()}`"
    if name not in facts.stores:
        return f"`{name}` is not assigned in this function"
    return None


def and_text(ops: list[cst.BaseExpression]) -> str:
    return " and ".join(code(o) for o in ops)


def and_of(ops: list[cst.BaseExpression]) -> cst.BaseExpression:
    expr = ops[0]
    for r in ops[1:]:
        expr = cst.BooleanOperation(left=expr, operator=cst.And(), right=r)
    return expr


def is_pass(s: cst.BaseSmallStatement) -> bool:
    return isinstance(s, cst.Pass)


def lowered_tail(node: cst.If, facts: FunctionFacts, lower: Lower,
                  what: str = "the condition") -> tuple[list, str] | None:
    """The test's static prefix (a Python test) and the rest lowered to a bool tensor, or None where the
    test has no tensor part; declined where the rest has calls mend cannot prove side-effect free."""
    static_prefix, tail = split_static_prefix(node.test, facts)
    if not tail:
        return None
    if not all(facts.is_pure(drop_item(t)) for t in tail):
        raise Declined(f"{what} has calls mend cannot prove side-effect free")
    return static_prefix, lower(and_of(tail))


def speculated_tests(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of a condition, in order: all but the first may run only in the rewrite
    (``and``/``or`` short-circuit in Python; ``torch.logical_and``/``logical_or`` compute both)."""
    test = strip_parens(test)
    if isinstance(test, cst.BooleanOperation):
        return speculated_tests(test.left) + speculated_tests(test.right)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return speculated_tests(test.expression)
    return [drop_item(test)]


def static_index(facts: FunctionFacts, sub: cst.Subscript) -> bool:
    """Every index is a number, a slice of numbers, ``None`` or ``...``."""
    def static(e: cst.BaseExpression | None) -> bool:
        return e is None or facts.is_python_number(e) or (isinstance(e, cst.Name) and e.value == "None") \
            or isinstance(e, cst.Ellipsis)

    for el in sub.slice:
        s = el.slice
        if isinstance(s, cst.Slice):
            if not (static(s.lower) and static(s.upper) and static(s.step)):
                return False
        elif not static(s.value):
            return False
    return True


def with_helpers(plan, lower: Lower):
    """``plan`` calling, besides its own helpers, those ``lower``'s conditions call (``_mend_any``)."""
    plan.helpers.extend(h for h in lower.helpers if h not in plan.helpers)
    return plan


__all__ = [
    "Declined", "Lower", "and_of", "and_text", "builtin_reduction", "drop_item", "is_pass", "item_to_double",
    "lowered_tail", "speculated_tests", "split_static_prefix", "static_index", "with_helpers",
]
