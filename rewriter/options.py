"""What ``mend fix`` may do: :class:`FixOptions` (no torch import)."""

from __future__ import annotations

from dataclasses import dataclass

SIDE_EFFECT_POLICIES = ("keep", "guard", "defer", "drop")
# Where repaired code imports mend's helper functions from (mend.rewriter.helper_module): "tree", a module
# ``_mend.py`` that ``mend fix`` writes into the repaired tree; "import", mend's own ``mend.rewriter.helpers``.
HELPER_MODES = ("tree", "import")


@dataclass
class FixOptions:
    """What ``mend fix`` may do. ``side_effects`` is the family-1 policy (``[tool.mend] side-effects``);
    ``helpers`` where the repaired code imports the helper functions it calls from (``[tool.mend] helpers``)."""

    unsafe: bool = False
    side_effects: str = "keep"
    torch_rng: bool = False
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    max_rounds: int = 4
    helpers: str = "tree"
    # the paths ``mend fix`` was given: the tree's helper module is written at the top of the package within
    # them (empty: at the top of the package)
    helpers_within: tuple[str, ...] = ()
    # the torch the repaired code runs on (``[tool.mend] target-torch``, else the installed torch's version, read
    # from its metadata; None: not known, every repair is written)
    target_torch: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.side_effects not in SIDE_EFFECT_POLICIES:
            raise ValueError(
                f"side-effects policy must be one of {', '.join(SIDE_EFFECT_POLICIES)}, "
                f"got {self.side_effects!r}"
            )
        if self.helpers not in HELPER_MODES:
            raise ValueError(f"helpers must be one of {', '.join(HELPER_MODES)}, got {self.helpers!r}")

    def torch_before(self, version: tuple[int, int]) -> str | None:
        """Why a repair that acts only on torch ``version`` and later is not written for this target (None:
        the target is that torch or later, or not known)."""
        if self.target_torch is None or self.target_torch >= version:
            return None
        have, need = ".".join(map(str, self.target_torch)), ".".join(map(str, version))
        return (f"the repair's helper acts on torch {need} and later, and the target is torch {have}, on which the "
                f"break would stay (`target-torch` in [tool.mend]; default: the installed torch)")

    def wants(self, code: str) -> bool:
        if self.select and not any(code.startswith(s) for s in self.select):
            return False
        return not any(code.startswith(s) for s in self.ignore)


__all__ = ["HELPER_MODES", "SIDE_EFFECT_POLICIES", "FixOptions"]
