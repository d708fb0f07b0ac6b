"""Break sites per corpus and mode, original against the repaired sources (rows that ran in both), held-out apart:
    python benchmarks/results/corpus-2026-11-29/totals.py RESULT.json [MORE.json] (from the repository root)."""
import json, sys, gzip
from collections import defaultdict
recs = {}
for p in sys.argv[1:]:
    d = json.load(open(p))
    for r in d['records']:
        recs[(r['name'], r['mode'], r['source'])] = r
held = set()
m = json.load(open('benchmarks/corpus/manifest.json'))
held = {e['name'] for e in m['repos'] if e['held_out']}
def part(n): return 'held-out' if n.partition(':')[0] in held else 'build'
for split in ('all', 'build', 'held-out'):
  for mode in ('eval', 'train'):
    orig = {k[0]: r for k, r in recs.items() if k[1] == mode and k[2] == 'original' and r['status'] == 'ok' and (split == 'all' or part(k[0]) == split)}
    if not orig: continue
    line = [split, mode, f"orig rows ok {len(orig)}", f"sites {sum(len(r['breaks']) for r in orig.values())}", f"gbreaks {sum((r['graphs'] or 1)-1 for r in orig.values())}", f"breaking rows {sum(1 for r in orig.values() if r['breaks'])}"]
    for src in ('safe', 'unsafe'):
        rep = {n: recs.get((n, mode, src)) for n in orig}
        both = {n: r for n, r in rep.items() if r and r['status'] == 'ok'}
        if not both: continue
        ob = sum(len(orig[n]['breaks']) for n in both); rb = sum(len(r['breaks']) for r in both.values())
        worse = [n for n, r in both.items() if len(r['breaks']) > len(orig[n]['breaks']) or (r['graphs'] or 0) > (orig[n]['graphs'] or 0)]
        changed = [n for n, r in both.items() if r.get('eager_same') is False]
        rng = [n for n, r in both.items() if r.get('rng_same') is False]
        lost = sum((r.get('messages_diff') or {}).get(ph, {}).get('lost', 0) for r in both.values() for ph in ('eager', 'compiled'))
        notrun = [n for n, r in rep.items() if r is not None and r['status'] != 'ok']
        line.append(f"| {src}: rows {len(both)} sites {ob}->{rb} changed {len(changed)} rng {len(rng)} worse {worse} lost msgs {lost} stopped {notrun}")
    print(*line)
