# Five targets for those who expect them; each creates the virtual environment it needs.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(abspath $(VENV)/bin)

.PHONY: demo test lint test-gpu dist

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
