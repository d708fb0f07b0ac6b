"""benchmarks/import_hook.py refuses to print a time for a hook that repaired nothing (every module failed:
a machine without LibCST in the measured interpreter once gave a 'cold start' of failed repairs)."""

from __future__ import annotations

import json
import subprocess

import pytest

from benchmarks import import_hook


def _fake_run(result: dict):
    def run(*args, **kwargs):
        return subprocess.CompletedProcess(args, 0, stdout=json.dumps(result) + "\n", stderr="")

    return run


def test_a_run_whose_modules_failed_stops_the_benchmark(monkeypatch) -> None:
    failed = {"import_s": 1.0, "modules": 164, "repaired": 0, "errors": 164,
              "first_error": ["transformers", "ModuleNotFoundError: No module named 'libcst'"]}
    monkeypatch.setattr(import_hook.subprocess, "run", _fake_run(failed))
    with pytest.raises(SystemExit, match="164 modules failed to repair.*libcst"):
        import_hook.measure("cold", "/nonexistent", "transformers.models.llama.modeling_llama")


def test_a_clean_run_is_measured_and_the_start_up_folder_is_not_passed_on(monkeypatch) -> None:
    from mend.imports.settings import STARTUP_DIR

    seen = {}
    ok = {"import_s": 1.0, "modules": 103, "repaired": 4, "errors": 0, "first_error": None}

    def run(*args, **kwargs):
        seen.update(kwargs["env"])
        return _fake_run(ok)(*args, **kwargs)

    monkeypatch.setenv("PYTHONPATH", f"{STARTUP_DIR}:/some/site")
    monkeypatch.setattr(import_hook.subprocess, "run", run)
    out = import_hook.measure("warm", "/nonexistent", "transformers.models.llama.modeling_llama")
    assert out["repaired"] == 4 and out["process_s"] >= 0
    assert seen["PYTHONPATH"] == "/some/site" and "MEND_REPAIR" not in seen
