"""The grouped-experts repair (JetMoE/GraniteMoE ``expert_size.tolist()`` + ``split``): what it declines,
and that the repaired experts module still takes a list of counts under compile."""

from __future__ import annotations

import pytest

from mend.rewriter import FixOptions, fix_source
from tests.rewriter.conftest import FIXTURES, diag

SOURCE = (FIXTURES / "grouped_experts.in.py").read_text()
TOLIST = "expert_size = expert_size.tolist()"


def _fix(src: str, unsafe: bool = True):
    lines = src.splitlines()
    line = next(i for i, text in enumerate(lines, 1) if TOLIST in text)
    col = lines[line - 1].index("expert_size.tolist()") + 1
    return fix_source(src, "t.py", [diag("MND303", line, col)], FixOptions(unsafe=unsafe))


def test_repair_needs_unsafe_opt_in() -> None:
    res = _fix(SOURCE, unsafe=False)
    assert res.fixed == SOURCE
    assert res.remaining[0].unsafe_available
    assert "grouped MoE experts" in res.remaining[0].reason


@pytest.mark.parametrize(("change", "reason"), [
    # the counts reach code the repair does not rewrite
    (("        hidden_states = self.input_linear(layer_input[batch_index], expert_size)\n",
      "        hidden_states = self.input_linear(layer_input[batch_index], expert_size)\n"
      "        hidden_states = hidden_states * len(expert_size)\n"), "the counts reach `len(expert_size)`"),
    (("        index_sorted_experts, batch_index, batch_gates, expert_size = topo_info\n",
      "        index_sorted_experts, batch_index, batch_gates, expert_size = topo_info\n"
      "        print(expert_size)\n"), "the counts reach `print(expert_size)`"),
    # no experts module of the split/loop/cat shape: the scoped capture declines too, since the list is
    # returned to the caller (which may branch on it)
    (("            output_list.append(F.linear(input_list[i], self.weight[i]))\n",
      "            output_list.append(F.linear(input_list[i], self.weight[i]).cumsum(0))\n"), "returned"),
    (("        input_list = inputs.split(expert_size, dim=0)\n", "        input_list = inputs.split(expert_size, dim=1)\n"), "returned"),
    # the router's list is used after the `.tolist()` other than in the returned tuple
    (("        return index_sorted_experts, batch_index, batch_gates, expert_size, logits\n",
      "        logits = logits * len(expert_size)\n"
      "        return index_sorted_experts, batch_index, batch_gates, expert_size, logits\n"), "returned"),
])
def test_declines(change: tuple[str, str], reason: str) -> None:
    old, new = change
    assert old in SOURCE
    src = SOURCE.replace(old, new)
    res = _fix(src)
    assert res.fixed == src
    assert res.applied == []
    assert reason in res.remaining[0].reason, res.remaining[0].reason




def test_repaired_experts_take_a_list_under_compile() -> None:
    """Callers elsewhere may still pass a list of counts: under compile the static form takes it too
    (`torch.as_tensor`), in one graph, with the output of the original experts."""
    torch = pytest.importorskip("torch")
    ns_in: dict = {"__name__": "grouped_in"}
    ns_out: dict = {"__name__": "grouped_out"}
    exec(compile(SOURCE.replace("@torch.compile\n", ""), "in.py", "exec"), ns_in)
    exec(compile((FIXTURES / "grouped_experts.out.py").read_text().replace("@torch.compile\n", ""), "out.py", "exec"),
         ns_out)
    torch.manual_seed(0)
    before = ns_in["ParallelExperts"](4, 8, 6)
    after = ns_out["ParallelExperts"](4, 8, 6)
    after.load_state_dict(before.state_dict())
    x, sizes = torch.randn(9, 8), [3, 0, 4, 2]
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(after, backend=backend)(x, sizes)
    assert len(graphs) == 1
    torch.testing.assert_close(compiled, before(x, sizes), rtol=1.3e-6, atol=1e-5)
    assert torch.equal(after(x, sizes), before(x, sizes))  # eager runs the original statements


def test_eager_is_bitwise_unchanged() -> None:
    torch = pytest.importorskip("torch")
    outs = []
    for kind in ("in", "out"):
        ns: dict = {"__name__": f"grouped_{kind}"}
        src = (FIXTURES / f"grouped_experts.{kind}.py").read_text().replace("@torch.compile\n", "")
        exec(compile(src, f"{kind}.py", "exec"), ns)
        outs.append(ns["f"](torch.linspace(-2, 2, 56).reshape(7, 8)))
    assert torch.equal(outs[0], outs[1])


def test_from_run_repairs_the_recorded_tolist(tmp_path) -> None:
    """A `.tolist()` break recorded by `mend run` (Data dependent operator, GB0033) gets the same repair
    (here with the counts computed by a helper function)."""
    from typer.testing import CliRunner

    from mend.analyzers.runtime import data as rdata
    from mend.cli.app import app

    src = SOURCE.replace("expert_size = gates.long().sum(0)", "expert_size = counts(gates)")
    src = src.replace("class TopKGating(nn.Module):", "def counts(gates):\n    return gates.long().sum(0)\n\n\n"
                      "class TopKGating(nn.Module):")
    mod = tmp_path / "mod.py"
    mod.write_text(src)
    line = next(i for i, text in enumerate(src.splitlines(), 1) if TOLIST in text)
    run = rdata.RunData(root=str(tmp_path), breaks=[rdata.BreakSite(
        path="mod.py", line=line, function="forward", gb_type="Data dependent operator", registry_id="GB0033",
        message="The operator 'aten._local_scalar_dense.default' has a non-Tensor output", source_line=TOLIST)])
    data_file = tmp_path / ".mend" / "run.json"
    data_file.parent.mkdir()
    rdata.save(run, data_file)
    result = CliRunner().invoke(app, ["fix", "--isolated", "--unsafe-fixes", "--from-run", str(data_file),
                                      str(mod)])
    assert "MND303 fixed" in result.output, result.output
    fixed = mod.read_text()
    assert "if not torch.compiler.is_compiling():\n            expert_size = expert_size.tolist()" in fixed
    assert "torch.stack(output_list, 0)[_mend_group" in fixed
