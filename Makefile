# One command per job. `make demo` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.locus-installed
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: install dev demo test lint format typecheck unit slow bench clean

# pip byte-compiles every installed file, one at a time (~60 of the install's ~110 s); instead,
# nothing of the venv is compiled for the main job: `make demo` runs with bytecode writing on, so
# its one process compiles and keeps what it imports (~2,200 modules), a first run 241 -> 222 s
# against compiling all 10,100 files first (15.5 s on 2 cores). locus's own sources (installed
# editable) are compiled at once (0.4 s): a cold `locus route` 0.68 -> 0.52 s where
# PYTHONDONTWRITEBYTECODE is set. The checks compile the rest on every core, skipping what locus
# never imports (test suites, torch's compiler stack, sympy, transformers' other architectures):
# without .pyc files, every test process would recompile its imports where
# PYTHONDONTWRITEBYTECODE is set.
NEVER_IMPORTED := /(tests?|testing|_inductor|_dynamo|sympy|transformers/models/(?!bert/|auto/))
# locus with every feature (`.[all]`): what the main job needs
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile \
		-c constraints.txt -e '.[all]'
	$(BIN)/python -m compileall -q -j 0 src > /dev/null || true
	touch $(STAMP)

install: $(STAMP)

# the checks' tools (the `dev` extra: pytest, ruff, mypy, Playwright, ...) come with the checks:
# the main job does not wait for them (a fresh `.[all]` installs in 32 s, `.[all,dev]` in 47 s)
DEV_STAMP := $(VENV)/.locus-dev-installed
$(DEV_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile \
		-c constraints.txt -e '.[all,dev]'
	$(BIN)/python -m compileall -q -j 0 -x '$(NEVER_IMPORTED)' $(VENV)/lib src > /dev/null || true
	touch $(DEV_STAMP)

dev: $(DEV_STAMP)

# Ray (the `ray` extra, ~80 MB) is for `--ray` and its tests: the test run installs it, the
# main job does not wait for it
RAY_STAMP := $(VENV)/.locus-ray-installed
$(RAY_STAMP): $(DEV_STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile \
		-c constraints.txt -e '.[all,dev,ray]'
	$(BIN)/python -m compileall -q -j 0 -x '$(NEVER_IMPORTED)' $(VENV)/lib/python*/site-packages/ray > /dev/null || true
	touch $(RAY_STAMP)

## the main job: import the real MMLU-Pro results, encode the queries, show the pool
demo: install
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/locus demo

## every check: lint, format, types, tests (slow ones excluded)
test: dev lint typecheck unit

lint: dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

format: dev
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

typecheck: dev
	$(BIN)/mypy

# the library's coverage by the suite, least covered modules first (pyproject.toml's
# [tool.coverage]): about a sixth more CPU time; `make unit COVERAGE_OPTIONS=` runs without it
COVERAGE_OPTIONS ?= --cov=locus --cov-report=term:skip-covered
unit: dev $(RAY_STAMP)
	$(BIN)/python -m pytest -q $(COVERAGE_OPTIONS)

slow: dev $(RAY_STAMP)
	$(BIN)/python -m pytest -q -m slow

bench: install
	$(BIN)/python benchmarks/bench_import.py
	$(BIN)/python benchmarks/bench_encode.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
