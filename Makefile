# The README's two commands.  Both create .venv on a fresh machine (with the test, viz and
# docs extras).
#   make test PYTHON=python3.12   uses its own venv, .venv-python3.12
PYTHON ?= python3
ifeq ($(PYTHON),python3)
VENV ?= .venv
else
VENV ?= .venv-$(notdir $(PYTHON))
endif
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LINT_STAMP := $(VENV)/.installed-lint

.PHONY: demo test test-subset docs bench floors wheel-check lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,viz,docs]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/market-sim demo

# Two worker processes (pytest-xdist): the suite is CPU-bound and its tests independent
# (each writes under its own tmp_path); the 15 slowest are listed at the end.
test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --durations=15

# The subset CI runs on the other supported interpreters (each in a fresh venv, newest Mesa):
#   PYENV_VERSION=3.13.0 make test-subset PYTHON=python3.13
SUBSET := tests/test_agents.py tests/test_interfaces.py tests/test_batch.py \
	tests/test_auditing.py tests/test_viz.py tests/test_cli.py tests/test_runner.py
test-subset: $(STAMP)
	$(BIN)/python -c "import mesa, sys; print('test-subset: Python', sys.version.split()[0], 'Mesa', mesa.__version__)"
	$(BIN)/python -m pytest $(SUBSET)

# The documentation site (mkdocs.yml, docs/) into site/; any warning is an error.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_offline.py --json benchmarks/offline.json
	$(BIN)/python benchmarks/bench_runner.py --json benchmarks/runner.json
	$(BIN)/python benchmarks/bench_payments.py
	$(BIN)/python benchmarks/bench_agents.py --json benchmarks/agents.json
	$(BIN)/python benchmarks/bench_egta.py
	$(BIN)/python benchmarks/bench_learners.py --json benchmarks/learners.json
	$(BIN)/python benchmarks/bench_equilibrium.py --json benchmarks/equilibrium.json
	$(BIN)/python benchmarks/bench_beliefs.py
	$(BIN)/python benchmarks/bench_dynamics.py --json benchmarks/dynamics.json
	$(BIN)/python benchmarks/bench_suite.py --json benchmarks/suite.json --plot benchmarks/scaling.png
	$(BIN)/python benchmarks/bench_audit.py --json benchmarks/audit.json
	$(BIN)/python benchmarks/bench_ledger.py --json benchmarks/ledger.json
	$(BIN)/python benchmarks/bench_compare.py --json benchmarks/compare.json
	$(BIN)/python benchmarks/bench_compare_equilibrium.py --json benchmarks/compare_equilibrium.json
	$(BIN)/python benchmarks/bench_execution.py --json benchmarks/execution.json
	$(BIN)/python benchmarks/bench_env.py
	$(BIN)/python benchmarks/bench_data_dependent.py

# The declared minimum versions (constraints/floors.txt) in a fresh venv + smoke tests.
# Default interpreter: python3.11, the oldest supported; PYTHON=... to change it.
floors:
	PYTHON=$(if $(filter python3,$(PYTHON)),python3.11,$(PYTHON)) bash constraints/check_floors.sh

# Build sdist + wheel, install the wheel alone in a fresh venv, run `market-sim demo`.
wheel-check:
	PYTHON=$(PYTHON) bash .ci/wheel_check.sh

$(LINT_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[test,docs,lint]"
	touch $(LINT_STAMP)

# All four run; fails if any does.  lint-imports: the import contract in pyproject.toml
# (one-way layers, no circles; docs/architecture.md).
lint: $(LINT_STAMP)
	@status=0; \
	echo "+ ruff check ."; $(BIN)/ruff check . || status=1; \
	echo "+ ruff format --check ."; $(BIN)/ruff format --check . || status=1; \
	echo "+ mypy market_sim scenarios analysis --ignore-missing-imports"; $(BIN)/mypy market_sim scenarios analysis --ignore-missing-imports || status=1; \
	echo "+ lint-imports"; $(BIN)/lint-imports || status=1; \
	exit $$status

clean:
	rm -rf $(VENV) .venv-* demo_output .pytest_cache dist site
