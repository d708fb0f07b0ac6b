"""Messages observed, not counted: each program in ``observed/`` runs before and after ``mend fix`` (the
default policy, keep), eagerly and under torch.compile on several backends, and prints the same lines in
the same order; the repair removes the graph breaks the messages caused.

The ``gm_*`` programs cover the side-effect (Defer) and compiled-region situations of GraphMend's fixture suite
(artifact ``savini98/CGO_AE_GraphMend``, ``jac/tests/compiler/passes/fixtures/graphmend``), written anew:

* ``gm_side_effects``: a tensor printed (``side_effect``), a logger with %-args (``side_effect_logger``), the
  printed tensor changed in place right after (``side_effect_clone``: the message shows the value before),
  f-strings with format specs, ``sep=`` a module constant (``side_effect_kwarg``, the value that travels),
  ``end=``, ``file=sys.stderr``, a print in a loop, ``warnings.warn`` with a category, a level filtered out;
* ``gm_regions`` (with ``gm_far``): a helper two calls down (``region_chain``), a base-class method
  (``region_inherited``), a ``self`` method (``region_self_method``), a submodule attribute's method
  (``region_submodule_attr``), a mixin's ``forward`` of a submodule (``region_submod_forward``), a helper of
  another module (``region_xmod_entry``/``region_xmod_helper``), and methods and functions the forward never
  reaches, run eagerly between the calls (``region_unreachable_sibling``, ``region_no_compile``, the
  siblings of ``region_wrap_cls``);
* ``gm_exits``: a plain function wrapped at its call site (``region_wrap_fn``, the integration test's
  call-site wrap) whose messages precede an exception it raises (``side_effect_raises``, the integration
  test's raising forward), with a ``finally:`` message. Dynamo runs a frame that raises eagerly ("Observed
  exception"), so the raising calls keep that break;
* ``gm_branches``: a message in a helper of one arm of a tensor branch (``merge_arg_calls``: the other arm's
  helper stays silent), messages in nested modules (``ModuleList``, ``super().forward``), a closure, a
  ``no_grad`` block, and before an early return;
* ``gm_declined``: what the repair leaves as written, at its break: ``*args``/``**kwargs``
  (``side_effect_unpack``), ``stacklevel=`` (``logger_kwargs``), ``extra=`` and a computed keyword value
  (``side_effect_kwarg``), a method of a submodule a factory built (the ``opaque`` one of
  ``region_submodule_attr``), a ``logger.isEnabledFor`` test; and look-alikes it must not take for reports:
  a ``warning`` method of a non-logger (``se_foreign_warn``), a ``warn_*`` helper (``user_defined_warn``).
"""

import functools
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "observed"
PROGRAMS = ["submodule_logging", "helper_print", "warnings_and_levels", "training_step", "grad_message",
            "loop_and_break", "normed_blocks", "gm_side_effects", "gm_regions", "gm_exits", "gm_branches", "gm_declined"]
HELPERS = ["gm_far"]  # modules the programs import, repaired with them
BACKENDS = ["eager", "aot_eager", "mend", pytest.param("inductor", marks=pytest.mark.slow)]


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    original = tmp_path_factory.mktemp("original")
    repaired = tmp_path_factory.mktemp("repaired")
    for name in PROGRAMS + HELPERS:
        shutil.copy(HERE / f"{name}.py", original)
        shutil.copy(HERE / f"{name}.py", repaired)
    mend = Path(sys.executable).with_name("mend")
    done = subprocess.run([str(mend), "fix", str(repaired)], capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 1: findings remain (reported)
    return {"original": original, "repaired": repaired}


@functools.lru_cache(maxsize=None)  # each program's eager run of the original serves every backend's comparison
def observe(folder: Path, name: str, backend: str) -> tuple[str, list[str]]:
    env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": "1"}
    done = subprocess.run([sys.executable, "-u", str(HERE / "run_program.py"), str(folder), name, backend],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout
    lines = [ln for ln in done.stdout.splitlines() if "Failed to initialize NumPy" not in ln
             and "_conversion_method_template" not in ln]
    breaks = json.loads((folder / f"{name}.{backend}.breaks").read_text())
    return "\n".join(lines), breaks


@pytest.mark.parametrize("name", PROGRAMS)
def test_eager_output_unchanged(trees, name) -> None:
    before, _ = observe(trees["original"], name, "none")
    after, _ = observe(trees["repaired"], name, "none")
    assert "--- call 0" in before and any(not ln.startswith("--- call") for ln in before.splitlines())
    assert after == before


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", PROGRAMS)
def test_compiled_output_kept_and_breaks_removed(trees, name, backend) -> None:
    eager, _ = observe(trees["original"], name, "none")
    before, breaks_before = observe(trees["original"], name, backend)
    after, breaks_after = observe(trees["repaired"], name, backend)
    assert after == before
    assert breaks_before
    check_breaks_left(name, breaks_before, breaks_after)
    if name not in ("grad_message", "loop_and_break"):
        assert after == eager  # compiled code still reports as eager does


def check_breaks_left(name: str, breaks_before: list[str], breaks_after: list[str]) -> None:
    """The repair removed the breaks the messages caused, but for those the program keeps."""
    if name == "grad_message":  # the loss requires grad: its text (grad_fn) keeps the call at a graph break
        assert len(breaks_after) <= len(breaks_before)
    elif name == "gm_declined":  # the repair declines: each message stays as written, at its break
        assert breaks_after and not Counter(breaks_after) - Counter(breaks_before), breaks_after
    elif name == "gm_exits":  # a raising call runs eagerly: only those keep breaks, and fewer than before
        assert "Observed exception" in breaks_after and len(breaks_after) < len(breaks_before), breaks_after
    elif name == "loop_and_break":  # the message breaks go; the `.item()` that decides the loop stays
        assert not all("item()" in reason for reason in breaks_before), breaks_before
        assert breaks_after and all("item()" in reason for reason in breaks_after), breaks_after
    else:
        assert breaks_after == []
