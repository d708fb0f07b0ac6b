"""The CPU generator: render every kernel of a graph into one C++ translation unit, build it (cached) and
bind each ``extern "C"`` kernel as a ctypes function taking data pointers. Each kernel is rendered once;
the unit and the per-kernel units built to isolate a kernel g++ rejects reuse those bodies."""

from __future__ import annotations

from ... import ir
from .. import KernelCompileError
from . import build
from .kernel import PRELUDE, render_kernel


def _bind(lib, kernels):
    return {k.name: (build.kernel_function(lib, k.name, len(k.inputs) + len(k.outputs)), "ptr")
            for k in kernels}


def _unit(bodies: list[str]) -> str:
    """The same text as ``cpp.render_graph`` of those kernels (so the build cache keys are unchanged)."""
    return "\n\n".join([PRELUDE, *bodies]) + "\n"


class CppGenerator:
    name = "cpp"
    blocking_build = True  # compile() waits for g++ (asynchronous compilation runs it in the background)

    def compile(self, kernels: list[ir.Kernel], dump) -> dict:
        good, bad, errors = [], [], []
        bodies: dict[str, str] = {}
        for k in kernels:
            try:
                bodies[k.name] = render_kernel(k)
                good.append(k)
            except NotImplementedError as exc:
                bad.append(k.name)
                errors.append(f"{k.name}: {exc}")
        out = {}
        if good:
            src = _unit([bodies[k.name] for k in good])
            dump.write("kernels.cpp", src)
            try:
                out = _bind(build.load(build.build(src)), good)
            except build.CompileError as whole:
                errors.append(str(whole))
                ok = []
                for k in good:  # find the kernels that do not build; keep the others
                    try:
                        build.build(_unit([bodies[k.name]]))
                        ok.append(k)
                    except build.CompileError:
                        bad.append(k.name)
                if ok:
                    out = _bind(build.load(build.build(_unit([bodies[k.name] for k in ok]))), ok)
        if bad:
            err = KernelCompileError(f"kernels {bad} not built: " + "; ".join(errors)[:2000], bad)
            err.partial = out
            raise err
        return out
