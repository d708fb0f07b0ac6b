"""MND201 LayerDrop, ``u = torch.rand([])`` then ``if u < p:``: guarded, ``if p > 0 and u < p:``.

Also where the test follows ``self.training and`` in an ``if`` or a conditional expression (M2M100's and
wav2vec2's ``skip_the_layer = True if self.training and (u < p) else False``): the guard goes before the
draw's test, ``self.training and p > 0 and (u < p)``; the test is read for its truth only, so the value
``False`` where the original gave ``tensor(False)`` changes nothing. The draw may also be Python's
``random.uniform(0, 1)`` (MusicGen's decoder): Dynamo traces it as an input of the graph, drawn before the graph
runs whether the graph reads it or not (measured on torch 2.13: the same Python random state after a compiled
call as after the eager one), so it needs no ``_mend_drawn``. ``random.random()`` itself breaks the graph
(MND105), and inline in the test (``self.training and random.random() < p``) the draw sits in the operand the
guard would skip, so no guard keeps it: those forms are left as they are.

The LayerDrop loops of transformers' encoders and decoders (BART, Whisper, ...) draw one uniform number per
layer in training and skip the layer when it is below ``self.layerdrop``; the ``if`` on the tensor breaks
the graph. ``torch.rand`` draws from ``[0, 1)``: no draw is ever below a ``p <= 0``, so ``u < p`` is False
there without looking at ``u``, and ``p > 0 and u < p`` has the truth value of ``u < p`` for every number
``p`` (NaN included). **Safe**: the draw is kept (the RNG stream is the same), and where ``p > 0`` the
original test runs as written. A compiled graph drops an operator nothing reads, which would move the random
stream of everything after it (dropout masks): the draw becomes ``_mend_drawn(torch.rand([]))``, which an
ordered effect reads under compile, so the graph still draws it. With the usual ``layerdrop=0.0`` Dynamo decides ``p > 0`` on the constant
attribute and the break is gone; with ``p > 0`` the tensor test still breaks the graph, as before (the
static check then reports nothing: the test runs only in that configuration, like one behind
``self.training``).

Matched only where every part is proven: ``u`` is bound once in the function, to ``torch.rand`` of one
element (``[]``, ``()``, ``1``, ``[1]``, ``(1,)``; keywords ``generator``, ``device``, ``requires_grad`` or a
real floating ``dtype``), in the same block before the ``if`` and not mentioned in between; the test is
``u < p`` or ``p > u`` (strict: ``u <= 0`` holds for a draw of 0), alone or the last operand of an ``and``
chain whose other operands are ``self.`` attributes (maybe under ``not``); ``p`` is ``self.NAME`` whose every
assignment in the class is a number literal, a parameter of the method with a number default or a
``float``/``int`` annotation, or an attribute of a ``config`` parameter (transformers' configuration
numbers), and the class defines no ``NAME`` of its own (a property) -- or ``self.config.NAME`` where every
assignment of ``self.config`` in the class is the method's ``config`` parameter -- or ``p`` is such a parameter
of the function itself, never rebound.
"""

from __future__ import annotations

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.context import FileContext
from mend.rewriter.parts.layerdrop import guard
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND201",
        before="""
            import torch
            from torch import nn


            class Decoder(nn.Module):
                def __init__(self, layerdrop=0.0):
                    super().__init__()
                    self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
                    self.layerdrop = layerdrop

                def forward(self, x):
                    x = x * 2
                    for layer in self.layers:
                        if self.training:
                            dropout_probability = torch.rand([])
                            if dropout_probability < self.layerdrop:
                                continue
                        x = layer(x)
                    return x
        """,
        after="""
            import torch
            from torch import nn
            from _mend import drawn as _mend_drawn


            class Decoder(nn.Module):
                def __init__(self, layerdrop=0.0):
                    super().__init__()
                    self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
                    self.layerdrop = layerdrop

                def forward(self, x):
                    x = x * 2
                    for layer in self.layers:
                        if self.training:
                            dropout_probability = _mend_drawn(torch.rand([]))
                            if self.layerdrop > 0 and dropout_probability < self.layerdrop:
                                continue
                        x = layer(x)
                    return x
        """,
        run="compile(lambda x, m=Decoder().train(): m(x * 2).sum(-1))(torch.ones(2, 4))",
    ),
    Example(
        rule="MND201",
        before="""
            import torch
            from torch import nn


            class Encoder(nn.Module):
                def __init__(self, config):
                    super().__init__()
                    self.config = config
                    self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

                def forward(self, x, synced_gpus=False):
                    for layer in self.layers:
                        dropout_probability = torch.rand([])
                        skip_the_layer = True if self.training and (dropout_probability < self.config.layerdrop) else False
                        if not skip_the_layer or synced_gpus:
                            x = layer(x)
                    return x


            class Config:
                layerdrop = 0.0
        """,
        after="""
            import torch
            from torch import nn
            from _mend import drawn as _mend_drawn


            class Encoder(nn.Module):
                def __init__(self, config):
                    super().__init__()
                    self.config = config
                    self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

                def forward(self, x, synced_gpus=False):
                    for layer in self.layers:
                        dropout_probability = _mend_drawn(torch.rand([]))
                        skip_the_layer = True if self.training and self.config.layerdrop > 0 and (dropout_probability < self.config.layerdrop) else False
                        if not skip_the_layer or synced_gpus:
                            x = layer(x)
                    return x


            class Config:
                layerdrop = 0.0
        """,
        run="compile(lambda x, m=Encoder(Config()).train(): m(x * 2).sum(-1))(torch.ones(2, 4))",
    ),
    Example(
        rule="MND201",
        before="""
            import random

            import torch
            from torch import nn


            class Decoder(nn.Module):
                def __init__(self, layerdrop: float = 0.0):
                    super().__init__()
                    self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
                    self.layerdrop = layerdrop

                def forward(self, x):
                    for layer in self.layers:
                        dropout_probability = random.uniform(0, 1)
                        if self.training and (dropout_probability < self.layerdrop):
                            continue
                        x = layer(x)
                    return x
        """,
        after="""
            import random

            import torch
            from torch import nn


            class Decoder(nn.Module):
                def __init__(self, layerdrop: float = 0.0):
                    super().__init__()
                    self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
                    self.layerdrop = layerdrop

                def forward(self, x):
                    for layer in self.layers:
                        dropout_probability = random.uniform(0, 1)
                        if self.training and self.layerdrop > 0 and (dropout_probability < self.layerdrop):
                            continue
                        x = layer(x)
                    return x
        """,
        run="compile(lambda x, m=Decoder().train(): m(x * 2).sum(-1))(torch.ones(2, 4))",
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    return guard(ctx, diag)
