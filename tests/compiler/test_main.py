"""``python -m mend.compiler HARNESS``: compile a harness with mend and report against eager."""

from __future__ import annotations

import textwrap

from mend.compiler.__main__ import main

HARNESS = textwrap.dedent('''
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(16)
            self.fc = torch.nn.Linear(16, 16)

        def forward(self, x):
            {body}

    def harness():
        torch.manual_seed(0)
        return M(), (torch.randn(4, 16),), {{}}
''')


def _write(tmp_path, body):
    p = tmp_path / "h.py"
    p.write_text(HARNESS.format(body=body))
    return f"{p}:harness"


def test_reports_graphs_kernels_and_match(tmp_path, capsys):
    rc = main([_write(tmp_path, "return self.fc(self.ln(x)).relu()")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "1 graph(s)" in out and "0 eager graph(s)" in out and "max |mend - eager|" in out


def test_graph_break_exits_1_and_points_to_fix(tmp_path, capsys):
    rc = main([_write(tmp_path, "print('hi')\n        return self.fc(x)")])
    err = capsys.readouterr().err
    assert rc == 1 and "mend fix" in err
    rc = main([_write(tmp_path, "print('hi')\n        return self.fc(x)"), "--no-fullgraph"])
    assert rc == 0


def test_bad_harness_exits_2(tmp_path, capsys):
    assert main([str(tmp_path / "missing.py") + ":harness"]) == 2
    assert "error:" in capsys.readouterr().err
