# Bootstraps .venv from the project's own pyproject; nothing is assumed installed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench setup clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

## Set up, then run the dependency audit on this environment with the embedded SQLite store.
demo: $(STAMP)
	$(BIN)/converge run examples/dependency_audit/job.yaml; status=$$?; \
	if [ $$status -ne 0 ] && [ $$status -ne 10 ]; then exit $$status; fi

## Set up, then run lint, type checks, the import contracts and the whole test suite.
test: $(STAMP)
	$(BIN)/ruff check engine criteria gates audit converge examples benchmarks tests
	$(BIN)/ruff format --check engine criteria gates audit converge examples benchmarks tests
	$(BIN)/mypy --strict engine criteria gates audit converge
	$(BIN)/lint-imports
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/pip install --quiet -e ".[dev,bench]"
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) converge.db converge.db-wal converge.db-shm
