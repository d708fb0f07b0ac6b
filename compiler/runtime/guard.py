"""The run-time fallback: a compiled graph that fails when it runs never crashes the program.

Every compiled graph is called through a :class:`GuardedGraph`. When the compiled graph raises (a wrapper
that meets a value it did not expect, a kernel that fails to launch, an ATen call that rejects the layout
it was given), the same call is run again as the ATen graph the compiler was given, op by op, as eager
PyTorch would. If that succeeds, a warning is logged once, naming the graph and the error, and the graph
runs as its ATen graph from then on. If the ATen graph raises too, the error is the program's own (eager
would raise it as well): it is raised, and the compiled graph stays in use.

``MEND_STRICT=1`` raises the compiled graph's error instead (the tests set it, so no failure is hidden).

What the retry cannot undo: a graph that writes an input in place and fails after that write would apply
it twice. Graphs apply their input mutations last (aot_autograd's functionalized graphs copy into their
inputs at the end), so a failure before the end has written nothing.
"""

from __future__ import annotations

from ..debug import strict, warn_once

STATS = {"runtime_fallbacks": 0}


class GuardedGraph:
    """A boxed callable (``call(list_of_args)``): the compiled graph ``call``, or after it failed once,
    ``aten`` (the boxed ATen graph) for good. ``name`` says which graph in the warning."""

    _boxed_call = True

    def __init__(self, call, aten, name: str) -> None:
        self.call = call
        self.aten = aten
        self.name = name
        self.failed: "Exception | None" = None

    def __call__(self, args):
        if self.failed is not None:
            return self.aten(args)
        saved = list(args)  # the compiled graph clears ``args``; its locals keep the inputs alive anyway
        try:
            return self.call(args)
        except Exception as exc:
            if strict():
                raise
            out = self.aten(saved)  # raises the program's own error when eager would fail too
            self.failed = exc
            STATS["runtime_fallbacks"] += 1
            first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            warn_once(f"mend: {self.name} failed at run time ({type(exc).__name__}: {first}); it runs as its "
                      "ATen graph from now on (MEND_STRICT=1 raises instead)")
            return out

    def __getattr__(self, name):
        if name.startswith("mend_") and "call" in self.__dict__:  # the compiled graph's inspection
            return getattr(self.call, name)
        raise AttributeError(name)
