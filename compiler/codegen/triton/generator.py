"""The CUDA generator: every kernel of a graph becomes a ``@triton.jit`` function in one generated module.

``TritonGenerator().compile(kernels, dump)`` renders the kernels (``kernel.py``, ``templates/``), writes
the module into the on-disk cache and imports it (``build.py``), and returns, per kernel,
``(launcher, "tensor")``: the wrapper calls ``launcher(*tensors)`` with the kernel's inputs then outputs.
Kernels that the templates cannot express raise :class:`KernelCompileError` (their names in ``failed``,
the others in ``partial``); the backend runs those in the reference interpreter. On a GPU every kernel is
compiled ahead of its first launch by a pool of compile workers, in parallel (``aot.py``); a kernel
that fails to build also falls back to the interpreter (logged once).

Under ``TRITON_INTERPRET=1`` the same kernels run on CPU tensors in Triton's interpreter, with the
``shim.py`` standing in for libdevice; this is how the generator is tested without a GPU.
"""

from __future__ import annotations

from mend import settings

from ... import ir
from .. import KernelCompileError
from . import aot
from .build import interpret_mode, load_module
from .kernel import KernelSource
from .launch import TritonLauncher, TritonMatmulLauncher, TritonSplitLauncher
from .module import render_module
from .plan import PERSISTENT_RMAX, SPLIT_MIN_RNUMEL


class TritonGenerator:
    name = "triton"

    def __init__(self, persistent_rmax: int = PERSISTENT_RMAX, interpret: bool | None = None,
                 split_min_rnumel: int = SPLIT_MIN_RNUMEL, nan_combine: bool | None = None):
        self.persistent_rmax = persistent_rmax
        self.interpret = interpret
        self.nan_combine = nan_combine  # None: on a GPU yes, in the interpreter no (custom combines are slow)
        # MEND_TRITON_SPLIT=0 keeps every row in one program (no split reductions)
        self.split_min_rnumel = split_min_rnumel if settings.TRITON_SPLIT.get() else 2**62

    def _interp(self) -> bool:
        return interpret_mode() if self.interpret is None else self.interpret

    def sources(self, kernels: list[ir.Kernel]):
        """(rendered KernelSource list, {failed kernel name: reason})."""
        good, bad = [], {}
        nan_combine = (not self._interp()) if self.nan_combine is None else self.nan_combine
        for k in kernels:
            try:
                s = KernelSource(k, self.persistent_rmax, self.split_min_rnumel, nan_combine,
                                 native_dot=not self._interp())
                s.render()
                good.append(s)
            except NotImplementedError as exc:
                bad[k.name] = str(exc)
        return good, bad

    def module_source(self, kernels: list[ir.Kernel]) -> str:
        good, _ = self.sources(kernels)
        return render_module(good, self._interp())

    device = None  # the graph's device (set by the backend): ahead-of-time compiles target it

    def _precompile(self, launcher, module) -> None:
        """Start compiling a kernel ahead of its first launch, in parallel with the others (``aot``)."""
        dev = self.device
        if not aot.enabled() or dev is None or getattr(dev, "type", None) != "cuda":
            return
        try:
            target = aot.target_for(dev)
        except Exception:  # noqa: BLE001 - no usable CUDA device: Triton's JIT path
            return
        launcher.precompile(module, target, dev)

    def compile(self, kernels: list[ir.Kernel], dump) -> dict:
        interp = self._interp()
        good, bad = self.sources(kernels)
        out: dict = {}
        if good:
            src = render_module(good, interp)
            if dump:
                dump.write("kernels_triton.py", src)
            try:
                mod = load_module(src)
                mods = {s.k.name: mod for s in good}
            except Exception as whole:  # noqa: BLE001 - isolate the kernels that do not import
                mods = {}
                for s in good:
                    try:
                        mods[s.k.name] = load_module(render_module([s], interp))
                    except Exception as exc:  # noqa: BLE001
                        bad[s.k.name] = f"{type(exc).__name__}: {exc}"
                if not mods:
                    bad.setdefault("*", f"{type(whole).__name__}: {whole}")
            shared: dict = {}  # kernels that render alike share one launcher: one compile, one autotune
            for s in good:
                m = mods.get(s.k.name)
                if m is None:
                    continue
                key = (id(m), s.render())
                if key not in shared:
                    if s.plan.template == "split":
                        fns = [getattr(m, n) for n in s.fn_names]
                        shared[key] = TritonSplitLauncher(s.k, fns[0], fns[1], s)
                    elif s.plan.template == "matmul":
                        shared[key] = TritonMatmulLauncher(s.k, getattr(m, s.fn_name), getattr(m, s.epilogue.fn_name), s)
                    else:
                        shared[key] = TritonLauncher(s.k, getattr(m, s.fn_name), s)
                    if not interp:
                        self._precompile(shared[key], m)
                out[s.k.name] = (shared[key], "tensor")
        failed = [n for n in bad if n != "*"]
        if failed:
            msg = "; ".join(f"{n}: {why}" for n, why in bad.items())
            err = KernelCompileError(f"Triton kernels {failed} not generated: {msg}"[:2000], failed)
            err.partial = out
            raise err
        return out
