# mend: `make demo` runs mend on the bundled examples, `make test` runs the test suite.
# Both set up .venv on a fresh machine: torch 2.13.0 (CPU wheel) first when no torch is present,
# then mend with its [dev] extra.

VENV ?= .venv
PY := $(VENV)/bin/python
MEND := $(VENV)/bin/mend
STAMP := $(VENV)/.mend-installed
TORCH_PIN ?= torch==2.13.0
PYTEST_ARGS ?=

.PHONY: setup demo test test-fast lint bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q $(TORCH_PIN)
	$(PY) -m pip uninstall -q -y mend 2>/dev/null || true  # the distribution was renamed torch-mend
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	MEND="$(MEND)" PY="$(PY)" bash examples/demo.sh

test: setup
	$(PY) -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -n 2 --dist loadgroup -m "not slow" $(PYTEST_ARGS)

# pyflakes, import order and syntax must be clean; functions over the complexity limit are listed, not failed
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff check --select C901 --exit-zero --statistics .

clean:
	rm -rf $(VENV) build *.egg-info .mend .pytest_cache
