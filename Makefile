# The README's two commands.  Both create .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/market-sim demo

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_offline.py --json benchmarks/offline.json
	$(BIN)/python benchmarks/bench_runner.py --json benchmarks/runner.json
	$(BIN)/python benchmarks/bench_suite.py --json benchmarks/suite.json --plot benchmarks/scaling.png

clean:
	rm -rf $(VENV) demo_output .pytest_cache
