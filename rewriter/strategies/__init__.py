"""The repair strategies of ``mend fix``: one strategy per module (no torch import).

Each module holds one way to repair a finding: its documentation (what it writes, when it is safe, when
it declines), its before/after ``EXAMPLES`` (run as tests against Dynamo) and ``repair(ctx, diagnostic)``,
which answers a :class:`~mend.rewriter.plan.Plan`, a :class:`~mend.rewriter.plan.Decline` or None (see
:mod:`mend.rewriter.plan`). A rule lists the strategies it tries, by module name, on its entry
(``FixInfo(strategies=...)``); :mod:`mend.rewriter.registry` imports them. What several strategies share
lives in :mod:`mend.rewriter.parts`. See ``docs/adding-a-rule.md``.
"""
