"""`mend check` / `mend rule` follow ruff's user contract (formats, selection, config, noqa, exit codes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from xml.etree import ElementTree

import pytest
from typer.testing import CliRunner

from mend.cli.app import app

BAD = textwrap.dedent("""\
    import torch
    from torch import nn


    class M(nn.Module):
        def forward(self, x):
            print("x", x.shape)
            return x.sum().item()
    """)
GOOD = textwrap.dedent("""\
    import torch
    from torch import nn


    class M(nn.Module):
        def forward(self, x):
            return x.relu()
    """)


def run(args, cwd: Path, stdin: str | None = None):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(app, args, input=stdin, catch_exceptions=False)
    finally:
        os.chdir(old)


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.mend]\n")
    (tmp_path / "model.py").write_text(BAD)
    (tmp_path / "clean.py").write_text(GOOD)
    return tmp_path


def test_concise_output_exit_code_and_summary(proj: Path):
    r = run(["check", "--no-cache", "."], proj)
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert lines[0].startswith("model.py:7:9: MND101 ")
    assert lines[1].startswith("model.py:8:16: MND301 ")
    assert "Found 2 errors." in r.stdout


def test_clean_tree_exits_zero(proj: Path):
    r = run(["check", "--no-cache", "clean.py"], proj)
    assert r.exit_code == 0
    assert "All checks passed!" in r.stdout


def test_exit_zero(proj: Path):
    assert run(["check", "--no-cache", "--exit-zero", "."], proj).exit_code == 0


@pytest.mark.parametrize("args, codes", [
    (["--select", "MND3"], {"MND301"}),
    (["--select", "MND101"], {"MND101"}),
    (["--ignore", "MND1"], {"MND301"}),
    (["--select", "ALL", "--ignore", "MND301"], {"MND101"}),
    (["--select", "MND101", "--extend-select", "MND301"], {"MND101", "MND301"}),
    (["--select", "MND1,MND3", "--ignore", "MND30"], {"MND101"}),
])
def test_selection(proj: Path, args, codes):
    r = run(["check", "--no-cache", "--output-format", "json", *args, "model.py"], proj)
    assert {d["code"] for d in json.loads(r.stdout)} == codes


def test_unknown_selector_is_usage_error(proj: Path):
    r = run(["check", "--no-cache", "--select", "XYZ1", "."], proj)
    assert r.exit_code == 2
    assert "unknown rule selector" in r.stderr


def test_config_found_walking_up_and_per_file_ignores(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.mend]
        ignore = ["MND301"]
        per-file-ignores = { "pkg/legacy_*.py" = ["MND101"] }
        """))
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "legacy_model.py").write_text(BAD)
    (pkg / "model.py").write_text(BAD)
    r = run(["check", "--no-cache", "--output-format", "json", "."], pkg)
    got = sorted((Path(d["path"]).name, d["code"]) for d in json.loads(r.stdout))
    assert got == [("model.py", "MND101")]


def test_invalid_config_is_usage_error(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.mend]\nselect = "MND1"\n')
    (tmp_path / "m.py").write_text(GOOD)
    r = run(["check", "--no-cache", "."], tmp_path)
    assert r.exit_code == 2
    assert "must be a list of strings" in r.stderr


def test_noqa(tmp_path: Path):
    src = BAD.replace('print("x", x.shape)', 'print("x", x.shape)  # noqa: MND101').replace(
        "return x.sum().item()", "return x.sum().item()  # noqa: MND999")
    (tmp_path / "a.py").write_text(src)
    (tmp_path / "b.py").write_text(BAD.replace('print("x", x.shape)', 'print("x", x.shape)  # noqa'))
    (tmp_path / "c.py").write_text("# mend: noqa\n" + BAD)
    r = run(["check", "--no-cache", "--isolated", "--output-format", "json", "."], tmp_path)
    got = sorted((d["path"], d["code"]) for d in json.loads(r.stdout))
    assert got == [("a.py", "MND301"), ("b.py", "MND301")]
    r = run(["check", "--no-cache", "--isolated", "--ignore-noqa", "--output-format", "json", "c.py"], tmp_path)
    assert len(json.loads(r.stdout)) == 2


def test_one_based_character_columns_with_non_ascii(tmp_path: Path):
    src = BAD.replace('print("x", x.shape)', 's = "äöü"; print("x", x.shape)')
    (tmp_path / "u.py").write_text(src, encoding="utf-8")
    r = run(["check", "--no-cache", "--isolated", "--select", "MND101", "u.py"], tmp_path)
    line = r.stdout.splitlines()[0]
    assert line.startswith("u.py:7:20: MND101")
    assert src.splitlines()[6][19:].startswith("print(")


def test_output_formats(proj: Path):
    js = json.loads(run(["check", "--no-cache", "--output-format", "json", "model.py"], proj).stdout)
    assert js[0]["code"] == "MND101" and js[0]["line"] == 7 and js[0]["col"] == 9
    assert js[0]["registry_ids"] == ["GB0059"] and js[0]["name"] == "print-in-compiled-code"
    gh = run(["check", "--no-cache", "--output-format", "github", "model.py"], proj).stdout
    assert gh.startswith("::error title=mend (MND101),file=model.py,line=7,col=9")
    junit = run(["check", "--no-cache", "--output-format", "junit", "."], proj).stdout
    root = ElementTree.fromstring(junit)
    assert root.get("failures") == "2"
    assert {s.get("name") for s in root.iter("testsuite")} == {"clean.py", "model.py"}
    full = run(["check", "--no-cache", "--output-format", "full", "model.py"], proj).stdout
    assert '7 |         print("x", x.shape)' in full and "^^^^^^^^^^^^^^^^^^^ MND101" in full
    sarif = json.loads(run(["check", "--no-cache", "--output-format", "sarif", "model.py"], proj).stdout)
    assert sarif["version"] == "2.1.0"
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["MND101", "MND301"]


def test_statistics(proj: Path):
    r = run(["check", "--no-cache", "--statistics", "."], proj)
    assert r.exit_code == 1
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert [row[1] for row in rows] == ["MND101", "MND301"]
    assert rows[0][0].strip() == "1" and rows[0][2].strip().endswith("print-in-compiled-code")


def test_output_file(proj: Path, tmp_path: Path):
    out = tmp_path / "report.json"
    r = run(["check", "--no-cache", "--output-format", "json", "-o", str(out), "model.py"], proj)
    assert r.exit_code == 1 and r.stdout == ""
    assert len(json.loads(out.read_text())) == 2


def test_stdin_with_filename(proj: Path):
    r = run(["check", "--no-cache", "--stdin-filename", "model.py", "-"], proj, stdin=BAD)
    assert r.exit_code == 1
    assert r.stdout.splitlines()[0].startswith("model.py:7:9: MND101")
    r = run(["check", "--no-cache", "-"], proj, stdin=GOOD)
    assert r.exit_code == 0


def test_gitignore_exclude_and_force_exclude(tmp_path: Path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "pyproject.toml").write_text('[tool.mend]\nextend-exclude = ["vendored"]\n')
    (tmp_path / ".gitignore").write_text("generated/\n*_tmp.py\n!keep_tmp.py\n")
    for rel in ("generated/g.py", "vendored/v.py", "x_tmp.py", "keep_tmp.py", "src/m.py"):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(BAD)
    r = run(["check", "--no-cache", "--output-format", "json", "."], tmp_path)
    assert sorted({d["path"] for d in json.loads(r.stdout)}) == ["keep_tmp.py", "src/m.py"]
    # files named explicitly are checked unless --force-exclude (what pre-commit passes)
    r = run(["check", "--no-cache", "--output-format", "json", "vendored/v.py", "x_tmp.py"], tmp_path)
    assert len({d["path"] for d in json.loads(r.stdout)}) == 2
    r = run(["check", "--no-cache", "--force-exclude", "vendored/v.py", "x_tmp.py"], tmp_path)
    assert r.exit_code == 0


def test_bad_input_gets_one_diagnostic_and_the_run_goes_on(tmp_path: Path):
    (tmp_path / "syntax.py").write_text("import torch\ndef f(:\n    pass\n")
    (tmp_path / "plain.py").write_text("def g(:\n")  # no torch: skipped by the pre-filter when walking
    (tmp_path / "latin1.py").write_bytes(b"x = '\xe9'\n")
    (tmp_path / "binary.py").write_bytes(b"\x00\x01\x02torch")
    (tmp_path / "model.py").write_text(BAD)
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    r = run(["check", "--no-cache", "--isolated", "--output-format", "json", "."], tmp_path)
    assert r.exit_code == 1
    got = sorted((d["path"], d["code"]) for d in json.loads(r.stdout))
    assert got == [("binary.py", "MND902"), ("latin1.py", "MND902"), ("model.py", "MND101"),
                   ("model.py", "MND301"), ("syntax.py", "MND901")]
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before  # check never writes


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file(tmp_path: Path):
    p = tmp_path / "secret.py"
    p.write_text(BAD)
    p.chmod(0)
    try:
        r = run(["check", "--no-cache", "--isolated", "--output-format", "json", "secret.py"], tmp_path)
        assert [d["code"] for d in json.loads(r.stdout)] == ["MND902"]
    finally:
        p.chmod(0o644)


def test_missing_path_is_usage_error(tmp_path: Path):
    r = run(["check", "--no-cache", "nope.py"], tmp_path)
    assert r.exit_code == 2 and "no such file" in r.stderr


def test_empty_invocation_passes(tmp_path: Path):
    r = run(["check", "--no-cache", "."], tmp_path)
    assert r.exit_code == 0


def test_cache_lives_beside_config_root_and_is_reused(proj: Path):
    sub = proj / "sub"
    sub.mkdir()
    (sub / "m.py").write_text(BAD)
    from mend.analyzers.static import check_paths, load_config

    cfg = load_config([sub])
    first = check_paths([sub], cfg, jobs=1)
    assert first.analyzed == 1 and first.cached == 0
    assert (proj / ".mend_cache" / ".gitignore").read_text().strip().endswith("*")
    second = check_paths([sub], cfg, jobs=1)
    assert second.analyzed == 0 and second.cached == 1
    assert [d.to_dict() for d in second.diagnostics] == [d.to_dict() for d in first.diagnostics]
    (sub / "m.py").write_text(GOOD)
    third = check_paths([sub], cfg, jobs=1)
    assert third.analyzed == 1 and third.diagnostics == []


def test_no_cache_writes_nothing(proj: Path):
    run(["check", "--no-cache", "."], proj)
    assert not (proj / ".mend_cache").exists()


def test_parallel_equals_serial(tmp_path: Path):
    for i in range(40):
        (tmp_path / f"m{i}.py").write_text(BAD if i % 3 else GOOD)
    from mend.analyzers.static import Config, check_paths

    serial = check_paths([tmp_path], Config(), jobs=1, use_cache=False)
    parallel = check_paths([tmp_path], Config(), jobs=2, use_cache=False)
    assert len(serial.diagnostics) == 2 * 26
    assert [d.to_dict() for d in parallel.diagnostics] == [d.to_dict() for d in serial.diagnostics]


def test_rule_command():
    r = CliRunner().invoke(app, ["rule", "MND101"])
    assert r.exit_code == 0
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety",
                    "## References", "gb0059.html"):
        assert section in r.stdout
    r = CliRunner().invoke(app, ["rule", "--all"])
    assert r.exit_code == 0 and "MND510" in r.stdout
    data = json.loads(CliRunner().invoke(app, ["rule", "MND301", "--output-format", "json"]).stdout)
    assert data["name"] == "tensor-item" and data["registry_ids"] == ["GB0124"]
    r = CliRunner().invoke(app, ["rule", "MND000"])
    assert r.exit_code == 2


@pytest.mark.parametrize("argv, expect", [
    (["check", "--no-cache", "{dir}"], "MND101 [?]"),  # the fix metadata comes from the rule registry
    (["check", "--no-cache", "--output-format", "full", "{dir}"], "= help: guard (or defer/drop) the print"),
    (["rule", "MND201"], "Fix sometimes available (safe): data-dependent if -> torch.where"),
    (["rule", "--all", "--output-format", "json"], '"applicability": "unsafe"'),
])
def test_no_torch_import_on_the_check_path(tmp_path: Path, argv: list[str], expect: str):
    """`mend check` and `mend rule` read rules and fix metadata without importing torch, LibCST or the
    rewriter (the fixers)."""
    (tmp_path / "m.py").write_text(BAD)
    argv = [a.format(dir=tmp_path) for a in argv]
    code = ("import sys, runpy; sys.argv = ['mend'] + %r;\n"
            "try:\n    runpy.run_module('mend.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))[:5]\n"
            "assert 'libcst' not in sys.modules, 'check must not pay for the rewriter (LibCST)'\n"
            "assert not [m for m in sys.modules if m.startswith('mend.rewriter')], 'no fixer is imported'\n"
            % argv)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert expect in proc.stdout


def test_files_named_explicitly_are_always_parsed(tmp_path: Path):
    (tmp_path / "plain.py").write_text("def g(:\n")
    r = run(["check", "--no-cache", "--isolated", "--output-format", "json", "plain.py"], tmp_path)
    assert [(d["code"], d["line"]) for d in json.loads(r.stdout)] == [("MND901", 1)]
    assert "syntax error" in json.loads(r.stdout)[0]["message"]


def test_show_traced(tmp_path: Path):
    (tmp_path / "m.py").write_text(BAD + "\n\ndef helper(x):\n    return x\n")
    r = run(["check", "--no-cache", "--isolated", "--show-traced", "."], tmp_path)
    assert r.exit_code == 0
    assert r.stdout.splitlines() == ["m.py:6: M.forward (module-forward)"]


def test_forward_of_a_class_whose_base_derives_from_outside_the_tree(tmp_path: Path):
    """transformers' ``Encoder(XPreTrainedModel)`` with ``XPreTrainedModel(PreTrainedModel)`` when
    ``modeling_utils`` is not among the files checked: ``Encoder.forward`` is a module's forward."""
    (tmp_path / "m.py").write_text(
        "from ..modeling_utils import PreTrainedModel\n\n\nclass XPreTrainedModel(PreTrainedModel):\n"
        "    base_model_prefix = 'model'\n\n\nclass Encoder(XPreTrainedModel):\n"
        "    def forward(self, x):\n        return x\n\n\nclass Plain:\n    def forward(self, x):\n        return x\n")
    r = run(["check", "--no-cache", "--isolated", "--show-traced", "."], tmp_path)
    assert r.exit_code == 0
    assert r.stdout.splitlines() == ["m.py:9: Encoder.forward (module-forward)"]


def test_warm_runs_follow_dependencies_and_settings(tmp_path: Path):
    from mend.analyzers.static import Config, check_paths

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("import torch\n\ndef helper(x):\n    return x + 1\n")
    (pkg / "model.py").write_text(
        "from torch import nn\nfrom pkg.base import helper\n\n\nclass M(nn.Module):\n"
        "    def forward(self, x):\n        for _ in range(2):\n            x = helper(x)\n        return x\n")
    cfg = Config(root=tmp_path).with_overrides(cache_dir=tmp_path / "cache")
    assert check_paths([pkg / "model.py"], cfg).diagnostics == []
    warm = check_paths([pkg / "model.py"], cfg)
    assert warm.analyzed == 0 and warm.diagnostics == []
    # the dependency (read from disk, not given) changes: the warm run must see it
    (pkg / "base.py").write_text("import torch\n\ndef helper(x):\n    print(x)\n    return x + 1\n")
    got = check_paths([pkg / "model.py"], cfg)
    assert got.analyzed == 0  # model.py itself is unchanged and comes from the per-file cache
    assert [(Path(d.path).name, d.line, d.code) for d in got.diagnostics] == [("model.py", 7, "MND506")]
    got = check_paths([pkg], cfg)
    assert [(Path(d.path).name, d.line, d.code) for d in got.diagnostics] == [
        ("base.py", 4, "MND101"), ("model.py", 7, "MND506")]
    # selection is part of the run key
    assert len(check_paths([pkg], cfg.with_overrides(ignore=("MND101",))).diagnostics) == 1
    assert len(check_paths([pkg], cfg).diagnostics) == 2
