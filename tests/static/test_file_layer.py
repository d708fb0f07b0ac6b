"""mend check on a tree holding files that are not regular files: skipped with a message, never read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")

BROKEN = "import torch\n\n\n@torch.compile\ndef f(x):\n    print(x)\n    return x + 1\n"


def test_a_fifo_named_py_is_skipped_not_read(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(BROKEN)
    os.mkfifo(tmp_path / "trap.py")
    proc = subprocess.run([sys.executable, "-m", "mend.cli", "check", "--no-cache", "."], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr  # the finding in model.py, and no hang
    assert "model.py" in proc.stdout
    assert "skipped trap.py: not a regular file (a FIFO (named pipe))" in proc.stderr


def test_an_oversized_file_is_skipped_with_the_reason(tmp_path: Path) -> None:
    from mend.analyzers.static import check_paths, load_config
    from mend.safeio import MAX_SOURCE_BYTES

    big = tmp_path / "big.py"
    with open(big, "wb") as fh:
        fh.truncate(MAX_SOURCE_BYTES + 1)
    config = load_config([str(tmp_path)], isolated=True)
    result = check_paths([str(tmp_path)], config, use_cache=False)
    assert [(Path(p).name, why.split(" (")[0]) for p, why in result.skipped] == [("big.py", "larger than 16 MB")]
    assert not result.diagnostics
