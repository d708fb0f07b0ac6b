"""`mend check examples/` reports exactly the breaks and recompiles each example's docstring lists."""

from __future__ import annotations

from pathlib import Path

from mend.analyzers.static import Config, check_paths

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _line(name: str, needle: str) -> int:
    """The code line holding ``needle`` (the last match: the docstring mentions it first)."""
    hits = [i for i, text in enumerate((EXAMPLES / name).read_text().splitlines(), 1) if needle in text]
    assert hits, f"{needle!r} not in {name}"
    return hits[-1]


def test_examples_findings_match_their_docstrings():
    result = check_paths([EXAMPLES], Config(), use_cache=False)
    got = {(Path(d.path).name, d.line, d.code) for d in result.diagnostics}
    want = {
        # transformer_block: logger.debug -> GB0291; fp16 overflow guard -> GB0170
        ("transformer_block.py", _line("transformer_block.py", "logger.debug("), "MND102"),
        ("transformer_block.py", _line("transformer_block.py", "if torch.isinf(h).any()"), "MND201"),
        # validated_model: validation raise -> GB0170; print -> GB0059
        ("validated_model.py", _line("validated_model.py", "if (mask.sum(-1) == 0).any():"), "MND203"),
        ("validated_model.py", _line("validated_model.py", 'print("pooling"'), "MND101"),
        # step_counter: self.step += 1 recompiles every call
        ("step_counter.py", _line("step_counter.py", "self.step += 1"), "MND401"),
        # item_loss (compiled by run_all.py through harness()): .item() -> GB0124; boolean mask -> GB0036
        ("item_loss.py", _line("item_loss.py", "n = mask.sum().item()"), "MND301"),
        ("item_loss.py", _line("item_loss.py", "[mask].mean()"), "MND305"),
        # train_step: perf_counter twice -> GB0007, backward -> GB0123, print -> GB0059
        ("train_step.py", _line("train_step.py", "t0 = time.perf_counter()"), "MND104"),
        ("train_step.py", _line("train_step.py", "loss.backward()"), "MND501"),
        ("train_step.py", _line("train_step.py", 'print("step took"'), "MND101"),
        ("train_step.py", _line("train_step.py", 'print("step took"'), "MND104"),
    }
    assert got == want
