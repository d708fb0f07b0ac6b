"""What the MoE routing repairs cost: the routing as written vs its static-shape form under compile.

Both forms come from a fixture and its repair by ``mend fix --unsafe-fixes``, sized up: ``--fixture
moe_routing`` (Mixtral's routing loop, ``tests/rewriter/fixtures/moe_routing.in.py``) or ``--fixture
grouped_experts`` (JetMoE/GraniteMoE's router counts and split experts, ``grouped_experts.in.py``); each runs eagerly, and compiled with the ``--backend``
(default ``eager``: the captured ops run as captured, so the difference is the extra expert work). Prints
medians of ``--repeat`` timed calls after a warm-up, and the ratios to the original run eagerly.

    python benchmarks/moe_routing.py --tokens 512 --dim 256 --experts 8 --top-k 2
    python benchmarks/moe_routing.py --fixture grouped_experts
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from mend.analyzers import static
from mend.rewriter import FixOptions, fix_source

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "rewriter" / "fixtures"
# fixture -> (module class, a name only the repaired source has, constructor from dim, experts, top-k)
BLOCKS = {
    "moe_routing": ("SparseMoE", "_mend_routed", lambda cls, d, e, k: cls(d, e, k)),
    "grouped_experts": ("MoE", "_mend_group", lambda cls, d, e, k: cls(d, 2 * d, e, k)),
}


def _module(text: str, fixture: str, dim: int, experts: int, top_k: int) -> torch.nn.Module:
    ns: dict = {"__name__": "moe_bench"}
    exec(compile(text.replace("@torch.compile\n", ""), f"{fixture}.py", "exec"), ns)
    torch.manual_seed(0)
    cls, _, make = BLOCKS[fixture]
    return make(ns[cls], dim, experts, top_k).eval()


def _median(fn, x, repeat: int) -> float:
    with torch.no_grad():
        fn(x)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn(x)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--backend", default="eager")
    ap.add_argument("--fixture", choices=sorted(BLOCKS), default="moe_routing")
    args = ap.parse_args()
    path = FIXTURES / f"{args.fixture}.in.py"
    src = path.read_text()
    config = static.load_config([str(FIXTURES)], isolated=True)
    fixed = fix_source(src, path.name, None, FixOptions(unsafe=True, helpers="import"),
                       lambda text: static.check_source(text, path.name, config)).fixed
    assert BLOCKS[args.fixture][1] in fixed, "the routing was not repaired"
    original = _module(src, args.fixture, args.dim, args.experts, args.top_k)
    repaired = _module(fixed, args.fixture, args.dim, args.experts, args.top_k)
    x = torch.randn(args.tokens, args.dim)
    with torch.no_grad():
        ref = original(x)
        torch._dynamo.reset()
        got = torch.compile(repaired, backend=args.backend)(x)
    rows = [
        ("original, eager", _median(original, x, args.repeat)),
        ("repaired, eager (runs the original loop)", _median(repaired, x, args.repeat)),
    ]
    torch._dynamo.reset()
    rows.append((f"original, compiled ({args.backend})", _median(torch.compile(original, backend=args.backend), x,
                                                                 args.repeat)))
    torch._dynamo.reset()
    rows.append((f"repaired, compiled ({args.backend})", _median(torch.compile(repaired, backend=args.backend), x,
                                                                 args.repeat)))
    print(f"{args.fixture}: tokens {args.tokens}, dim {args.dim}, experts {args.experts}, top-k {args.top_k}; "
          f"expert rows: {args.tokens * args.top_k} routed -> {args.tokens * args.top_k * args.experts} under "
          f"the repair (x{args.experts} expert FLOPs); compiled repaired vs original eager: max |diff| "
          f"{(got - ref).abs().max().item():.3g}")
    print(f"| {'run':<45} | {'median ms':>9} | {'x original eager':>16} |")
    print(f"|{'-' * 47}|{'-' * 11}|{'-' * 18}|")
    for name, t in rows:
        print(f"| {name:<45} | {t * 1e3:9.2f} | {t / rows[0][1]:15.2f}x |")


if __name__ == "__main__":
    main()
