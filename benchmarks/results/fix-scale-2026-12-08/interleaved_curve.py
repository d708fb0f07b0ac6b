"""Old and new mend side by side on generated files, interleaved per file; each command its own process.

    python interleaved_curve.py NEW_PYTHONPATH SIZES [ordinary,dense]

The old code is imported from /tmp/oldpkg (a folder `mend` whose subpackages link to a worktree of the old
commit), the new from NEW_PYTHONPATH; files from benchmarks/fix_scale.py generate(); `mend fix --unsafe-fixes
--diff` (nothing written). CPU seconds are user + system of the process (the machine is shared).
"""
import os, subprocess, sys, time, shutil, tempfile
from pathlib import Path
sys.path.insert(0, "/work/main/benchmarks")
import fix_scale
PY = "/work/main/.venv/bin/python"
VARIANTS = {"old": "/tmp/oldpkg", "new": sys.argv[1]}
sizes = [float(s) for s in sys.argv[2].split(",")]
kinds = sys.argv[3].split(",") if len(sys.argv) > 3 else ["ordinary", "dense"]
def run(cmd, cwd, pp):
    env = dict(os.environ, PYTHONPATH=pp)
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        out.seek(0); text = out.read().decode(errors="replace")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, text
print(f"| file | MB | variant | check wall s | check cpu s | check peak MB | fix wall s | fix cpu s | fix peak MB | fix outcome |")
print("|---|---|---|---|---|---|---|---|---|---|")
for kind in kinds:
    for mb in sizes:
        work = Path(tempfile.mkdtemp(prefix="b39-"))
        n = fix_scale.generate(work / "gen.py", mb, kind == "dense")
        for name, pp in VARIANTS.items():
            cw, cc, cp, _ = run([PY, "-m", "mend.cli", "check", "--isolated", "--no-cache", "-q", "gen.py"], work, pp)
            fw, fc, fp, text = run([PY, "-m", "mend.cli", "fix", "--isolated", "--no-cache", "--unsafe-fixes", "--diff", "-q", "gen.py"], work, pp)
            outcome = next((l.split(": ", 2)[-1] for l in text.splitlines() if l.startswith("error:")), text.strip().splitlines()[-1] if text.strip() else "")
            print(f"| {kind} {n}f | {mb} | {name} | {cw:.1f} | {cc:.1f} | {cp:.0f} | {fw:.1f} | {fc:.1f} | {fp:.0f} | {outcome[:80]} |", flush=True)
        shutil.rmtree(work)
