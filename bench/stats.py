"""The statistics of ``mend bench``: latency summaries, the interleaving order, warm-up until stable, and the
verdict on a comparison (a ratio with its interval, and whether the difference is within noise).

No torch here: the runner (which imports no torch) and the worker both use it.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

LEVEL = 0.95  # the confidence level of every interval
RESAMPLES = 2000  # bootstrap resamples (fixed seed: the same rounds give the same interval)
MIN_EFFECT = 0.02  # a difference smaller than this fraction is called noise whatever its interval


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method), q in [0, 100]."""
    if not values:
        raise ValueError("percentile of no values")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def latency_stats(rounds: list[list[float]]) -> dict[str, Any]:
    """Milliseconds from per-round call times in seconds: the median of round medians, the spread of the
    round medians ((max - min) / median), p10/p90/mean/min/max over all calls."""
    all_ms = [t * 1e3 for r in rounds for t in r]
    round_medians = [statistics.median(r) * 1e3 for r in rounds if r]
    med = statistics.median(round_medians)
    return {
        "median": med,
        "spread": (max(round_medians) - min(round_medians)) / med if med > 0 else 0.0,
        "p10": percentile(all_ms, 10),
        "p90": percentile(all_ms, 90),
        "mean": statistics.fmean(all_ms),
        "min": min(all_ms),
        "max": max(all_ms),
        "calls": len(all_ms),
        "rounds": len(round_medians),
        "round_medians": round_medians,
    }


def round_order(n: int, r: int) -> list[int]:
    """The order in which ``n`` workers take round ``r``: rotated by one each round, so that over ``n``
    rounds every worker runs once in every position (first after the idle gap, last, ...) and drift in the
    machine's speed falls on all of them alike."""
    if n <= 0:
        return []
    k = r % n
    return list(range(k, n)) + list(range(k))


def combine_replicas(per_process: list[list[float]]) -> list[float]:
    """Round medians of one (variant, backend) measured in several processes: per round, the median over
    the processes that completed it (a process that failed early leaves its rounds out)."""
    rounds = max((len(p) for p in per_process), default=0)
    out = []
    for r in range(rounds):
        vals = [p[r] for p in per_process if r < len(p)]
        out.append(statistics.median(vals))
    return out


def process_spread(medians: Sequence[float]) -> float:
    """How far the medians of the same measurement in separate processes lie apart: max / min - 1 (0 for
    one process). A difference between variants smaller than this is no difference."""
    xs = [m for m in medians if m > 0]
    if len(xs) < 2:
        return 0.0
    return max(xs) / min(xs) - 1.0


def until_stable(
    call: Callable[[], float],
    batch: int = 5,
    tol: float = 0.03,
    max_s: float = 60.0,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Any]:
    """Warm up by batches of ``batch`` calls until two batches in a row have medians within ``tol`` of
    each other (``call`` returns its own time), or ``max_s`` seconds have passed (``stable`` False).
    At least two batches run. Returns ``calls``, ``stable``, ``median_s`` (the last batch's median)."""
    start = clock()
    prev = None
    calls = 0
    while True:
        med = statistics.median(call() for _ in range(batch))
        calls += batch
        if prev is not None and abs(med - prev) <= tol * min(med, prev):
            return {"calls": calls, "stable": True, "median_s": med}
        if clock() - start > max_s:
            return {"calls": calls, "stable": False, "median_s": med}
        prev = med


def ratio_interval(
    base: Sequence[float], other: Sequence[float], resamples: int = RESAMPLES, level: float = LEVEL, seed: int = 0
) -> tuple[float, float, float]:
    """``other / base`` from round medians measured in the same interleaved rounds: the median of the
    per-round ratios (pairing by round cancels drift that hits both), and a bootstrap percentile interval of
    that median over rounds. With fewer than 3 paired rounds the interval is the range of the ratios."""
    pairs = [o / b for b, o in zip(base, other) if b > 0]
    if not pairs:
        raise ValueError("no paired rounds")
    est = statistics.median(pairs)
    if len(pairs) < 3:
        return est, min(pairs), max(pairs)
    rng = random.Random(seed)
    n = len(pairs)
    boots = sorted(statistics.median(rng.choices(pairs, k=n)) for _ in range(resamples))
    alpha = (1.0 - level) / 2.0
    return est, percentile(boots, 100 * alpha), percentile(boots, 100 * (1 - alpha))


def verdict(est: float, lo: float, hi: float, noise: float = MIN_EFFECT) -> str:
    """``faster`` or ``slower`` when the whole interval of the time ratio lies on one side of 1 and the ratio
    itself differs from 1 by more than ``noise`` (the larger of :data:`MIN_EFFECT` and the spread between
    processes of the same measurement); otherwise ``within noise``."""
    if hi < 1.0 and est < 1.0 / (1.0 + noise):
        return "faster"
    if lo > 1.0 and est > 1.0 + noise:
        return "slower"
    return "within noise"


def compare(
    base_rounds: Sequence[float], other_rounds: Sequence[float], noise: float = MIN_EFFECT
) -> dict[str, Any]:
    """The comparison of two rows' round medians: ``ratio`` (other / base time: below 1 is faster), its
    ``interval``, the ``noise`` threshold used, and the ``verdict``."""
    est, lo, hi = ratio_interval(base_rounds, other_rounds)
    noise = max(noise, MIN_EFFECT)
    return {"ratio": est, "interval": [lo, hi], "level": LEVEL, "noise": noise, "verdict": verdict(est, lo, hi, noise)}
