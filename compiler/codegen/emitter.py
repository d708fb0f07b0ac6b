"""The expression emitter both code generators share: one walk, one dispatch, a table per language.

An element expression (``ir.Expr``) is a DAG. An emitter turns it into straight-line code at one
iteration point: each distinct node is emitted once and bound to a name (common subexpressions are shared
through ``memo``, which an emitter nested in another, a loop body say, also looks up in its parents). The
dispatch is the same for C++ and Triton; a language supplies its hooks and tables:

* ``Const``, ``Local``, ``Load``, ``IndexValue``: :meth:`Emitter.const`, :meth:`~Emitter.local`,
  :meth:`~Emitter.load`, :meth:`~Emitter.index_value`;
* ``Op("cast")``: :meth:`Emitter.cast`;
* any other ``Op``: the language's :meth:`~Emitter.special` cases first (ops that take several statements or
  depend on more than the operand class), then the format string of the first table of ``TABLES[class]``
  that has the op, where the class (``bool``, ``float`` or ``int``) is the operand's (the last argument of
  ``where``, the first otherwise); ``{0}``, ``{1}``, ... are the arguments, ``{t}`` the operand's compute
  type (:meth:`~Emitter.type_name`);
* an op of ``FLOAT_FUNCTIONS`` on operands of a class in ``FLOAT_OF`` that no table covers computes in
  float (:meth:`~Emitter.float_of_ints`);
* anything else raises ``NotImplementedError``: the generator leaves the kernel to the reference
  interpreter.
"""

from __future__ import annotations

import torch

from .. import ir


def operand_dtype(e: ir.Op) -> torch.dtype:
    """The dtype an op computes in: its operands' (the branches of ``where``, not its condition)."""
    return e.args[-1].dtype if e.op == "where" else e.args[0].dtype


def operand_class(dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "bool"
    return "float" if dtype.is_floating_point else "int"


class Emitter:
    """CSE'd straight-line code for element expressions; subclasses are the languages."""

    TABLES: dict[str, tuple[dict[str, str], ...]] = {}  # operand class -> format tables, searched in order
    FLOAT_FUNCTIONS: frozenset = frozenset()  # ops that compute in float whatever their operands
    FLOAT_OF: tuple[str, ...] = ()  # operand classes converted to float for FLOAT_FUNCTIONS
    UNSUPPORTED = ""  # the end of the error for an op without a lowering ("op exp on torch.int8" + this)

    def __init__(self, parent: "Emitter | None" = None) -> None:
        self.lines: list[str] = []
        self.memo: dict = {}
        self.parent = parent

    def lookup(self, e: ir.Expr) -> str | None:
        em = self
        while em is not None:
            if e in em.memo:
                return em.memo[e]
            em = em.parent
        return None

    def emit(self, expr: ir.Expr) -> str:
        """The name (or literal) holding ``expr``'s value; the statements computing it go to ``lines``."""
        for e in ir.walk(expr):
            if self.lookup(e) is None:
                self.memo[e] = self._node(e)
        return self.lookup(expr)

    def _node(self, e: ir.Expr) -> str:
        if isinstance(e, ir.Const):
            return self.const(e)
        if isinstance(e, ir.Local):
            return self.local(e)
        if isinstance(e, ir.Load):
            return self.load(e)
        if isinstance(e, ir.IndexValue):
            return self.index_value(e)
        assert isinstance(e, ir.Op), e
        return self._op(e, [self.lookup(a) for a in e.args])

    def _op(self, e: ir.Op, args: list[str]) -> str:
        if e.op == "cast":
            return self.bind(e.dtype, self.cast(args[0], e.args[0].dtype, e.dtype))
        adt = operand_dtype(e)
        done = self.special(e, args, adt)
        if done is not None:
            return done
        t = self.type_name(adt)
        cls = operand_class(adt)
        for table in self.TABLES[cls]:
            fmt = table.get(e.op)
            if fmt is not None:
                return self.bind(e.dtype, fmt.format(*args, t=t))
        if cls in self.FLOAT_OF and e.op in self.FLOAT_FUNCTIONS:
            return self.float_of_ints(e, args, adt)
        raise NotImplementedError(f"op {e.op} on {adt}{self.UNSUPPORTED}")

    # ------------------------------------------------------------------------- a language's hooks
    def bind(self, dtype: torch.dtype, text: str) -> str:
        """Emit a statement giving ``text`` (of ``dtype``) a fresh name; returns the name."""
        raise NotImplementedError

    def type_name(self, dtype: torch.dtype) -> str:
        """The language's compute type of ``dtype`` (``{t}`` in the tables)."""
        raise NotImplementedError

    def const(self, e: ir.Const) -> str:
        raise NotImplementedError

    def local(self, e: ir.Local) -> str:
        raise NotImplementedError

    def load(self, e: ir.Load) -> str:
        raise NotImplementedError

    def index_value(self, e: ir.IndexValue) -> str:
        raise NotImplementedError

    def cast(self, src: str, sdt: torch.dtype, ddt: torch.dtype) -> str:
        raise NotImplementedError

    def special(self, e: ir.Op, args: list[str], adt: torch.dtype) -> str | None:
        """The name of ``e``'s value where the language handles it outside its tables, else None."""
        return None

    def float_of_ints(self, e: ir.Op, args: list[str], adt: torch.dtype) -> str:
        raise NotImplementedError
