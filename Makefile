# The two commands: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test venv lint typecheck gen clean system-deps bench bench-deps docs-check

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# setup.py builds the compiled record walker (a C compiler and Python's headers are needed);
# a change to its source installs again, which rebuilds it.
$(STAMP): pyproject.toml setup.py src/logbus/records/_validate.c | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,spark]'
	touch $(STAMP)

venv: $(STAMP)

## Start one broker on localhost:9092 with data in ./data (no ZooKeeper, no Java).
run: $(STAMP)
	$(BIN)/logbus server start

## Install what the tests need (kcat, ZooKeeper and Chromium from apt when missing and we are
## root) and run every test, in TEST_WORKERS parallel workers (tests mostly wait on timers
## and sockets, so more workers than cores pays; `make test TEST_WORKERS=0` runs them in
## this one process). Two workers run the ZooKeeper cluster tests' lanes and one the Spark
## session's lane (tests/scheduling.py). Six workers were tried: on 2 cores their contention
## made timing-sensitive tests (paused servers, sessions, PySpark's start-up) fail.
## logbus's own modules are compiled once up front and their bytecode kept even where the
## environment says PYTHONDONTWRITEBYTECODE: the suite starts hundreds of broker and CLI
## processes, and each would otherwise compile every module it imports again.
TEST_WORKERS ?= 4
test: $(STAMP) system-deps
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m compileall -q -j 0 src tests bench examples > /dev/null
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=20 $(PYTEST_ARGS)

# ZooKeeper (Debian's `zookeeper`: the jars only, no service; tests start the server themselves
# with java) and a Java runtime when none is on the PATH. The cluster tests fail without them.
ZOOKEEPER_JAR := /usr/share/java/zookeeper.jar

system-deps:
	@if [ ! -f $(ZOOKEEPER_JAR) ] || ! command -v java >/dev/null 2>&1; then \
		if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
			pkgs=zookeeper; command -v java >/dev/null 2>&1 || pkgs="$$pkgs default-jre-headless"; \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				--no-install-recommends $$pkgs) >/dev/null 2>&1 \
				|| echo "warning: could not install $$pkgs; the ZooKeeper tests will fail"; \
		else echo "warning: ZooKeeper ($(ZOOKEEPER_JAR)) or java missing and not root;" \
			"install Debian's zookeeper package: the ZooKeeper tests will fail"; fi; \
	fi
	@if ! command -v kcat >/dev/null 2>&1; then \
		if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat) >/dev/null 2>&1 \
				|| echo "warning: could not install kcat; kcat tests will be skipped"; \
		else echo "warning: kcat missing and not root; kcat tests will be skipped"; fi; \
	fi
	@if [ ! -x /usr/bin/chromium ]; then \
		if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 \
				|| echo "warning: could not install chromium; the console's browser tests will fail"; \
		else echo "warning: /usr/bin/chromium missing and not root; install Debian's chromium:" \
			"the console's browser tests (tests/console) will fail"; fi; \
	fi

BENCH_STAMP := $(VENV)/.bench-installed
BENCH_ARGS ?=

$(BENCH_STAMP): pyproject.toml | $(STAMP)
	$(BIN)/pip install -q -e '.[test,bench]'
	touch $(BENCH_STAMP)

## Install what the bench needs: the bench extra, redis-server and iperf3 (apt, when missing
## and root), nafka in bench/.venv-nafka (when a Python >= 3.12 is found).
bench-deps: $(BENCH_STAMP)
	@sh bench/deps.sh

## Run every benchmark scenario with its peers (see bench/README.md); results in bench/results/.
bench: bench-deps
	$(BIN)/python -m bench --update-readme $(BENCH_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests tools bench
	$(BIN)/mypy

## The docs are true: architecture.md's citations exist, links stay inside the repository,
## the README's figures are the bench's recorded ones (also part of `make test`).
docs-check: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit/test_docs.py

## Regenerate src/logbus/protocol/messages from ../shared/kafka-protocol (development only).
gen: $(STAMP)
	$(BIN)/python tools/gen_messages.py ../shared/kafka-protocol

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .mypy_cache
