# The two commands a fresh machine needs: `make demo` and `make test`.
# Each creates .venv (pinned dependencies) when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_CPU := XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu
# Test processes (pytest-xdist). XLA compiles on one thread, so two workers keep two cores
# busy; --dist loadfile keeps a module's tests (and its module-scoped fixtures) together.
TEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadfile

.PHONY: demo demo-ablation test test-all bench lint venv editor clean services

# setuptools says "Editable installation. Please be careful with folders in your working directory
# with the same name as your package" for every editable install (information, not a fault:
# here afm/ is the package); the filter hides that notice only.
EDITABLE_QUIET := PYTHONWARNINGS="ignore:Editable installation"

$(STAMP): pyproject.toml setup.py afm/areas.py constraints.txt filters/extraction/_blockwalk.c filters/extraction/_treewalk.c
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip==26.3" "setuptools==84.2.1" wheel
	$(EDITABLE_QUIET) $(BIN)/python -m pip install -q -c constraints.txt -e ".[all]"
	@touch $(STAMP)

# Extras the slow tier (HF parity: torch, transformers) and the benchmarks (datatrove) need.
$(VENV)/.installed-%: $(STAMP)
	$(EDITABLE_QUIET) $(BIN)/python -m pip install -q -c constraints.txt -e ".[$*]"
	@touch $@

venv: $(STAMP)

# For editors and type checkers: setuptools' strict editable mode lays out a tree of links
# (build/__editable__.afm-*) that mirrors the import names (afm.filters -> filters/), which
# static tools follow; the default mode's import hook is invisible to them. Rerun after
# adding a module (docs/architecture.md).
editor: $(STAMP)
	$(EDITABLE_QUIET) $(BIN)/python -m pip install -q --no-deps --no-build-isolation -e . --config-settings editable_mode=strict

demo: $(STAMP)
	$(BIN)/afm demo --workdir work/demo

# The second demo: one ablation, the quality model off vs on, on the demo site's crawl
# (docs/ablation.md; about a minute on a CPU, mechanics rather than evidence).
demo-ablation: $(STAMP)
	$(BIN)/afm ablate --demo --workdir work/ablate-demo

# .ci/services: redis-server and unshare, installed when missing (as root with apt-get), else named
# with the tests that skip without them; the tests start their own services from them.
services:
	@bash .ci/services

test: $(STAMP) services
	$(PYTEST_CPU) $(BIN)/python -m pytest $(PYTEST_PARALLEL) -m "not slow" tests

# BFCL's package is the slow tier's reference checker; its pins clash with afm's, so it comes
# without its dependencies (afm reads its data files; the test imports only its checker).
$(VENV)/.installed-bfcl: $(STAMP)
	$(BIN)/python -m pip install -q -c constraints.txt --no-deps bfcl-eval
	@touch $@

test-all: $(STAMP) services $(VENV)/.installed-hf $(VENV)/.installed-reference $(VENV)/.installed-bfcl
	$(PYTEST_CPU) $(BIN)/python -m pytest $(PYTEST_PARALLEL) tests

bench: $(STAMP) $(VENV)/.installed-bench $(VENV)/.installed-hf
	$(BIN)/afm bench --workdir work/bench

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf work build *.egg-info
