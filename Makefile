# Two commands set everything up on a fresh machine:  `make verify`  and  `make test`.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.specsample-installed
HAS_CUDA := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1 || echo 0)
# Without a GPU every Triton kernel runs under the interpreter.
ifeq ($(HAS_CUDA),0)
export TRITON_INTERPRET := 1
endif
export PYTHONHASHSEED := 0

.PHONY: setup test verify bench lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	@if [ "$(HAS_CUDA)" = "0" ]; then \
	  echo "no CUDA device: installing the CPU build torch==2.13.0"; \
	  $(VPY) -m pip install -q torch==2.13.0; \
	fi
	$(VPY) -m pip install -q -e '.[test,report,dev]'
	touch $(STAMP)

test: setup
	$(VPY) -m pytest -q tests

verify: setup
	$(VPY) -m specsample.verify.cli verify --device auto --report verify-report

bench: setup
	$(VPY) -m pytest -q benchmarks --benchmark-only
	$(VPY) benchmarks/compare.py .benchmarks/records.json --baseline-dir benchmarks/baselines

lint: setup
	$(VENV)/bin/ruff check specsample tests benchmarks
	$(VENV)/bin/ruff format --check specsample tests benchmarks

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .benchmarks verify-report
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
