"""The settings table (``mend.settings``): every ``MEND_*`` switch declared once, read through it, documented
from it.

* every ``MEND_*`` name in the sources, scripts and docs is a switch of the table (C macros aside);
* no installed module names a switch in a string of its own (``os.environ.get("MEND_FOLD")``): it reads it
  through its entry; two start-up paths that run before mend is imported are the exceptions, named below;
* docs/settings.md holds the table as ``python -m mend.settings`` prints it;
* values: the spellings a flag takes, the default for an unset, empty or unreadable value (with a warning
  naming the switch), an older name, lists; reading the module imports no torch.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from mend import settings
from tests.test_layout import product_folders

REPO = Path(__file__).resolve().parent.parent
NAME = re.compile(r"\bMEND_[A-Z0-9_]*[A-Z0-9]\b")
NOT_SWITCHES = {"MEND_INF_F", "MEND_NAN_F"}  # C macros of the generated kernels
# installed modules that read a switch by name, and why they may
BY_NAME = {
    "imports/startup/sitecustomize.py": "runs in every child process before anything of mend is imported, and "
                                        "must cost nothing when MEND_REPAIR is unset",
    "compiler/codegen/triton/worker.py": "the Triton compile worker runs as a script that imports Triton only",
}
SETTINGS_FILE = Path(settings.__file__).resolve()
DOC = REPO / "docs" / "settings.md"
BEGIN, END = "<!-- begin: python -m mend.settings -->\n", "<!-- end: python -m mend.settings -->\n"


def _mentioned() -> dict[str, str]:
    """Every MEND_* name in the repository's sources, scripts and docs -> a file that mentions it."""
    out: dict[str, str] = {}
    skip = ("benchmarks/results/", "tests/static/fixtures/", "tests/rewriter/fixtures/", ".venv/", "build/")
    for pattern in ("**/*.py", "**/*.md", "**/*.sh", "Makefile", "**/*.toml"):
        for f in REPO.glob(pattern):
            rel = f.relative_to(REPO).as_posix()
            if rel.startswith(skip) or "/." in "/" + rel or ".egg-info" in rel:
                continue
            for name in NAME.findall(f.read_text(errors="replace")):
                out.setdefault(name, rel)
    return out


def test_every_switch_mentioned_anywhere_is_in_the_table():
    mentioned = _mentioned()
    assert "MEND_FOLD" in mentioned and "MEND_REPAIR" in mentioned  # the scan reads the sources
    unknown = {n: f for n, f in mentioned.items() if n not in settings.BY_NAME and n not in NOT_SWITCHES
               and n not in {s.alias for s in settings.SWITCHES}}
    assert not unknown, f"MEND_* names that are not switches of mend.settings (first file): {unknown}"


def test_the_table_is_consistent():
    names = [s.name for s in settings.SWITCHES]
    assert len(names) == len(set(names)) and len(names) >= 30
    for s in settings.SWITCHES:
        assert s.name.startswith("MEND_") and getattr(settings, s.name[len("MEND_"):]) is s, s.name
        assert s.area in settings.AREAS and s.what, s.name
        if s.default is not None and not isinstance(s, settings.Names) and s.default != "":
            assert s.parse(s.show(s.default)) == s.default, f"{s.name}: its default does not read back"


def test_installed_modules_read_switches_through_the_table():
    files = sorted({f for folder in product_folders().values() for f in folder.glob("*.py")})
    found = []
    for f in files:
        rel = f.relative_to(REPO).as_posix()
        if f.resolve() == SETTINGS_FILE or rel in BY_NAME:
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.fullmatch(node.value):
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not found, "switches named in a string instead of read through mend.settings:\n" + "\n".join(found)
    for rel in BY_NAME:  # the exceptions still exist and still need to be exceptions
        assert any(NAME.fullmatch(n.value) for n in ast.walk(ast.parse((REPO / rel).read_text()))
                   if isinstance(n, ast.Constant) and isinstance(n.value, str)), rel


def test_the_docs_table_is_generated_from_the_settings():
    text = DOC.read_text()
    assert BEGIN in text and END in text, f"{DOC} lost its generated section"
    doc = text.split(BEGIN, 1)[1].split(END, 1)[0]
    assert doc == settings.markdown(), (f"{DOC.relative_to(REPO)} is out of date: replace its table with the "
                                        "output of `python -m mend.settings`")
    proc = subprocess.run([sys.executable, "-m", "mend.settings"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == doc


def test_reading_the_settings_imports_no_torch():
    code = "import sys, mend.settings; print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'mend')))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['mend', 'mend.settings', 'mend.version']"


@pytest.mark.parametrize("text,want", [("1", True), ("TRUE", True), (" yes ", True), ("on", True),
                                       ("0", False), ("false", False), ("No", False), ("off", False)])
def test_a_flag_takes_the_usual_spellings(monkeypatch, text, want):
    monkeypatch.setenv("MEND_FOLD", text)
    monkeypatch.setenv("MEND_DISABLE_CACHE", text)
    assert settings.FOLD.get() is want and settings.DISABLE_CACHE.get() is want


def test_unset_empty_and_unreadable_values_give_the_default(monkeypatch):
    monkeypatch.delenv("MEND_MAX_SPECIALIZATIONS", raising=False)
    monkeypatch.delenv("MEND_CUDAGRAPHS", raising=False)
    assert settings.MAX_SPECIALIZATIONS.get() == 8 and settings.CUDAGRAPHS.get() is None
    monkeypatch.setenv("MEND_MAX_SPECIALIZATIONS", "  ")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an empty value is unset, not a mistake
        assert settings.MAX_SPECIALIZATIONS.get() == 8
    monkeypatch.setenv("MEND_MAX_SPECIALIZATIONS", "3")
    assert settings.MAX_SPECIALIZATIONS.get() == 3
    for name, bad, default in (("MEND_MAX_SPECIALIZATIONS", "many", 8), ("MEND_FOLD", "maybe", True),
                               ("MEND_MATMUL_EPILOGUE", "bias", "1"), ("MEND_COMPILE_WORKERS_IDLE_S", "soon", 60.0)):
        monkeypatch.setenv(name, bad)
        with pytest.warns(settings.SettingWarning, match=f"{name}='{bad}'.*using the default"):
            assert settings.BY_NAME[name].get() == default


def test_an_older_name_is_read_when_the_new_one_is_unset(monkeypatch):
    monkeypatch.delenv("MEND_STRICT", raising=False)
    monkeypatch.setenv("MEND_COMPILER_STRICT", "1")
    assert settings.STRICT.get() is True
    monkeypatch.setenv("MEND_STRICT", "0")
    assert settings.STRICT.get() is False


def test_lists_and_folders(monkeypatch, tmp_path):
    monkeypatch.setenv("MEND_DISABLE_KERNELS", " k0, k3 ,,")
    assert settings.DISABLE_KERNELS.get() == {"k0", "k3"}
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path))
    assert settings.CACHE_DIR.get() == tmp_path
    monkeypatch.delenv("MEND_CACHE_DIR")
    assert settings.CACHE_DIR.get() is None
