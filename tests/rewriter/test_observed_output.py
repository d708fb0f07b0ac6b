"""Messages observed, not counted: each program in ``observed/`` runs before and after ``mend fix`` (the
default policy, keep), eagerly and under torch.compile on several backends, and prints the same lines in
the same order; the repair removes the graph breaks the messages caused."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "observed"
PROGRAMS = ["submodule_logging", "helper_print", "warnings_and_levels", "training_step", "grad_message",
            "loop_and_break", "normed_blocks"]
BACKENDS = ["eager", "aot_eager", "mend", pytest.param("inductor", marks=pytest.mark.slow)]


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    original = tmp_path_factory.mktemp("original")
    repaired = tmp_path_factory.mktemp("repaired")
    for name in PROGRAMS:
        shutil.copy(HERE / f"{name}.py", original)
        shutil.copy(HERE / f"{name}.py", repaired)
    mend = Path(sys.executable).with_name("mend")
    done = subprocess.run([str(mend), "fix", str(repaired)], capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 1: findings remain (reported)
    return {"original": original, "repaired": repaired}


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
    assert "--- call 0" in before and len(before.splitlines()) > len(PROGRAMS)
    assert after == before


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", PROGRAMS)
def test_compiled_output_kept_and_breaks_removed(trees, name, backend) -> None:
    eager, _ = observe(trees["original"], name, "none")
    before, breaks_before = observe(trees["original"], name, backend)
    after, breaks_after = observe(trees["repaired"], name, backend)
    assert after == before
    assert breaks_before
    if name == "grad_message":  # the loss requires grad: its text (grad_fn) keeps the call at a graph break
        assert len(breaks_after) <= len(breaks_before)
    elif name == "loop_and_break":  # the message breaks go; the `.item()` that decides the loop stays
        assert not all("item()" in reason for reason in breaks_before), breaks_before
        assert breaks_after and all("item()" in reason for reason in breaks_after), breaks_after
    else:
        assert breaks_after == []
        assert after == eager  # with no break left, compiled code still reports as eager does
