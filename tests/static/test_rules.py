"""Rule metadata, embedded VALID/INVALID examples, generated docs, SARIF validity, precision cases."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from mend.analyzers.static import Config, check_source
from mend.analyzers.static.docs import generated_files
from mend.analyzers.static.output import sarif
from mend.analyzers.static.rules import RULES

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _published_index() -> dict[str, str]:
    """Code -> name as published in the committed rule index (docs/rules/README.md)."""
    text = (REPO / "docs" / "rules" / "README.md").read_text(encoding="utf-8")
    return dict(re.findall(r"^\| \[(MND\d{3})\]\(MND\d{3}\.md\) \| ([^ |]+) \|", text, re.M))


def test_rule_codes_and_names_follow_the_contract():
    """Codes and names are a published contract: the committed index lists exactly the registered rules,
    names are unique, and every code the runtime mapping can produce is a registered rule."""
    from mend.analyzers.runtime.mapping import BREAK_CODES, RECOMPILE_CODES
    from mend.analyzers.static.rules import RUNTIME_RULES

    published = _published_index()
    assert len(published) >= 36
    assert {c: r.name for c, r in RULES.items()} == published
    every = {**RULES, **RUNTIME_RULES}
    assert len({r.name for r in every.values()}) == len(every)
    assert set(RUNTIME_RULES) == {"MND990", "MND991"}
    assert all(r.kind == "runtime" for r in RUNTIME_RULES.values())
    mapped = {c for codes in BREAK_CODES.values() for c in codes} | set(RECOMPILE_CODES.values())
    assert mapped <= set(RULES), mapped - set(RULES)
    for code, rule in every.items():
        assert re.fullmatch(r"MND\d{3}", code)
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name)
        assert rule.what and rule.why and rule.summary
        if rule.kind not in ("meta", "runtime"):
            assert rule.registry_ids and rule.invalid and rule.valid, code
            assert rule.use_instead, code


CASES = [(code, "invalid", i, ex) for code, r in sorted(RULES.items()) for i, ex in enumerate(r.invalid)] + [
    (code, "valid", i, ex) for code, r in sorted(RULES.items()) for i, ex in enumerate(r.valid)]


@pytest.mark.parametrize("code, kind, i, example", CASES, ids=[f"{c}-{k}{i}" for c, k, i, _ in CASES])
def test_embedded_examples(code, kind, i, example, tmp_path):
    codes = [d.code for d in check_source(example, str(tmp_path / "example.py"), Config())]
    if kind == "invalid":
        assert code in codes
    else:
        assert codes == []


def test_generated_rule_docs_are_current():
    folder = REPO / "docs" / "rules"
    want = generated_files()
    have = {p.name: p.read_text(encoding="utf-8") for p in folder.glob("*.md")}
    stale = sorted(n for n in want if have.get(n) != want[n])
    extra = sorted(set(have) - set(want))
    assert not stale and not extra, (
        f"docs/rules is out of date (stale: {stale}, extra: {extra}); run "
        "`mend rule --write-docs docs/rules`")


def test_sarif_output_validates_against_the_sarif_2_1_0_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((HERE / "sarif-schema-2.1.0.json").read_text())
    from mend.analyzers.static import check_paths

    result = check_paths([HERE / "fixtures"], Config(), use_cache=False)
    assert len({d.code for d in result.diagnostics}) >= 30
    doc = json.loads(sarif(result.diagnostics))
    jsonschema.Draft4Validator(schema).validate(doc)
    empty = json.loads(sarif([]))
    jsonschema.Draft4Validator(schema).validate(empty)


def check(src: str, select: str | None = None) -> list[tuple[int, str]]:
    cfg = Config().with_overrides(select=(select,) if select else None)
    return [(d.line, d.code) for d in check_source(textwrap.dedent(src), "m.py", cfg)]


PRECISION_NEGATIVES = {
    "static conditions": """
        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, x, mask=None, kv=None):
                if x is None or mask is None:
                    return x
                if self.training and x.dim() == 3 and x.shape[0] > 1 and len(x) > 2:
                    x = x * 2
                if x.dtype == torch.float16 or x.is_floating_point() or isinstance(x, tuple):
                    x = x.float()
                if torch.jit.is_scripting() or not torch.is_grad_enabled():
                    x = x + 1
                if kv is not None and x.size(-1) == 4 and x.numel() > 0 and x.device.type == "cpu":
                    x = x + 2
                return x
    """,
    "dead branches under compile": """
        import logging
        import torch
        from torch import nn
        logger = logging.getLogger(__name__)

        class M(nn.Module):
            def forward(self, x):
                if not torch.compiler.is_compiling():
                    print("eager", x.sum().item())
                if torch._dynamo.is_compiling():
                    y = x
                else:
                    logger.info("eager only")
                if torch.compiler.is_dynamo_compiling():
                    return x + 1
                print("unreachable under compile")
                return x
    """,
    "untraced code": """
        import time
        import torch

        def train(model, batches):
            t0 = time.time()
            for b in batches:
                loss = model(b)
                print(loss.item())
            return time.time() - t0

        class NotAModule:
            def forward(self, x):
                print(x)
    """,
    "shadowed and non-torch names": """
        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, x, print=None, time=None):
                print(x)
                time.time()
                random = object()
                random.random()
                return x
    """,
    "disabled functions are not traced": """
        import torch
        from torch import nn

        @torch.compiler.disable
        def debug_dump(x):
            print(x.sum().item())

        class M(nn.Module):
            def forward(self, x):
                return x.relu()
    """,
}


@pytest.mark.parametrize("name", list(PRECISION_NEGATIVES))
def test_precision_negatives(name):
    assert check(PRECISION_NEGATIVES[name]) == []


def test_name_resolution_through_aliases():
    src = """
        import logging as lg
        import torch as t
        from torch import nn as tnn
        import time as clock
        from copy import deepcopy as dc
        from random import random as rnd
        from warnings import warn

        log = lg.getLogger("x")

        class M(tnn.Module):
            def forward(self, x):
                log.warning("a")
                clock.monotonic()
                y = dc(x)
                r = rnd()
                warn("w")
                import pdb
                pdb.set_trace()
                return t.nonzero(x)
    """
    assert check(src) == [(14, "MND102"), (15, "MND104"), (16, "MND108"), (17, "MND105"), (18, "MND103"),
                          (20, "MND106"), (21, "MND304")]


def test_submodule_calls_and_bases_across_files(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text(textwrap.dedent("""
        from torch import nn

        class Base(nn.Module):
            def helper(self, x):
                print("helper")
                return x
    """))
    (pkg / "blocks.py").write_text(textwrap.dedent("""
        from .base import Base

        class Attention(Base):
            def forward(self, x):
                if x.sum() > 0:
                    x = x * 2
                return self.helper(x)
    """))
    (pkg / "model.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn
        from pkg.blocks import Attention

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([Attention() for _ in range(2)])

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x
    """))
    from mend.analyzers.static import check_paths

    cfg = Config().with_overrides(regions="compiled-only")
    (tmp_path / "main.py").write_text("import torch\nfrom pkg.model import Model\nm = torch.compile(Model())\n")
    res = check_paths([tmp_path], cfg, use_cache=False)
    got = sorted((Path(d.path).name, d.line, d.code) for d in res.diagnostics)
    assert got == [("base.py", 6, "MND101"), ("blocks.py", 6, "MND201"), ("model.py", 12, "MND506")]
    # compiled-only without the compile call: nothing is traced
    (tmp_path / "main.py").write_text("import torch\nfrom pkg.model import Model\nm = Model()\n")
    assert check_paths([tmp_path], cfg, use_cache=False).diagnostics == []
    # pre-commit style: only the changed file is given; its bases are loaded from disk
    res = check_paths([pkg / "blocks.py"], Config(), use_cache=False)
    assert [(d.line, d.code) for d in res.diagnostics] == [(6, "MND201")]


def test_project_index_api(tmp_path):
    from mend.analyzers.static import build_project_for

    (tmp_path / "m.py").write_text(textwrap.dedent("""
        import torch

        def helper(x):
            return x + 1

        @torch.compile(fullgraph=False)
        def step(x):
            return helper(x)

        def untouched(x):
            return x

        g = torch.compile(untouched)
    """))
    project = build_project_for([tmp_path], Config(), use_cache=False)
    path = str(tmp_path / "m.py")
    traced = {t.qualname: t.reason for t in project.traced_functions(path)}
    assert traced == {"step": "compiled", "helper": "called from step", "untouched": "compiled"}
    assert project.function_at(path, 5).qualname == "helper"
    kinds = [(c.line, c.kind) for c in project.compile_boundaries(path)]
    assert kinds == [(7, "decorator"), (14, "call")]


def _diags(src: str) -> list:
    return check_source(textwrap.dedent(src), "m.py", Config())


LAYERDROP = """
    import torch
    from torch import nn

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
            self.layerdrop = 0.1

        def forward(self, x):
            for layer in self.layers:
                if self.training:
                    p = torch.rand([])
                    if p < self.layerdrop:
                        continue
                x = layer(x)
            return x
"""


def test_training_only_break_is_reported_on_its_line_not_on_the_loop():
    found = _diags(LAYERDROP)
    assert [(d.line, d.code) for d in found] == [(15, "MND201")]
    d = found[0]
    assert d.data["mode"] == "self.training" and d.data["frame_skip"] == "MND506"
    assert "only when `self.training`" in d.message and "skip the whole frame" in d.message


def test_training_only_break_in_a_helper_called_from_a_loop_makes_no_frame_skip():
    src = """
        import torch
        from torch import nn

        class Block(nn.Module):
            def maybe_drop(self, x):
                if self.training:
                    if torch.rand([]) < 0.1:
                        return x * 0
                return x

            def forward(self, x):
                for _ in range(2):
                    x = self.maybe_drop(x)
                return x
    """
    assert [(d.line, d.code) for d in _diags(src)] == [(8, "MND201")]


@pytest.mark.parametrize("prefix", ["h.dtype == torch.float16", "h.is_floating_point()"])
def test_tensor_condition_behind_a_dtype_test_is_reported_with_the_dtype(prefix):
    src = f"""
        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, h):
                if {prefix} and not torch.isfinite(h).all():
                    h = h.clamp(-1.0, 1.0)
                return h
    """
    found = _diags(src)
    assert [(d.line, d.code) for d in found] == [(7, "MND201")]
    assert found[0].data["mode"] == prefix and f"(only when `{prefix}`)" in found[0].message


def test_tensor_condition_behind_a_grad_mode_test_is_not_reported():
    src = """
        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, h):
                if torch.is_grad_enabled() and not torch.isfinite(h).all():
                    h = h.clamp(-1.0, 1.0)
                return h
    """
    assert check(src) == []


@pytest.mark.parametrize("test", [
    "if self.training and not torch.isfinite(h).all():",
    "if (True if self.training and (torch.rand([]) < self.p) else False):",
])
def test_tensor_condition_behind_self_training_is_reported_for_training(test):
    """``self.training and <tensor test>`` (in an ``if`` or a conditional expression: M2M100's LayerDrop)
    breaks in training: reported for that mode, as the same test inside ``if self.training:``."""
    src = f"""
        import torch
        from torch import nn

        class M(nn.Module):
            p = 0.1

            def forward(self, h):
                {test}
                    h = h.clamp(-1.0, 1.0)
                return h
    """
    found = [d for d in _diags(src) if d.code == "MND201"]
    assert [d.line for d in found] == [9]
    assert found[0].data["mode"] == "self.training" and "(only when `self.training`)" in found[0].message
    if "True if" in test:
        assert found[0].col == 21 and found[0].message.startswith("conditional expression on a tensor value")


def test_tensor_condition_before_a_mode_test_is_reported():
    src = """
        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, h):
                if not torch.isfinite(h).all() and h.dtype == torch.float16:
                    h = h.clamp(-1.0, 1.0)
                return h
    """
    assert check(src) == [(7, "MND201")]


def test_item_on_a_method_chain_of_a_compared_maybe_tensor():
    src = """
        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, x, attention_mask=None, mode=None):
                is_global = attention_mask > 0
                flag = is_global.flatten().any().item()
                if mode == "fast":
                    x = x * 2
                named = mode == "x"
                if flag:
                    x = x + 1
                return x
    """
    assert check(src) == [(8, "MND301")]


def test_module_constructed_through_submodule_method_helpers():
    src = """
        import torch
        from torch import nn

        class Full(nn.Module):
            def __init__(self):
                super().__init__()
                self.q = nn.Linear(4, 4)

        class Attn(nn.Module):
            def switch(self):
                self.inner = Full()

        class Enc(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([Attn()])

            def switch(self):
                for i, layer in enumerate(self.layers):
                    layer.switch()

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = Enc()

            def forward(self, x):
                self.enc.switch()
                return x
    """
    assert check(src) == [(7, "MND511"), (8, "MND502"), (20, "MND506")]


def test_module_class_constructed_in_init_is_not_traced():
    src = """
        import torch
        from torch import nn

        class Full(nn.Module):
            def __init__(self):
                super().__init__()
                self.q = nn.Linear(4, 4)

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.full = Full()

            def forward(self, x):
                return self.full.q(x)
    """
    assert check(src) == []


def test_layerdrop_guard_with_and_is_a_training_mode_guard():
    src = LAYERDROP.replace("if self.training:", "if self.training and self.layerdrop > 0.0:")
    found = _diags(src)
    assert [(d.line, d.code) for d in found] == [(15, "MND201")]
    assert found[0].data["mode"] == "self.training"


def test_m2m100_layerdrop_is_reported_for_training_and_its_repair_is_not():
    """M2M100's LayerDrop (transformers 4.52.4): a conditional expression on ``self.training and (u < p)``
    breaks in training (GB0170, a frame skip in the loop); the repaired ``self.training and p > 0 and
    (u < p)`` runs the tensor test only with LayerDrop configured: not reported."""
    src = LAYERDROP.replace("""                if self.training:
                    p = torch.rand([])
                    if p < self.layerdrop:
                        continue""", """                p = torch.rand([])
                skip = True if self.training and (p < self.layerdrop) else False
                if skip:
                    continue""")
    found = _diags(src)
    assert [(d.line, d.code) for d in found] == [(14, "MND201")]
    assert found[0].data["mode"] == "self.training" and found[0].data["frame_skip"] == "MND506"
    assert "(only when `self.training`)" in found[0].message and "skip the whole frame" in found[0].message
    assert _diags(src.replace("self.training and (p", "self.training and self.layerdrop > 0 and (p")) == []


@pytest.mark.parametrize("draw", ["random.uniform(0, 1)", "random.randint(0, 9)", "u"])
def test_a_branch_on_a_python_draw_dynamo_traces_is_reported(draw):
    """``random.uniform``/``randint``/``randrange`` are traced: the draw is a graph input, and a branch on
    it breaks the graph (GB0170), for training when behind ``self.training``."""
    src = f"""
        import random
        import torch
        from torch import nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
                self.layerdrop = 0.1

            def forward(self, x):
                for layer in self.layers:
                    u = random.uniform(0, 1)
                    skip = self.training and {draw} < self.layerdrop
                    if not skip:
                        x = layer(x)
                    if {draw} < 0.5:
                        x = x * 2
                return x
    """
    found = [d for d in _diags(src) if d.code == "MND201"]
    assert [d.line for d in found] == [16, 18]
    drawn = "random.uniform" if draw == "u" else draw.split("(")[0]
    assert all(f"on a number drawn by `{drawn}()`" in d.message for d in found)
    assert found[0].data["mode"] == "self.training" and "mode" not in found[1].data
    assert [d.code for d in _diags(src) if d.line in (14, 15)] == []  # Dynamo traces the draws themselves


def test_musicgen_layerdrop_on_a_python_draw_and_its_repair():
    """MusicGen: ``u = random.uniform(0, 1)`` then ``if self.training and (u < p):`` breaks in training
    (GB0170 on the traced draw); the repaired ``self.training and p > 0 and (u < p)`` is not reported."""
    src = LAYERDROP.replace("""                if self.training:
                    p = torch.rand([])
                    if p < self.layerdrop:
                        continue""", """                p = random.uniform(0, 1)
                if self.training and (p < self.layerdrop):
                    continue""").replace("import torch", "import random\n    import torch")
    found = _diags(src)
    assert [(d.line, d.code) for d in found] == [(15, "MND201")]
    assert found[0].data["mode"] == "self.training" and "drawn by `random.uniform()`" in found[0].message
    assert _diags(src.replace("self.training and (p", "self.training and self.layerdrop > 0 and (p")) == []


def test_python_random_behind_self_training_is_reported_for_training():
    """``self.training and random.random() < p``: the call runs (and breaks, GB0007) only in training."""
    src = LAYERDROP.replace("""                if self.training:
                    p = torch.rand([])
                    if p < self.layerdrop:
                        continue""", """                if self.training and random.random() < self.layerdrop:
                    continue""").replace("import torch", "import random\n    import torch")
    found = _diags(src)
    assert [(d.line, d.code) for d in found] == [(14, "MND105")]
    assert found[0].data["mode"] == "self.training" and "(only when `self.training`)" in found[0].message
    assert [(d.line, d.code) for d in _diags(src.replace("self.training and random", "random"))] == [
        (13, "MND506"), (14, "MND105")]


def test_repaired_layerdrop_test_runs_only_when_layerdrop_is_configured():
    """``if self.layerdrop > 0 and p < self.layerdrop:`` (mend fix's LayerDrop guard, ``p`` a ``torch.rand``
    draw): the tensor test runs only with LayerDrop configured, a mode like ``self.training``: not reported.
    The same guard before a comparison of another tensor is no such mode."""
    src = LAYERDROP.replace("if p < self.layerdrop:", "if self.layerdrop > 0 and p < self.layerdrop:")
    assert _diags(src) == []
    other = src.replace("p = torch.rand([])", "p = x.mean()")
    assert [(d.line, d.code) for d in _diags(other)] == [(15, "MND201")]


def test_item_on_a_helper_result_of_a_maybe_tensor():
    src = """
        import torch
        from torch import nn

        def prepare(mask, dtype):
            return mask.to(dtype)

        class M(nn.Module):
            def forward(self, x, attention_mask=None):
                if attention_mask is not None:
                    attention_mask = prepare(attention_mask, x.dtype)[:, 0]
                flag = (attention_mask > 0).any().item()
                n = len(x)
                k = max(n, 2)
                if prepare(k, None):
                    x = x * 2
                return x
    """
    assert check(src) == [(12, "MND301")]


def test_torch_compiler_compile_is_a_compile_root():
    """`torch.compiler.compile` is `torch.compile` (one spelling table, torch_facts.COMPILE_NAMES)."""
    src = """
        import torch

        @torch.compiler.compile
        def f(x):
            print(x)
            return x + 1

        def g(x):
            print(x)
            return x

        h = torch.compiler.compile(g)
    """
    assert check(src) == [(6, "MND101"), (10, "MND101")]


def test_a_copy_of_a_tensor_is_a_tensor():
    """`copy.deepcopy(t)` / `copy.copy(t)` have t's kind: a branch on the copy is a tensor branch (before
    this, the copy was only maybe a tensor, and repairing the deepcopy made a new finding appear)."""
    src = """
        import copy

        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, y: torch.Tensor):
                k = copy.deepcopy(y)
                z = copy.copy(y) * 2
                if k.sum() > 0 and z.mean() < 1:
                    y = y * 2
                return y
    """
    # both copies break the graph (copy.copy of a tensor too: a skipped function, measured on torch 2.13)
    assert [(d.line, d.code) for d in _diags(src)] == [(9, "MND108"), (10, "MND108"), (11, "MND201")]


def test_scoped_capture_of_mend_fix_is_understood():
    """Inside `_mend_captured(lambda: E)` (added by `mend fix`) Dynamo captures numbers and data-dependent
    shapes: those findings go, the others stay, and a site outside the lambda is still reported."""
    src = """
        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, x, mask):
                n = _mend_captured(lambda: mask.sum().item())
                idx = _mend_captured(lambda: torch.nonzero(mask))
                sizes = _mend_captured(lambda: mask.sum(-1).tolist())
                head = _mend_captured(lambda: x[: mask.sum()])
                pad = _mend_captured(lambda: torch.zeros(mask.sum()))
                _mend_captured(lambda: print(x))
                return x[:n], idx, sizes, head, pad, mask.sum().item()
    """
    assert check(src) == [(12, "MND101"), (13, "MND301")]
