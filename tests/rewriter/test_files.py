"""The file layer of ``mend fix``: permissions, links, encodings, ``--verify`` errors, the window."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mend.cli.app import app
from tests.conftest import EXAMPLES
from tests.rewriter import users
from tests.rewriter.conftest import FIXTURES

runner = CliRunner()

MODEL = '''import torch


@torch.compile
def step(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    print("step")
    return y
'''
GUARD = "if not torch.compiler.is_compiling():"


def fixed_text(text: str = MODEL) -> str:
    """What ``mend fix`` makes of ``text`` on its own (a plain file, written by root)."""
    from mend.analyzers import static
    from mend.rewriter import FixOptions, fix_source

    config = static.load_config(["."], isolated=True)

    def diagnose(t: str):
        return static.check_source(t, "m.py", config)

    return fix_source(text, "m.py", diagnose(text), FixOptions(), diagnose).fixed


def need_user() -> None:
    reason = users.skip_reason()
    if reason:
        pytest.skip(reason)


# --- permissions ---------------------------------------------------------------------------------

def test_unwritable_files_are_reported_and_the_rest_fixed() -> None:
    """A read-only file, a file in a read-only folder and an immutable file are reported and left; the
    others are fixed; exit 2 at the end (run as an ordinary user)."""
    need_user()
    with users.shared_folder() as root:
        tree = root / "tree"
        (tree / "ro").mkdir(parents=True)
        for name in ("good.py", "readonly.py", "ro/inner.py", "immutable.py"):
            (tree / name).write_text(MODEL)
        for path in [tree, *tree.rglob("*")]:
            os.chown(path, users.uid(), users.gid())
        (tree / "readonly.py").chmod(0o444)
        (tree / "ro").chmod(0o555)
        immutable = users.set_immutable(tree / "immutable.py")
        res = users.mend(["fix", "tree"], cwd=root)
        assert res.returncode == 2, res.stdout + res.stderr
        assert "Traceback" not in res.stderr
        assert (tree / "good.py").read_text() == fixed_text()
        for name in ("readonly.py", "ro/inner.py") + (("immutable.py",) if immutable else ()):
            assert (tree / name).read_text() == MODEL, name
            # the read-only folder cannot take the helper module the repair imports (written first)
            why = "cannot write its helper module" if name == "ro/inner.py" else "cannot write: permission denied"
            assert f"error: tree/{name}: {why}" in res.stderr, res.stderr
        assert "Fixed 1 finding(s) in 1 file(s)" in res.stdout
        assert stat.S_IMODE((tree / "readonly.py").stat().st_mode) == 0o444
        assert not list(tree.rglob("*.mend-tmp"))


@pytest.mark.skipif(not users.IS_ROOT, reason="only root can make files owned by another user")
def test_a_file_of_another_user_is_never_replaced() -> None:
    """In a world-writable folder, a file the user may not write stays as it is and keeps its owner; a
    file of another user that the user may write is fixed in place and keeps its owner."""
    need_user()
    with users.shared_folder() as root:
        tree = root / "shared"
        tree.mkdir()
        tree.chmod(0o777)
        (tree / "theirs.py").write_text(MODEL)
        (tree / "theirs.py").chmod(0o444)
        (tree / "group.py").write_text(MODEL)
        (tree / "group.py").chmod(0o666)
        res = users.mend(["fix", "shared"], cwd=root)
        assert res.returncode == 2, res.stdout + res.stderr
        assert "error: shared/theirs.py: cannot write: permission denied" in res.stderr
        assert (tree / "theirs.py").read_text() == MODEL
        assert (tree / "group.py").read_text() == fixed_text()
        for name, mode in (("theirs.py", 0o444), ("group.py", 0o666)):
            st = (tree / name).stat()
            assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, mode), name


def test_immutable_file_as_root(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(MODEL)
    (tmp_path / "b.py").write_text(MODEL)
    if not users.set_immutable(tmp_path / "a.py"):
        pytest.skip("chattr +i needs root and a file system that supports it")
    try:
        res = runner.invoke(app, ["fix", str(tmp_path)])
    finally:
        subprocess.run(["chattr", "-i", str(tmp_path / "a.py")], check=False)
    assert res.exit_code == 2, res.output
    assert "a.py: cannot write: permission denied" in res.output
    assert (tmp_path / "a.py").read_text() == MODEL
    assert (tmp_path / "b.py").read_text() == fixed_text()


def test_changed_on_disk_meanwhile_is_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file edited while mend was fixing it is not overwritten: the repair computed before the file's turn
    is made again on the new bytes, and when the file changes during that one too, it is left."""
    from mend.rewriter import workers

    target = tmp_path / "a.py"
    target.write_text(MODEL)
    real_fix = workers.fix_windowed

    def fix_then_edit(*args, **kwargs):
        out = real_fix(*args, **kwargs)
        target.write_text(target.read_text() + "# edited meanwhile\n")
        return out

    monkeypatch.setattr(workers, "fix_windowed", fix_then_edit)
    res = runner.invoke(app, ["fix", str(tmp_path)])
    assert res.exit_code == 2
    assert "changed on disk since it was analysed: analysed again" in res.output
    assert "changed on disk while mend was fixing it" in res.output
    assert target.read_text() == MODEL + "# edited meanwhile\n" * 2


def test_changed_before_its_turn_is_repaired_on_the_new_bytes(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A file edited after its repair was computed, before it was written, is repaired again on its new
    bytes (the repair computed first is not applied to them)."""
    from mend.rewriter import workers

    target = tmp_path / "a.py"
    target.write_text(MODEL)
    real_fix = workers.fix_windowed
    calls = []

    def fix_then_edit_once(*args, **kwargs):
        out = real_fix(*args, **kwargs)
        if not calls:
            target.write_text(MODEL + "# edited meanwhile\n")
        calls.append(args[0])
        return out

    monkeypatch.setattr(workers, "fix_windowed", fix_then_edit_once)
    res = runner.invoke(app, ["fix", str(tmp_path)])
    assert calls == [MODEL, MODEL + "# edited meanwhile\n"], res.output
    assert res.exit_code == 0, res.output
    assert target.read_text() == fixed_text(MODEL + "# edited meanwhile\n")


# --- links ---------------------------------------------------------------------------------------

def test_links_are_written_through_and_each_file_fixed_once(tmp_path: Path) -> None:
    """Links inside the tree are written through (each real file fixed once); a link out of the tree only
    when named."""
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    (tree / "sub").mkdir(parents=True)
    outside.mkdir()
    for path in (tree / "real.py", outside / "target.py", tree / "hard.py"):
        path.write_text(MODEL)
    links = {tree / "link.py": "real.py", tree / "sub" / "also.py": "../real.py",
             tree / "out.py": str(outside / "target.py")}
    for link, target in links.items():
        link.symlink_to(target)
    os.link(tree / "hard.py", tree / "hard_twin.py")
    (tree / "real.py").chmod(0o640)

    res = runner.invoke(app, ["fix", str(tree)])
    assert res.exit_code == 0, res.output
    for link, target in links.items():
        assert link.is_symlink() and os.readlink(link) == target
    once = fixed_text()
    for path in (tree / "real.py", tree / "hard.py", tree / "hard_twin.py"):
        assert path.read_text() == once, path
    assert (outside / "target.py").read_text() == MODEL  # a link out of the tree is not followed
    assert f"note: {tree / 'out.py'}: a link to {(outside / 'target.py').resolve()}, outside" in res.output
    assert (tree / "hard.py").stat().st_ino == (tree / "hard_twin.py").stat().st_ino
    assert (tree / "hard.py").stat().st_nlink == 2
    assert stat.S_IMODE((tree / "real.py").stat().st_mode) == 0o640
    assert "the same file as" in res.output
    assert "Fixed 2 finding(s) in 2 file(s)" in res.output  # real.py, hard.py: once each

    again = tmp_path / "again.py"
    again.write_text(MODEL)
    named = tmp_path / "named.py"
    named.symlink_to(again)
    res = runner.invoke(app, ["fix", str(named)])
    assert res.exit_code == 0 and named.is_symlink() and again.read_text() == once


def test_a_dangling_link_is_reported(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(MODEL)
    (tmp_path / "dangling.py").symlink_to(tmp_path / "missing.py")
    res = runner.invoke(app, ["fix", str(tmp_path)])
    assert res.exit_code == 2
    assert "dangling.py: cannot read" in res.output
    assert (tmp_path / "good.py").read_text() == fixed_text()
    assert (tmp_path / "dangling.py").is_symlink()


# --- encodings -----------------------------------------------------------------------------------

LATIN1 = ("# -*- coding: latin-1 -*-\n" + MODEL.replace('print("step")', 'print("café")')).encode("latin-1")
BOM = b"\xef\xbb\xbf" + MODEL.replace('print("step")', 'print("naïve ✓")').encode("utf-8")
CRLF = MODEL.replace("\n", "\r\n").encode("ascii")


def test_check_and_fix_agree_on_encodings(tmp_path: Path) -> None:
    """A PEP 263 latin-1 file, a UTF-8 file with a BOM and a CRLF file: once ``fix --diff`` decided, check
    marks the finding fixable (both digest the same bytes), fix repairs it and writes the file back in its own encoding (coding line, BOM and newlines kept)."""
    files = {"latin1.py": LATIN1, "bom.py": BOM, "crlf.py": CRLF}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    assert runner.invoke(app, ["fix", "--diff", "--isolated", str(tmp_path)]).exit_code in (0, 1)
    check = runner.invoke(app, ["check", "--isolated", str(tmp_path)])
    fixable = [line for line in check.output.splitlines() if ": MND" in line and "[*]" in line]
    assert sorted(Path(line.split(":")[0]).name for line in fixable) == sorted(files)
    res = runner.invoke(app, ["fix", "--isolated", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert f"Fixed {len(fixable)} finding(s) in 3 file(s)" in res.output

    latin1 = (tmp_path / "latin1.py").read_bytes()
    assert latin1.startswith(b"# -*- coding: latin-1 -*-\n") and b'print("caf\xe9")' in latin1
    assert latin1.decode("latin-1") == fixed_text(LATIN1.decode("latin-1"))
    bom = (tmp_path / "bom.py").read_bytes()
    assert bom.startswith(b"\xef\xbb\xbf") and bom.count(b"\xef\xbb\xbf") == 1
    assert bom.decode("utf-8-sig") == fixed_text(BOM.decode("utf-8-sig"))
    crlf = (tmp_path / "crlf.py").read_bytes()
    assert GUARD.encode() in crlf and b"\n" not in crlf.replace(b"\r\n", b"")


def test_text_the_encoding_cannot_hold_is_not_written(tmp_path: Path) -> None:
    from mend.analyzers.static.source import SourceText, UnreadableSource

    with pytest.raises(UnreadableSource, match="cannot encode"):
        SourceText("x = 1\n", "iso-8859-1").encode("x = '✓'\n")
    latin1 = SourceText("# -*- coding: latin-1 -*-\nx = 'é'\n", "iso-8859-1")
    with pytest.raises(UnreadableSource, match="would not read back"):
        latin1.encode("\n\n# -*- coding: latin-1 -*-\nx = 'é'\n")  # the coding line moved past line 2


# --- --verify errors -----------------------------------------------------------------------------

HARNESSES = '''
import time


def helper():
    raise ValueError("the harness is broken")


def raising():
    return helper()


def sleeping():
    time.sleep(600)
'''


@pytest.mark.slow
def test_verify_errors_are_one_line_and_write_nothing(tmp_path: Path, examples_dir: Path) -> None:
    shutil.copy(examples_dir / "transformer_block.py", tmp_path)
    (tmp_path / "harnesses.py").write_text(HARNESSES)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def verify(spec: str, *extra: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "mend.cli", "fix", "-q", *extra, "--verify", spec, "transformer_block.py"]
        return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    missing = verify("transformer_block.py:missing_function")
    raising = verify("harnesses.py:raising")
    timeout = verify("harnesses.py:sleeping", "--verify-timeout", "20")
    for res in (missing, raising, timeout):
        assert res.returncode == 2, res.stderr
        errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and errors[0].startswith("error: --verify: the original worker"), res.stderr
    assert "has no function 'missing_function'" in missing.stderr and "Traceback" not in missing.stderr
    assert "timed out after 20 s" in timeout.stderr and "Traceback" not in timeout.stderr
    assert "raised ValueError: the harness is broken" in raising.stderr
    trace = raising.stderr.split("Traceback (most recent call last):", 1)[1]
    assert 'harnesses.py", line 10, in raising' in trace and 'harnesses.py", line 6, in helper' in trace
    assert "mend" not in trace.replace(str(tmp_path), "")  # the harness's frames, not mend's worker
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


LATIN1_MODEL = """# -*- coding: latin-1 -*-
import torch

WORD = "caf\u00e9"


def step(x):
    print("step", WORD)
    return x * len(WORD)


compiled = torch.compile(step)


def harness():
    return step, (torch.ones(3),), {}
"""


@pytest.mark.slow
def test_verify_runs_the_repaired_copy_in_its_own_encoding(tmp_path: Path) -> None:
    """The repaired copy that --verify runs keeps the file's encoding: a latin-1 string means the same."""
    data = LATIN1_MODEL.encode("latin-1")
    (tmp_path / "model.py").write_bytes(data)
    res = subprocess.run([sys.executable, "-m", "mend.cli", "fix", "-q", "--verify", "model.py:harness", "model.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "repaired: model.py" in res.stdout and "verify model.py:harness: PASS" in res.stdout
    assert "repaired eager vs original eager: identical" in res.stdout
    assert (tmp_path / "model.py").read_bytes() == data


# --- the window ----------------------------------------------------------------------------------

FILLER = '''

def _generated_{i}(key):
    """Generated lookup {i}."""
    table = {{"a": {i}, "b": [{i}, {i} + 1], "name": "entry_{i}"}}
    return table.get(key)


GENERATED_{i} = ({i}, "x{i}")
'''


def with_filler(source: str) -> str:
    """``source`` with generated statements no repair involves after each top-level statement."""
    import ast

    tree = ast.parse(source)
    ends = sorted({s.end_lineno for i, s in enumerate(tree.body)
                   if i > 0 and not (isinstance(s, ast.ImportFrom) and s.module == "__future__")})
    lines = source.splitlines(keepends=True)
    out: list[str] = []
    pos = 0
    for k, end in enumerate(ends):
        out += lines[pos:end] + [FILLER.format(i=k)]
        pos = end
    return "".join(out + lines[pos:])


def _both(source: str, unsafe: bool):
    from mend.analyzers import static
    from mend.rewriter import FixOptions, fix_source
    from mend.rewriter.window import build_window, fix_windowed

    config = static.load_config(["."], isolated=True)

    def diagnose(text: str):
        return static.check_source(text, "m.py", config)

    diags = diagnose(source)
    whole = fix_source(source, "m.py", diags, FixOptions(unsafe=unsafe), diagnose)
    windowed = fix_windowed(source, "m.py", diags, FixOptions(unsafe=unsafe), diagnose)
    return whole, windowed, build_window(source, diags)


def _summary(res) -> tuple:
    return (res.fixed, res.error, [vars(a) for a in res.applied],
            [(r.diagnostic, r.reason, r.unsafe_available) for r in res.remaining])


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.in.py")) + sorted(EXAMPLES.glob("*.py")),
                         ids=lambda p: p.name)
def test_the_window_changes_nothing(path: Path) -> None:
    """Fixing through the window gives exactly what fixing the whole file gives."""
    source = with_filler(path.read_text())
    for unsafe in (False, True):
        whole, windowed, window = _both(source, unsafe)
        assert _summary(windowed) == _summary(whole)
        assert window is not None and window.placeholders, "nothing was hidden: the test would prove nothing"


def test_a_large_generated_file_is_mostly_hidden() -> None:
    source = MODEL + "".join(FILLER.format(i=i) for i in range(300))
    whole, windowed, window = _both(source, unsafe=False)
    assert _summary(windowed) == _summary(whole) and GUARD in windowed.fixed
    assert window is not None and len(window.text) < len(source) / 10
