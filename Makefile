# Two commands on a fresh machine:  `make demo`  and  `make test`.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
CLINIEVAL_TEST_POSTGRES_URL ?= postgresql://postgres@127.0.0.1:5432/test
export CLINIEVAL_TEST_POSTGRES_URL

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[test]"
	touch $@

demo: $(STAMP)  ## set up, build the demo snapshot, audit it, print where the report is
	$(BIN)/clinieval demo

test: $(STAMP)  ## set up and run the whole test suite (PostgreSQL too when reachable)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_import.py

clean:
	rm -rf $(VENV) demo-out clinieval.db*
