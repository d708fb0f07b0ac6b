"""Every ``MEND_*`` environment switch, declared once: name, type, default, what it changes, who reads it,
and whether it keys the compiler's graph cache.

Code reads a switch through its entry, never through ``os.environ``::

    from mend import settings
    if settings.FOLD.get(): ...                     # MEND_FOLD: a bool, True unless set to 0/false/no/off
    env[settings.CACHE_DIR.name] = str(folder)      # a child process's environment

:data:`SWITCHES` is the table (docs/settings.md is generated from it: ``python -m mend.settings``);
:func:`cache_key` is the part of the compiler's graph-cache key that the switches contribute. A value that
cannot be read (``MEND_FOLD=maybe``, ``MEND_MAX_SPECIALIZATIONS=many``) gives the default and a
:class:`SettingWarning` saying so: a mistyped switch never stops the program. Standard library only: the
static analyzer and the import hook's start-up read this module too, and neither may import torch.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")

# who reads a switch: the column the docs table sorts by
COMPILER, GPU, IMPORTS, CLI, RUN, BENCH, TESTS, BENCHMARKS = (
    "compiler", "compiler (GPU)", "repair at import", "mend check", "mend run", "mend bench", "tests", "benchmarks")
AREAS = (COMPILER, GPU, IMPORTS, CLI, RUN, BENCH, TESTS, BENCHMARKS)


class SettingWarning(UserWarning):
    """A switch is set to a value it cannot take; the default is used."""


@dataclass(frozen=True)
class Switch:
    """One environment variable. ``get()`` reads it now (a test's ``monkeypatch.setenv`` takes effect at
    once): the parsed value, or ``default`` when it is unset, empty or unreadable."""

    name: str
    default: Any
    what: str  # what it changes (one line of the docs table)
    area: str  # who reads it: one of AREAS
    keys_cache: bool = False  # part of the compiler's graph-cache key (it changes the scheduled graph)
    alias: str = ""  # an older name, read when this one is unset

    kind = "text"

    def raw(self) -> str | None:
        """The variable's stripped text (the alias's when only it is set); None when unset or empty."""
        for name in (self.name, self.alias):
            value = os.environ.get(name, "").strip() if name else ""
            if value:
                return value
        return None

    def is_set(self) -> bool:
        return self.raw() is not None

    def get(self) -> Any:
        text = self.raw()
        if text is None:
            return self.default
        try:
            return self.parse(text)
        except ValueError as exc:
            warnings.warn(f"{self.name}={text!r}: {exc}; using the default ({self.show(self.default)})",
                          SettingWarning, stacklevel=2)
            return self.default

    def parse(self, text: str) -> Any:
        return text

    def show(self, value: Any) -> str:
        """``value`` as the docs table writes it."""
        return "unset" if value is None or value == "" else str(value)

    def accepts(self) -> str:
        """The values it takes, for the docs table."""
        return "text"


@dataclass(frozen=True)
class Flag(Switch):
    """On or off: 1/true/yes/on or 0/false/no/off (any case). A flag whose default is None is unset until
    set: the caller decides then (an option of the ``torch.compile`` call, another switch)."""

    kind = "flag"

    def parse(self, text: str) -> bool:
        low = text.lower()
        if low in ON:
            return True
        if low in OFF:
            return False
        raise ValueError("not one of " + "/".join(ON + OFF))

    def show(self, value: Any) -> str:
        return "unset" if value is None else ("1" if value else "0")

    def accepts(self) -> str:
        return "1 / 0"


@dataclass(frozen=True)
class Choice(Switch):
    choices: tuple[str, ...] = ()

    kind = "choice"

    def parse(self, text: str) -> str:
        if text not in self.choices:
            raise ValueError("not one of " + ", ".join(self.choices))
        return text

    def accepts(self) -> str:
        return " / ".join(self.choices)


@dataclass(frozen=True)
class Int(Switch):
    kind = "int"

    def parse(self, text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise ValueError("not an integer") from None

    def accepts(self) -> str:
        return "integer"


@dataclass(frozen=True)
class Seconds(Switch):
    kind = "seconds"

    def parse(self, text: str) -> float:
        try:
            return float(text)
        except ValueError:
            raise ValueError("not a number of seconds") from None

    def accepts(self) -> str:
        return "seconds"


@dataclass(frozen=True)
class PathSwitch(Switch):
    kind = "path"

    def parse(self, text: str) -> Path:
        return Path(text)

    def accepts(self) -> str:
        return "path"


@dataclass(frozen=True)
class Names(Switch):
    """A comma-separated list."""

    kind = "names"

    def parse(self, text: str) -> frozenset[str]:
        return frozenset(s.strip() for s in text.split(",") if s.strip())

    def show(self, value: Any) -> str:
        return ",".join(sorted(value)) if value else "unset"

    def accepts(self) -> str:
        return "a,b,..."


# ---------------------------------------------------------------------------------------------- the table
# The compiler: what it builds (keys_cache: the switch changes the scheduled graph the graph cache keeps)

FOLD = Flag("MEND_FOLD", True, "steps that read no graph input run at the first call only; 0: every step at "
            "every call", COMPILER, keys_cache=True)
MATMUL_EPILOGUE = Choice("MEND_MATMUL_EPILOGUE", "1", "on a GPU, matrix products become Triton kernels with their "
                         "pointwise epilogue fused; 0: every product stays a cuBLAS call; mm: those with a bias "
                         "(addmm) do", GPU, keys_cache=True, choices=("1", "0", "mm"))
TRITON_SPLIT = Flag("MEND_TRITON_SPLIT", True, "long reductions split over several programs; 0: one program a "
                    "row", GPU)
PAD_MM = Flag("MEND_PAD_MM", True, "the wrapper pads a half-precision product's second operand whose rows are "
              "not 16-byte aligned, so cuBLAS takes its aligned kernels; 0: run them as they are", GPU)
MAX_SPECIALIZATIONS = Int("MEND_MAX_SPECIALIZATIONS", 8, "how many concrete shapes a graph with symbolic shapes "
                          "is compiled for (at least 1); further shapes run eagerly", COMPILER)

# the compiler: how and when it builds
CUDAGRAPHS = Flag("MEND_CUDAGRAPHS", None, "1: CUDA graphs for every graph, 0: never (overrides the "
                  "torch.compile mode and options)", GPU)
ASYNC_COMPILE = Flag("MEND_ASYNC_COMPILE", None, "1: asynchronous compilation for every graph (the ATen graph "
                     "runs until the kernels are built), 0: never (overrides the options)", COMPILER)
ASYNC_DEFER = Flag("MEND_ASYNC_DEFER", True, "with asynchronous compilation, an inference graph is traced and "
                   "lowered at its second call (the first runs Dynamo's graph); 0: when it is compiled", COMPILER)
EAGER_BACKWARD = Flag("MEND_EAGER_BACKWARD", True, "on a GPU, a backward graph compiles right after its forward "
                      "graph; 0: at the first backward call", GPU)
COMPILE_WORKERS = Int("MEND_COMPILE_WORKERS", None, "Triton compile worker processes (unset: the CPUs available, "
                      "at most 16); 0 compiles in the calling process", GPU)
COMPILE_WORKERS_IDLE_S = Seconds("MEND_COMPILE_WORKERS_IDLE_S", 60.0, "idle compile workers (100-150 MB each) "
                                 "exit after this long without work and restart on demand", GPU)
TRITON_AOT = Flag("MEND_TRITON_AOT", True, "kernels compile ahead of time in the workers; 0: Triton's JIT "
                  "compiles and launches every kernel", GPU)
TRITON_AUTOTUNE = Flag("MEND_TRITON_AUTOTUNE", True, "Triton kernels try their launch configurations; 0: always "
                       "the heuristic one", GPU)
MATMUL_LAZY_TUNE = Flag("MEND_MATMUL_LAZY_TUNE", True, "a matmul kernel's first launch takes the heuristic "
                        "configuration while the others compile; 0: it waits for all of them", GPU)
TRITON_FAST_LAUNCH = Flag("MEND_TRITON_FAST_LAUNCH", True, "later calls launch a compiled Triton kernel directly, "
                          "without Triton's per-call binding; 0: always through Triton", GPU)
TRITON_KEY_FILE = PathSwitch("MEND_TRITON_KEY_FILE", None, "where compile workers remember Triton's own cache key "
                             "(set by mend for its workers: triton_key.json in the cache folder)", GPU)

# the compiler: caches
CACHE_DIR = PathSwitch("MEND_CACHE_DIR", None, "the compiler's caches (unset: $XDG_CACHE_HOME/mend, else "
                       "~/.cache/mend)", COMPILER)
DISABLE_CACHE = Flag("MEND_DISABLE_CACHE", False, "1: read nothing from the compiler's caches and publish "
                     "nothing; build into fresh temporary folders", COMPILER)

# the compiler: debugging
STRICT = Flag("MEND_STRICT", False, "1: raise instead of falling back to eager, for a whole graph or at run time "
              "(the tests set it; MEND_COMPILER_STRICT is an older name)", COMPILER, alias="MEND_COMPILER_STRICT")
COMPILER_DEBUG = PathSwitch("MEND_COMPILER_DEBUG", None, "dump the FX graph, IR, fusion decisions, kernel sources and "
                            "wrapper of every graph into this folder (the graph cache is not read then)", COMPILER)
COMPILER_VERIFY = Flag("MEND_COMPILER_VERIFY", None, "1: check the IR after lowering and after scheduling "
                       "(unset: on under MEND_COMPILER_DEBUG)", COMPILER)
COMPILER_CHECK = Flag("MEND_COMPILER_CHECK", False, "1: on each graph's first call, also run it eagerly and log "
                      "every output that differs", COMPILER)
COMPILER_FALLBACK = Choice("MEND_COMPILER_FALLBACK", "", "eager: run every graph eagerly (the whole-graph "
                           "fallback, for comparison)", COMPILER, choices=("eager",))
DISABLE_KERNELS = Names("MEND_DISABLE_KERNELS", frozenset(), "run these kernels (names as in the debug dump, or "
                        "all) in the reference interpreter, to bisect a miscompile", COMPILER)

# repair at import (mend run --repair, mend.repair_imports)
REPAIR = Switch("MEND_REPAIR", None, "the packages a child process repairs at import: a comma-separated list or "
                "the settings' JSON (set by mend run --repair and mend.repair_imports)", IMPORTS)
REPAIR_CACHE = PathSwitch("MEND_REPAIR_CACHE", None, "the cache of repaired modules (unset: $XDG_CACHE_HOME/mend/"
                          "repair, else ~/.cache/mend/repair)", IMPORTS)
REPAIR_CACHE_KEY = PathSwitch("MEND_REPAIR_CACHE_KEY", None, "a file holding the key that signs the repair cache's "
                              "entries, for a cache shared on purpose (unset: a per-user key, "
                              "$XDG_CONFIG_HOME/mend/repair-cache.key)", IMPORTS)

# the commands
OUTPUT_FORMAT = Choice("MEND_OUTPUT_FORMAT", "concise", "mend check's --output-format when the option is not "
                       "given", CLI, choices=("concise", "full", "json", "github", "sarif", "junit"))
FILE_TIME_LIMIT = Seconds("MEND_FILE_TIME_LIMIT", 120.0, "the seconds mend check and mend fix may spend on one "
                          "file's analysis, and mend fix on its repair; a file that takes longer is reported and "
                          "left unchanged, the others go on; 0: no limit", CLI)
FIX_MAX_BYTES = Int("MEND_FIX_MAX_BYTES", 2_000_000, "the characters of one file's code that mend fix hands to "
                    "LibCST (the statements its repairs involve, not the whole file; LibCST holds about 300 bytes of "
                    "memory per character): a file that needs more is reported and left unchanged; 0: no limit",
                    CLI)
DEBUG = Flag("MEND_DEBUG", False, "1: an internal error of mend check shows its traceback", CLI)
RUN_CHILDREN = PathSwitch("MEND_RUN_CHILDREN", None, "set by mend run in the program's environment: the folder "
                          "its child processes write their graph-break records to", RUN)
BENCH_DEVICE = Switch("MEND_BENCH_DEVICE", "cpu", "set by mend bench's worker to the device it runs on "
                      "(cpu, cuda, cuda:1), for a harness to build its model there", BENCH)

# development: the tests and the benchmark scripts
REGEN_FIXTURES = Flag("MEND_REGEN_FIXTURES", False, "1: the rewriter's fixture test writes the missing expected "
                      "outputs (.out.py) for review", TESTS)
SOAK_SEED = Int("MEND_SOAK_SEED", None, "the seed of the rewriter's CLI soak test (unset: a random one, printed)",
                TESTS)
ZOO_CACHE = PathSwitch("MEND_ZOO_CACHE", None, "the model zoo's repaired copies of transformers (unset: "
                       "~/.cache/mend/zoo)", BENCHMARKS)
CORPUS_MANIFEST = PathSwitch("MEND_CORPUS_MANIFEST", None, "the repositories corpus's manifest (unset: "
                             "benchmarks/corpus/manifest.json)", BENCHMARKS)
BENCH_MODELS_SIZE = Choice("MEND_BENCH_MODELS_SIZE", "small", "the model sizes of benchmarks/bench_models.py's "
                           "harnesses", BENCHMARKS, choices=("tiny", "small"))

SWITCHES: tuple[Switch, ...] = tuple(v for v in list(globals().values()) if isinstance(v, Switch))
BY_NAME = {s.name: s for s in SWITCHES}


def cache_key() -> str:
    """The switches that change the scheduled graph, as they are now: part of the graph cache's key."""
    return ";".join(f"{s.name}={s.show(s.get())}" for s in SWITCHES if s.keys_cache)


def markdown() -> str:
    """The docs table: every switch, by area."""
    rows = ["| variable | takes | default | what it changes | keys the cache | read by |", "|---|---|---|---|---|---|"]
    for s in sorted(SWITCHES, key=lambda s: AREAS.index(s.area)):
        rows.append(f"| `{s.name}` | {s.accepts()} | {s.show(s.default)} | {s.what} | "
                    f"{'yes' if s.keys_cache else ''} | {s.area} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
