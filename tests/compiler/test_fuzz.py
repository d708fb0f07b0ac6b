"""A seeded, bounded fuzzer: random pointwise/reduction/view graphs, compiled by mend, against eager."""

from __future__ import annotations

import random

import pytest
import torch

from .helpers import check

SHAPES = [(7,), (5, 9), (3, 4, 6), (2, 3, 4, 5), (1, 8), (33, 17)]

UNARY = [
    ("exp", lambda a: torch.exp(a.clamp(-10, 10))),
    ("tanh", torch.tanh),
    ("sigmoid", torch.sigmoid),
    ("abs", torch.abs),
    ("neg", torch.neg),
    ("relu", torch.relu),
    ("sin", torch.sin),
    ("sqrt", lambda a: torch.sqrt(a.abs() + 1)),
    ("log", lambda a: torch.log(a.abs() + 1)),
    ("erf", torch.erf),
    ("square", lambda a: a * a),
    ("half", lambda a: a.half().float()),
]
BINARY = [
    ("add", torch.add),
    ("sub", torch.sub),
    ("mul", torch.mul),
    ("max", torch.maximum),
    ("div", lambda a, b: a / (b.abs() + 1)),
    ("where", lambda a, b: torch.where(a > b, a, b * 0.5)),
]


def _reduce(rng, a):
    d = rng.randrange(a.dim())
    kind = rng.choice(["sum", "amax", "amin", "mean", "softmax", "var"])
    if kind == "softmax":
        return lambda x: x.softmax(d)
    if kind == "var":
        return lambda x: x.var(d, keepdim=True)
    return lambda x: getattr(x, kind)(d, keepdim=True)


def _view(rng, a):
    if a.dim() >= 2:
        i, j = rng.sample(range(a.dim()), 2)
        kind = rng.choice(["transpose", "flatten", "flip"])
        if kind == "transpose":
            return lambda x: (x.transpose(i, j) * 1.5).transpose(i, j)
        if kind == "flatten":
            return lambda x: (x.reshape(-1) + 1).reshape(x.shape)
        return lambda x: x.flip(i)
    return lambda x: x.flip(0)


def make_program(seed: int):
    rng = random.Random(seed)
    shape = rng.choice(SHAPES)
    n_in = rng.randint(1, 3)
    in_shapes = []
    for _ in range(n_in):
        s = [1 if rng.random() < 0.25 else d for d in shape]
        in_shapes.append(tuple(s))
    in_shapes[0] = shape
    steps = []
    n_vals = n_in
    for _ in range(rng.randint(3, 9)):
        r = rng.random()
        a = rng.randrange(n_vals)
        if r < 0.35:
            name, f = rng.choice(UNARY)
            steps.append(("u", f, a))
        elif r < 0.7:
            name, f = rng.choice(BINARY)
            steps.append(("b", f, a, rng.randrange(n_vals)))
        elif r < 0.9:
            steps.append(("r", rng.random(), a))
        else:
            steps.append(("v", rng.random(), a))
        n_vals += 1
    outs = sorted({n_vals - 1, rng.randrange(n_in, n_vals)})

    def program(*xs):
        vals = list(xs)
        lrng = random.Random(seed + 1)
        for st in steps:
            if st[0] == "u":
                vals.append(st[1](vals[st[2]]))
            elif st[0] == "b":
                vals.append(st[1](vals[st[2]], vals[st[3]]))
            elif st[0] == "r":
                vals.append(_reduce(random.Random(st[1]), vals[st[2]])(vals[st[2]]))
            else:
                vals.append(_view(random.Random(st[1]), vals[st[2]])(vals[st[2]]))
        _ = lrng
        return tuple(vals[i] for i in outs)

    g = torch.Generator().manual_seed(seed)
    args = [torch.randn(s, generator=g) for s in in_shapes]
    return program, args


@pytest.mark.slow
@pytest.mark.parametrize("block", range(4))
def test_fuzz_random_graphs_match_eager(block):
    for seed in range(block * 8, block * 8 + 8):
        program, args = make_program(seed)
        try:
            check(program, *args)
        except AssertionError as exc:
            raise AssertionError(f"fuzz seed {seed}: {exc}") from exc
