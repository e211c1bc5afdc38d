# The two commands a new user runs: `make demo` and `make test`. Each creates .venv and
# installs what it needs when that is missing, and is quick when it is already there.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.xprof-installed
export PJRT_DEVICE ?= CPU

.PHONY: demo test lint typecheck pytest bench sample-runs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[xla,dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/xprof demo

lint: $(STAMP)
	$(BIN)/ruff check xprof tests benchmarks sample_runs

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

sample-runs: $(STAMP)
	$(BIN)/python sample_runs/make_sample_runs.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
