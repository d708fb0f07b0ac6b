"""MND505, MND506, MND508, MND511: graph breaks that make Dynamo skip a whole frame.

A graph break directly inside a ``try`` block, a loop or a user ``@contextmanager`` block cannot be
resumed: Dynamo skips the whole function instead. Two checkers find them: one per function, from the
breaks the walk found inside each region (:func:`breaks_in_regions`), and one per traced function
once the project index knows where each called function breaks (:func:`calls_in_regions`). A module
constructed in compiled code whose ``__init__`` breaks is MND511 (:func:`breaking_constructor`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from mend.analyzers.static.rules.base import RULES, Finding, Rule, function_checker, project_checker, register
from mend.analyzers.static.rules.context import Context, ProjectContext
from mend.analyzers.static.summary import FileSummary, FuncInfo

_HDR = "import torch\nfrom torch import nn\n"

register(
    Rule(
        "MND505", "graph-break-inside-try",
        "graph break inside `try`: Dynamo cannot resume inside a try block and skips the whole frame",
        ("GB0059",), "frame-skip",
        what="Finds `try` blocks in traced code whose body contains a graph break (any other mend finding).",
        why="""
            Dynamo cannot split a graph inside an active `try` block. Instead of breaking gracefully it
            gives up on the whole function ("Failed to handle graph break gracefully. Skipping the
            function and falling back to eager"): nothing of that frame is compiled.
        """,
        use_instead="Move the breaking call out of the `try`, or guard it with `torch.compiler.is_compiling()`.",
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    try:
                        print("step")
                    except OSError:
                        pass
                    return x.relu()
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    try:
                        y = x.relu()
                    except RuntimeError:
                        y = x
                    return y
        """,),
    ),
    Rule(
        "MND506", "graph-break-inside-loop",
        "graph break inside a loop: Dynamo does not support breaks in for/while loops and skips the whole frame",
        ("GB7000",), "frame-skip",
        what="Finds `for`/`while` loops in traced code whose body contains a graph break.",
        why="""
            A graph break directly inside a loop body makes Dynamo skip the frame (GB7000 "graph break
            in loop"): the whole function runs eagerly. (A break inside a function *called* from the
            loop is handled gracefully and is not reported here.)
        """,
        use_instead="Hoist the breaking call out of the loop, or guard it with `torch.compiler.is_compiling()`.",
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    for i in range(3):
                        x = x + x.sum().item()
                    return x
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    for i in range(3):
                        x = x + x.sum()
                    return x
        """,),
    ),
    Rule(
        "MND508", "graph-break-inside-user-contextmanager",
        "graph break inside a user `@contextmanager` block: Dynamo cannot break there and skips the whole frame",
        ("GB0066",), "frame-skip",
        what="Finds `with` blocks over `@contextlib.contextmanager` functions of the checked tree whose body "
             "contains a graph break, in traced code.",
        why="""
            Dynamo traces generator-based context managers, but cannot break the graph while one is
            active (GB0066 "Graph break under GenericContextWrappingVariable"): the frame is skipped.
        """,
        use_instead="Move the breaking call outside the `with` block.",
        invalid=("import contextlib\n" + _HDR + """
            @contextlib.contextmanager
            def section(name):
                yield

            class M(nn.Module):
                def forward(self, x):
                    with section("attn"):
                        print("in section")
                    return x.relu()
        """,),
        valid=("import contextlib\n" + _HDR + """
            @contextlib.contextmanager
            def section(name):
                yield

            class M(nn.Module):
                def forward(self, x):
                    with section("attn"):
                        y = x.relu()
                    return y
        """,),
    ),
    Rule(
        "MND511", "breaking-module-constructor",
        "`nn.Module` constructed in compiled code breaks in its `__init__`: Dynamo then compiles the "
        "constructor on its own and breaks again on the uninitialized module",
        ("GB0119",), "break",
        what="""
            Finds `super().__init__()` in the `__init__` of a module class of the checked tree that is
            constructed in traced code (directly or through helpers such as `set_attention_type`) and
            whose `__init__` breaks the graph (typically MND502: it creates parameters).
        """,
        why="""
            After the first break inside the inlined constructor, the constructor runs as its own frame,
            which Dynamo compiles too; there `self` is not an initialized module yet and Dynamo breaks
            at `super().__init__()` (GB0119 "Uninitialized nn.Module").
        """,
        use_instead="Construct modules in `__init__` (or before compiling), never in `forward`.",
        invalid=(_HDR + """
            class Proj(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

            class M(nn.Module):
                def forward(self, x):
                    self.proj = Proj()
                    return x.sin()
        """,),
        valid=(_HDR + """
            class Proj(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.proj = Proj()

                def forward(self, x):
                    return self.proj(x)
        """,),
    ),
)


@dataclass(frozen=True)
class RegionRule:
    code: str
    where: str  # the region, in a finding about a break inside it
    where_call: str  # the same, in a finding about a call that breaks

    @property
    def ids(self) -> str:
        return ", ".join(RULES[self.code].registry_ids)


REGION_RULES = {
    "try": RegionRule("MND505", "inside `try`", "inside `try`"),
    "loop": RegionRule("MND506", "inside a loop", "inside a loop"),
    "ctx": RegionRule("MND508", "inside a user @contextmanager", "inside a user @contextmanager block"),
}


@function_checker
def breaks_in_regions(ctx: Context) -> None:
    """A break inside ``try``, a loop, or a user ``@contextmanager`` makes Dynamo skip the frame."""
    for region in ctx.regions:
        rule = REGION_RULES[region.kind]
        node = region.node
        line, _, _, _ = ctx.span(node)
        # a break that happens only in one mode (`if self.training:`) does not make the statement
        # skip the frame in the other modes, and the statement runs in all of them: not reported
        inner = [f for f in ctx.findings[region.start:region.end] if RULES[f.code].kind == "break"]
        for f in inner:
            if "mode" in f.data and "frame_skip" not in f.data:
                # said on the mode-only line itself, which runs only in that mode
                f.data["frame_skip"] = rule.code
                f.message += f"; {rule.where} (line {line}) it makes Dynamo skip the whole frame ({rule.ids})"
        inner = [f for f in inner if "mode" not in f.data]
        if region.kind == "loop":
            inner = [f for f in inner if not (f.code == "MND202" and f.line == node.lineno)]
        if not inner:
            continue
        first = min(inner, key=lambda f: (len(f.requires), f.line, f.col))
        msg = (f"{RULES[first.code].name} ({first.code}) at line {first.line} breaks the graph {rule.where}: "
               f"Dynamo cannot resume here and skips the whole frame ({rule.ids})")
        ctx.report(rule.code, _header(node), msg, requires=tuple(region.requires) + tuple(first.requires),
                   inner_line=first.line, inner_code=first.code)


@function_checker
def breaking_constructor(ctx: Context) -> None:
    """A module ``__init__`` that breaks (kept only when it is traced: constructed in compiled code)
    breaks again at ``super().__init__()`` when Dynamo compiles the constructor frame on its own."""
    if not (ctx.cls and ctx.info.name == "__init__"):
        return
    breaks = [f for f in ctx.findings if RULES[f.code].kind == "break" and "mode" not in f.data]
    if not breaks:
        return
    first = min(f.line for f in breaks)
    for stmt in ctx.node.body:
        if stmt.lineno >= first:
            return
        v = stmt.value if isinstance(stmt, ast.Expr) else None
        if (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "__init__"
                and isinstance(v.func.value, ast.Call) and isinstance(v.func.value.func, ast.Name)
                and v.func.value.func.id == "super"):
            ctx.report("MND511", v, inner_line=first)
            return


@project_checker
def calls_in_regions(project: ProjectContext, s: FileSummary, fn: FuncInfo) -> Iterator[Finding]:
    """Frame skips caused by *calls* inside try/loop/contextmanager blocks to functions that break."""
    direct = {(f.code, f.line) for f in project.findings_of(s, fn.id)}
    for kind, line, col, start, end, requires in fn.regions:
        rule = REGION_RULES[kind]
        if (rule.code, line) in direct or any(not project.ref_is(ref, what, s, fn) for what, ref in requires):
            continue
        hit = _breaking_call(project, s, fn, start, end)
        if hit is None:
            continue
        site, target, (bpath, bline, bcode) = hit
        where = f"line {bline}" if bpath == s.path else f"{bpath}:{bline}"
        msg = (f"call to `{target.name}()` at line {site.line} breaks the graph ({RULES[bcode].name} at {where}) "
               f"{rule.where_call}: Dynamo cannot resume here and skips the whole frame ({rule.ids})")
        yield Finding(rule.code, msg, line, col, line, col + 1, fn.id, (),
                      {"inner_line": site.line, "inner_code": bcode, "break_path": bpath, "break_line": bline})


def _breaking_call(project: ProjectContext, s: FileSummary, fn: FuncInfo, start: int, end: int):
    """The first call in lines ``start..end`` of ``fn`` that reaches a break: (site, callee, break)."""
    for site in fn.calls:
        if not (start <= site.line <= end):
            continue
        for ts, tf in project.resolve_ref(site.ref, s, fn, construct=True):
            if tf.reorderable:
                continue  # Dynamo runs it after the graph: no break
            r = (s.path, site.line, "MND504") if tf.disabled else project.first_break(ts, tf)
            if r is not None:
                return site, tf, r
    return None


class _Header:
    """A position spanning only the first line of a compound statement (for the report)."""

    def __init__(self, node: ast.AST) -> None:
        self.lineno = node.lineno
        self.col_offset = node.col_offset
        self.end_lineno = node.lineno
        self.end_col_offset = None


def _header(node: ast.AST) -> ast.AST:
    return _Header(node)  # type: ignore[return-value]
