"""``mend fix`` end to end on copies of the examples (the static analyzer supplies the sites)."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mend.cli.app import app
from tests.rewriter import users

runner = CliRunner()


@pytest.fixture
def examples_copy(tmp_path: Path, examples_dir: Path) -> Path:
    dest = tmp_path / "examples"
    shutil.copytree(examples_dir, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _snapshot(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.glob("*.py"))}


def test_diff_writes_nothing(examples_copy: Path) -> None:
    before = _snapshot(examples_copy)
    result = runner.invoke(app, ["fix", "--diff", str(examples_copy)])
    assert result.exit_code == 1, result.output
    assert "+        if not torch.compiler.is_compiling():" in result.output
    # the overflow guard computes torch.finfo(h.dtype) on every path under compile: an unsafe fix
    assert "MND201 not fixed: unsafe fix available with --unsafe-fixes" in result.output
    assert _snapshot(examples_copy) == before
    unsafe = runner.invoke(app, ["fix", "--diff", "--unsafe-fixes", str(examples_copy)])
    assert "+            h = _mend_where(_mend_cond0, torch.clamp(h" in unsafe.output
    assert _snapshot(examples_copy) == before


def test_fix_in_place_then_nothing_left_to_do(examples_copy: Path) -> None:
    target = examples_copy / "transformer_block.py"
    os.chmod(target, 0o640)
    result = runner.invoke(app, ["fix", "--unsafe-fixes", str(examples_copy)])
    assert "Fixed" in result.output, result.output
    text = target.read_text()
    assert "_mend_where(" in text and "logger.debug" in text
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    after = _snapshot(examples_copy)
    again = runner.invoke(app, ["fix", "--unsafe-fixes", str(examples_copy)])
    assert _snapshot(examples_copy) == after
    assert "Fixed 0 finding(s)" in again.output


def test_select_ignore_and_exit_non_zero_on_fix(examples_copy: Path) -> None:
    result = runner.invoke(app, ["fix", "--select", "MND102", "--exit-non-zero-on-fix", str(examples_copy)])
    assert result.exit_code == 1
    assert "MND102 fixed" in result.output and "MND201" not in result.output
    text = (examples_copy / "transformer_block.py").read_text()
    assert "torch.where" not in text and "is_compiling" in text
    result = runner.invoke(app, ["fix", "--ignore", "MND2,MND1", str(examples_copy / "transformer_block.py")])
    assert "torch.where" not in (examples_copy / "transformer_block.py").read_text()


def test_unsafe_fixes_and_summary(examples_copy: Path) -> None:
    result = runner.invoke(app, ["fix", "--diff", str(examples_copy)])
    assert "fixable with --unsafe-fixes" in result.output
    result = runner.invoke(app, ["fix", "--unsafe-fixes", str(examples_copy)])
    assert 'register_buffer("step"' in (examples_copy / "step_counter.py").read_text()
    assert "torch._assert_async" in (examples_copy / "validated_model.py").read_text()


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["fix", str(tmp_path / "missing.py")])
    assert result.exit_code == 2
    assert "no such file" in result.output
    result = runner.invoke(app, ["fix", "--side-effects", "loud", str(tmp_path)])
    assert result.exit_code == 2


def test_side_effects_from_config(examples_copy: Path) -> None:
    (examples_copy / "pyproject.toml").write_text('[tool.mend]\nside-effects = "defer"\n')
    runner.invoke(app, ["fix", "--unsafe-fixes", "--select", "MND102", str(examples_copy)])
    assert "_mend_defer(logger.debug" in (examples_copy / "transformer_block.py").read_text()


MODEL = '''import torch


@torch.compile
def step{i}(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    print("step", {i}, "{word}")
    if y.sum() > 0:
        y = torch.clamp(y, min=0.0)
    return y
'''
KINDS = ("plain", "latin1", "bom", "crlf", "mode", "link", "link-out", "hard", "clean", "broken", "binary",
         "readonly", "ro-folder", "immutable")


def _build_tree(root: Path, n: int, seed: int, ordinary: bool) -> None:
    """A generated tree under ``root/tree`` (and ``root/outside``): valid files in several encodings and
    newline styles, links to files inside and outside the tree, hard links, files with no finding, bad
    files, and (when mend runs as an ordinary user) files it may not write."""
    rng = random.Random(seed)
    tree, outside = root / "tree", root / "outside"
    (tree / "ro").mkdir(parents=True)
    outside.mkdir()
    kinds = [k for k in KINDS if ordinary or k not in ("readonly", "ro-folder", "immutable")]
    immutable: list[Path] = []
    links: list[Path] = []
    for i in range(n):
        kind = kinds[i % len(kinds)] if i < len(kinds) else rng.choice(kinds)
        name = tree / f"m{i:03d}_{kind}.py"
        text = MODEL.format(i=i, word="caf\u00e9" if kind in ("latin1", "bom") else "cafe")
        if kind == "latin1":
            name.write_bytes(("# -*- coding: latin-1 -*-\n" + text).encode("latin-1"))
        elif kind == "bom":
            name.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
        elif kind == "crlf":
            name.write_bytes(text.replace("\n", "\r\n").encode())
        elif kind == "link":
            links.append(name)
        elif kind == "link-out":
            (outside / f"t{i:03d}.py").write_text(text)
            name.symlink_to(f"../outside/t{i:03d}.py")  # out of the tree (relative: trees compare equal)
        elif kind == "hard":
            name.write_text(text)
            os.link(name, tree / f"m{i:03d}_hard_twin.py")
        elif kind == "clean":
            name.write_text("import torch\n\n\ndef f(x):\n    return x + 1\n")
        elif kind == "broken":
            name.write_text(text + "def (:\n")
        elif kind == "binary":
            name.write_bytes(b"\x00torch" + bytes(range(256)))
        elif kind == "ro-folder":
            (tree / "ro" / f"m{i:03d}.py").write_text(text)
        else:
            name.write_text(text)
            if kind == "mode":
                name.chmod(rng.choice([0o600, 0o640, 0o664, 0o755]))
            elif kind == "immutable":
                immutable.append(name)
    plain = sorted(tree.glob("*_plain.py"))
    for link in links:
        link.symlink_to(rng.choice(plain).name)
    if ordinary:
        for path in [root, tree, outside, *tree.rglob("*"), *outside.rglob("*")]:
            if not path.is_symlink():
                os.chown(path, users.uid(), users.gid())
        for path in tree.glob("*_readonly.py"):
            path.chmod(0o444)
        (tree / "ro").chmod(0o555)
        for path in immutable:
            users.set_immutable(path)


def _state(root: Path) -> dict[str, tuple]:
    """Every path under root: ("link", target) or ("file", bytes, mode, owner); not the helper module `mend fix`
    writes (`_mend.py`, before any file that imports from it: tests/rewriter/test_helper_module.py), nor its
    record of fix decisions (`.mend_cache/`: tests/static/test_fixability.py)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.name == "_mend.py" or ".mend_cache" in path.relative_to(root).parts:
            continue
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_file():
            st = path.stat()
            out[rel] = ("file", path.read_bytes(), stat.S_IMODE(st.st_mode), st.st_uid)
    return out


def _fixed_once(data: bytes) -> bytes:
    """The bytes of one file fixed once on its own, in its own encoding and newlines."""
    from mend.analyzers.static.source import decode
    from mend.rewriter.files import same_newlines
    from tests.rewriter.test_files import fixed_text

    source = decode(data)
    return source.encode(same_newlines(source.text, fixed_text(source.text)))


def _mend_fix(root: Path, ordinary: bool) -> subprocess.Popen:
    """`mend fix` on ``root/tree``, with SIGINT acted on as at a terminal: a test run started in the
    background of a shell inherits SIGINT ignored, and the child would never see the interrupt."""
    return subprocess.Popen([*(users.prefix() if ordinary else []), sys.executable, "-m", "mend.cli", "fix", "-q", "--isolated", "tree"],
                            cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.mark.slow
def test_interrupt_leaves_every_file_old_or_new() -> None:
    """Fuzz/soak: `mend fix` over a generated tree (encodings, links, hard links, bad files, files the user
    may not write) is killed at random points (SIGTERM, SIGINT, SIGKILL). Every file is then old or new,
    every link still the same link, every mode and owner kept, no temporary file left (but by SIGKILL);
    a last full run gives exactly the uninterrupted result, in which each file was fixed once."""
    ordinary = users.skip_reason() is None
    seed = int(os.environ.get("MEND_SOAK_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    n = 90
    with users.shared_folder() if ordinary else tempfile_dir() as base:
        ref = base / "reference"
        ref.mkdir()
        _build_tree(ref, n, seed, ordinary)
        old = _state(ref)
        proc = _mend_fix(ref, ordinary)
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 2, err  # the bad and unwritable files are reported
        new = _state(ref)
        assert "Traceback" not in err
        for rel, entry in new.items():  # each real file fixed once, in its own encoding; the rest untouched
            if entry[0] == "file" and entry != old[rel]:
                assert entry[1] == _fixed_once(old[rel][1]), (seed, rel)
                assert entry[2:] == old[rel][2:], (seed, rel)
        changed = [rel for rel in old if old[rel] != new[rel]]
        unwritable = [rel for rel in old if any(k in rel for k in ("readonly", "ro/", "immutable"))]
        assert changed and not set(changed) & set(unwritable), (seed, changed)
        assert all(new[rel][1].startswith(b"\xef\xbb\xbf") for rel in new if rel.endswith("_bom.py"))

        for trial, sig in enumerate([signal.SIGTERM, signal.SIGKILL, signal.SIGINT, signal.SIGKILL, signal.SIGTERM]):
            landed = False
            for attempt in range(4):  # a run that finished before the signal is tried again, with a new point
                work = base / f"work{trial}-{attempt}"
                work.mkdir()
                _build_tree(work, n, seed, ordinary)
                assert _state(work) == old
                wanted = rng.randrange(1, max(2, len(changed) * 2 // (3 + 2 * attempt)))
                _interrupt(work, sig, ordinary, wanted, [(work / rel, old[rel][1]) for rel in changed], rng)
                now = _state(work)
                temps = [rel for rel in now if rel.endswith(".mend-tmp")]
                assert not temps or sig == signal.SIGKILL, (seed, temps)
                now = {rel: entry for rel, entry in now.items() if rel not in temps}
                assert now.keys() == old.keys(), (seed, sig)
                for rel, entry in now.items():
                    assert entry in (old[rel], new[rel]), (seed, sig.name, rel)
                for path in temps:
                    (work / path).unlink()
                proc = _mend_fix(work, ordinary)
                proc.communicate(timeout=600)
                assert _state(work) == new, (seed, sig.name)  # finishing the job fixes nothing twice
                landed = 0 < sum(now[rel] == new[rel] for rel in changed) < len(changed)
                if landed:
                    break
            assert landed, f"{sig.name} never landed mid-run (seed {seed})"


def _interrupt(work: Path, sig: signal.Signals, ordinary: bool, wanted: int, watch: list[tuple[Path, bytes]],
               rng: random.Random) -> None:
    """Start `mend fix` on ``work`` and send ``sig`` once ``wanted`` of the watched files have changed."""
    proc = _mend_fix(work, ordinary)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if sum(1 for path, data in watch if path.read_bytes() != data) >= wanted:
            break
        time.sleep(rng.uniform(0, 0.02))
    proc.send_signal(sig)
    proc.communicate(timeout=60)


@contextlib.contextmanager
def tempfile_dir():
    with tempfile.TemporaryDirectory(prefix="mend-soak-") as tmp:
        yield Path(tmp)


POSITIONS = '''import torch


@torch.compile
def step(x: torch.Tensor) -> torch.Tensor:
    y = x.cos()
    print("step", y.shape)
    n = y.sum().item()
    return y / n
'''


def test_findings_left_are_reported_at_their_lines_in_the_users_file(tmp_path: Path) -> None:
    """The repair of line 7 adds a helper above the function; the `.item()` left at line 8 is still
    reported at line 8 (the repaired text has it 40 lines lower), in --diff and when writing."""
    path = tmp_path / "two.py"
    path.write_text(POSITIONS)
    for args, code in ((["--diff"], 1), ([], 1)):
        result = runner.invoke(app, ["fix", *args, str(path)])
        assert result.exit_code == code, result.output
        assert f"{path}:7:5: MND101 " in result.output
        assert f"{path}:8:9: MND301 not fixed:" in result.output, result.output
    assert "    n = y.sum().item()\n" in path.read_text() and path.read_text() != POSITIONS


LOOP_AND_TRY = '''\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            print("layer", i)
            x = layer(x)
        try:
            print("done")
        finally:
            pass
        return x
'''


def test_messages_repaired_in_a_loop_and_a_try_check_clean_afterwards(tmp_path: Path) -> None:
    """The tree's ``_mend.py`` emit falls back to a disabled call (marked ``noqa: MND504``) only for what a graph
    cannot carry: after the fix, check does not report the repaired lines as a loop's or a ``try``'s break."""
    (tmp_path / "m.py").write_text(LOOP_AND_TRY)
    before = runner.invoke(app, ["check", "--no-cache", "--isolated", str(tmp_path)])
    assert before.exit_code == 1 and "MND506" in before.output and "MND505" in before.output, before.output
    fixed = runner.invoke(app, ["fix", "--no-cache", "--isolated", str(tmp_path)])
    assert "Fixed 2 finding(s)" in fixed.output and (tmp_path / "_mend.py").is_file(), fixed.output
    after = runner.invoke(app, ["check", "--no-cache", "--isolated", str(tmp_path)])
    assert after.exit_code == 0, after.output
