# Two entry points for a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint smoke install install-test bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml constraints-test.txt | $(BIN)/python
	$(BIN)/pip install -q -c constraints-test.txt -e '.[test]'
	# The lakeFS SDK wrapper and lakefs-spec for the acceptance tests, kept apart: the wrapper ships a top-level
	# `lakectl` package that would shadow ours in site-packages.
	rm -rf $(VENV)/lakefs-wrapper
	$(BIN)/pip install -q --no-deps --target $(VENV)/lakefs-wrapper 'lakefs>=0.16' 'lakefs-spec>=0.15'
	rm -rf $(VENV)/lakefs-wrapper/lakectl $(VENV)/lakefs-wrapper/bin
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

demo: $(VENV)/.installed
	PATH=$(CURDIR)/$(BIN):$$PATH bash examples/demo.sh

lint: $(VENV)/.installed-test
	$(BIN)/ruff check lakectl server tests benchmarks migrations
	# every package, the Spark jobs and data source included; strict on lakectl.core (pyproject.toml)
	$(BIN)/mypy lakectl server
	$(BIN)/lint-imports

test: lint
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-java.sh
	bash scripts/ensure-chromium.sh
	bash scripts/ensure-shells.sh
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/pytest
	$(MAKE) smoke

# The install users run: a fresh virtualenv with `pip install .` and no extras runs the demo,
# a server, remote CLI verbs and the S3 gateway (a runtime dependency missing from
# pyproject.toml fails here).
smoke:
	PY=$(PY) bash scripts/smoke.sh

bench: $(VENV)/.installed-test
	$(BIN)/pip install -q -c constraints-test.txt -e '.[test,bench]'
	# wrk drives the server load benchmark (it falls back to Python load generators without it)
	command -v wrk >/dev/null || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && apt-get install -y -q wrk >/dev/null; } || true
	# git is a peer of bench_small_files and bench_big_file (and DVC needs it); run_all.sh then installs DVC and
	# Oxen (oxenai) into benchmarks/.peers-venv (benchmarks/_peers.py). A peer that cannot be installed is skipped.
	command -v git >/dev/null || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && apt-get install -y -q git >/dev/null; } \
		|| echo "git is not installed (apt-get install git): the benchmarks will skip git's and DVC's rows"
	PATH=$(CURDIR)/$(BIN):$$PATH bash benchmarks/run_all.sh

clean:
	rm -rf $(VENV) .venv-smoke .pytest_cache .mypy_cache .ruff_cache
