"""Where the wall time of `mend fix` on a whole package goes: the parent's profile and each file's repair time."""
import cProfile, pstats, shutil, sys, time, os
from pathlib import Path
from mend.rewriter import workers
from mend.rewriter.api import fix_paths
from mend.rewriter.options import FixOptions

real = workers.repair_file
def timed(job, options, diagnose):
    t = time.perf_counter()
    out = real(job, options, diagnose)
    out.notes.append(("@time", f"{time.perf_counter() - t:.3f} {job.display} {len(job.text)}"))
    return out
workers.repair_file = timed

src = Path(sys.argv[1]); dest = Path("/tmp/prof_tree") / src.name
shutil.rmtree(dest.parent, ignore_errors=True); shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
os.chdir(dest.parent)
prof = cProfile.Profile()
t = time.perf_counter()
prof.enable()
run = fix_paths([dest.name], FixOptions(unsafe=True), isolated=True, use_cache=False)
prof.disable()
print(f"wall {time.perf_counter() - t:.1f} s, applied {run.applied}, files {len(run.files)}")
times = sorted(((float(m.split()[0]), m) for p, m in run.notes if p == "@time"), reverse=True)
print(f"repairs: {len(times)}, sum {sum(x for x, _ in times):.1f} s; slowest:")
for x, m in times[:12]:
    print("  ", m)
pstats.Stats(prof).sort_stats("cumulative").print_stats(35)
