import pytest


@pytest.fixture(autouse=True)
def _strict_compiler(monkeypatch):
    # a lowering bug must fail the test, not silently run the graph eagerly
    monkeypatch.setenv("MEND_STRICT", "1")
    # the IR verifier runs between the stages of every graph a test compiles (ir/verify.py)
    monkeypatch.setenv("MEND_COMPILER_VERIFY", "1")
    monkeypatch.delenv("MEND_DISABLE_KERNELS", raising=False)
    monkeypatch.delenv("MEND_COMPILER_DEBUG", raising=False)
