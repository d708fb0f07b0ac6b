"""Check out the repositories of the corpus manifest into a folder, each at its recorded commit.

    python benchmarks/corpus/checkout.py --to /tmp/mend-corpus [--mirror /work/.mirror]

Each repository's commit is written out file by file (no history) from a local mirror
(``MIRROR/owner+name/repo``, a clone or a bare git folder) into ``TO/owner+name``; files whose contents the
mirror lacks (large data files, images, checkpoints a snapshot leaves out) are skipped and listed in
``TO/owner+name/.skipped``. A folder already there is
left as it is when its ``.commit`` file names the same commit, and replaced otherwise. The code is never
copied into mend's repository. Exit code 1 when a repository is missing from the mirror or its commit
cannot be archived; the others are still checked out.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))


def git_dir(mirror: Path, folder: str) -> Path | None:
    for cand in (mirror / folder / "repo" / ".git", mirror / folder / "repo", mirror / folder):
        if (cand / "HEAD").is_file() and (cand / "objects").is_dir():
            return cand
    return None


def checkout(entry: dict, mirror: Path, to: Path) -> str | None:
    """Archive one repository; None when done, else why not."""
    dest = to / entry["dir"]
    stamp = dest / ".commit"
    if stamp.is_file() and stamp.read_text().strip() == entry["commit"]:
        return None
    gd = git_dir(mirror, entry["dir"])
    if gd is None:
        return f"{entry['repo']}: no mirror under {mirror / entry['dir']}"
    listing = subprocess.run(["git", f"--git-dir={gd}", "ls-tree", "-r", "-z", entry["commit"]], capture_output=True)
    if listing.returncode != 0:
        return f"{entry['repo']}: cannot list {entry['commit']}: {listing.stderr.decode(errors='replace').strip()[:200]}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry['dir']}-", dir=to))
    skipped = []
    for item in listing.stdout.decode().split("\0"):
        if not item:
            continue
        meta, path = item.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind != "blob" or mode == "120000":  # submodules and links are left out
            continue
        blob = subprocess.run(["git", f"--git-dir={gd}", "cat-file", "blob", sha], capture_output=True)
        if blob.returncode != 0:
            skipped.append(path)
            continue
        target = tmp / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob.stdout)
    (tmp / ".skipped").write_text("".join(p + "\n" for p in skipped))
    (tmp / ".commit").write_text(entry["commit"] + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--to", type=Path, required=True, help="the folder of checkouts (created)")
    ap.add_argument("--mirror", type=Path, default=Path("/work/.mirror"), help="where the mirrors are")
    ap.add_argument("--manifest", type=Path, default=HERE / "manifest.json")
    a = ap.parse_args(argv)
    import json

    entries = json.loads(a.manifest.read_text())["repos"]
    a.to.mkdir(parents=True, exist_ok=True)
    problems = [p for e in entries if (p := checkout(e, a.mirror, a.to))]
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{len(entries) - len(problems)} of {len(entries)} repositories checked out in {a.to}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
