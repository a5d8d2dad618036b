# Six targets for those who expect them; each creates the virtual environment it needs.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(abspath $(VENV)/bin)

.PHONY: demo test lint test-gpu dist bench release

$(VENV)/.installed: setup.cfg pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[agent,test,dev]'
	touch $@

demo: $(VENV)/.installed
	PATH="$(BIN):$$PATH" bash scripts/demo.sh

test: $(VENV)/.installed
	$(PY) -m pytest -q

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check kubectl_gpu tests benchmarks scripts
	$(VENV)/bin/ruff format --check kubectl_gpu tests benchmarks scripts
	$(VENV)/bin/mypy kubectl_gpu
	$(VENV)/bin/lint-imports

test-gpu: $(VENV)/.installed
	$(PY) -m pytest -q -m gpu

dist: $(VENV)/.installed
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w dist .

# The krew archive (dist/kubectl-gpu_vX.Y.Z.tar.gz, same bytes every run) and plugin.yaml's
# version/uri/sha256. Fetches the vendored pure-Python dependencies from PyPI: needs the network.
release: $(VENV)/.installed
	$(PY) scripts/release.py --vendor pypi --dist dist --manifest plugin.yaml

# Benchmarks against DESIGN.md's budgets (minutes; never part of `test`). QUICK=1: 500 nodes.
bench: $(VENV)/.installed
	$(PY) -m benchmarks.run_all $(if $(QUICK),--quick)
