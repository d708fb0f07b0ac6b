# recall and precision only (the corpus report without its fixability part): python quickscore.py ROOT RESULT.json...
"""recall/precision only (the corpus report without its fixability part), for a result and a root."""
import sys
from pathlib import Path
from benchmarks.corpus import report
from benchmarks.zoo import records as R, score as S
res = report.merge([R.load(p) for p in sys.argv[2:]])
root = Path(sys.argv[1])
res.sources["original"] = R.SourceInfo(name="original", path=str(root))
from mend.analyzers.static import check_paths, load_config
targets = report._scope(res, root)
config = load_config([str(t) for t in targets], isolated=True)
checked = check_paths([str(t) for t in targets], config, use_cache=False)
findings = [S.StaticFinding(S._relative(d.path, str(root)), d.line, d.end_line or d.line, d.code,
                            str(d.data.get("mode", "")), int(d.data.get("inner_line", 0) or 0)) for d in checked.diagnostics]
print(f"{len(targets)} files checked, {len(findings)} findings")
for mode in res.modes:
    recs = [r for r in res.records if r.source == "original" and r.mode == mode]
    sc = S.score(recs, findings, dtype="fp32", run_mode=mode)
    f = report._figures(sc, res, mode, {r.name for r in recs})
    print(mode, {k: f[k] for k in ("rows", "recorded_sites", "sites_found", "recall", "judged_findings", "confirmed", "precision", "breaks")})
    print("  missed (first 12):", *f["missed"][:12], sep="\n    ")
    print("  unconfirmed (first 12):", *f["unconfirmed"][:12], sep="\n    ")
