# Conveyor's two commands: `make run` and `make test`. Both set everything up first.
#
#   make run     virtualenv + editable install + Kafka jars, start the development broker,
#                run the example app and its web UI on http://127.0.0.1:9000/ until Ctrl-C
#                (the broker keeps running: `make stop` stops it); with KAFKA_BOOTSTRAP_SERVERS
#                set, the example runs on that Kafka and no broker is fetched or started
#   make test    the same set-up, then lint, type check and the whole test suite against a
#                real broker (started and stopped again unless one runs already, or
#                KAFKA_BOOTSTRAP_SERVERS points at your own Kafka), in WORKERS processes
#                (pytest-xdist); the browser tests need Debian's chromium and the PostgreSQL
#                sink's tests Debian's postgresql, each installed with apt-get when missing and
#                run as root; the AsyncAPI tests the official AsyncAPI 3.0 JSON Schema, fetched
#                with npm into .cache/. It prints the time of each step, the 30 slowest tests
#                and the median of the last three green runs.
#   make check   the inner loop, no broker: lint, type check, the docs build, the unit tests
#   make test-repeat N=5  the integration tests N times over, and which failed in any run
#   (make bench installs Debian's redis-server the same way: the jobs benchmark's Celery
#   and Dramatiq run on it)
#   make release-check  (make test runs it as one of its tests) the sdist and wheel built into dist/ and checked:
#                their files, twine check --strict, and the wheel installed alone in a clean
#                virtualenv running a hello app against the broker (tools/check-release)
#   make docs    the documentation site on http://127.0.0.1:8000/ (MkDocs Material), rebuilt
#                as you edit; `make test` builds it with --strict (site/)
#   make bench   the benchmarks, with their same-run bare confluent-kafka baselines
#   make soak    the whole product on a local 3-broker cluster under random faults for
#                SOAK_MINUTES (10), its invariants checked (tests/soak/soak.py)

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
PYTEST_ARGS ?=
SOAK_MINUTES ?= 10
# Test processes: the integration tests mostly wait (for Kafka, for groups to settle), so more
# workers than this machine's 2 cores; the tests that start brokers of their own, or need
# the machine quiet, share one worker (xdist groups, tests/conftest.py).
WORKERS ?= 4
N ?= 5

.PHONY: all setup browser postgresql asyncapi-schema redis run test check lint typecheck pytest unit test-repeat docs docs-build release-check bench soak stop clean

all: test

$(INSTALLED): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Conveyor needs Python 3.11 or newer; run make with PYTHON=python3.11 (or newer).")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(INSTALLED)

setup: $(INSTALLED)
	$(BIN)/conveyor broker fetch

# With KAFKA_BOOTSTRAP_SERVERS set, the example runs on that Kafka: no broker, no Java.
run: $(INSTALLED)
ifndef KAFKA_BOOTSTRAP_SERVERS
	$(BIN)/conveyor broker start
endif
	$(BIN)/python examples/quickstart.py

# No cache: an import's section depends on which folders exist, which the cache does not see
# (a new bench/ folder once sorted imports differently on a clean clone).
lint: $(INSTALLED)
	$(BIN)/ruff check --no-cache src tests bench examples docs/hooks tools/check-release tools/phases tools/repeat-tests
	$(BIN)/ruff format --check src tests bench examples docs/hooks tools/check-release tools/phases tools/repeat-tests

typecheck: $(INSTALLED)
	$(BIN)/mypy

browser:
	tools/ensure-chromium

postgresql:
	tools/ensure-postgresql

asyncapi-schema:
	tools/ensure-asyncapi-schema

redis:
	tools/ensure-redis

pytest: setup browser postgresql asyncapi-schema
	SWEEP_TEST_TOPICS=1 $(BIN)/conveyor broker exec -- $(BIN)/pytest -n $(WORKERS) --dist loadgroup --durations=30 $(PYTEST_ARGS)

unit: $(INSTALLED)
	$(BIN)/pytest -n 2 -q -m "not integration" tests/unit tests/test_*.py $(PYTEST_ARGS)

test-repeat: setup browser postgresql asyncapi-schema
	SWEEP_TEST_TOPICS=1 $(BIN)/conveyor broker exec -- $(BIN)/python tools/repeat-tests $(N) -- -n $(WORKERS) --dist loadgroup tests/integration $(PYTEST_ARGS)

# The site, built with --strict: a broken link or anchor, or a reference that does not
# resolve, fails it. Its examples run in pytest (tests/integration/docs/test_examples.py).
docs-build: $(INSTALLED)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# What a release publishes, checked as a user gets it: dist/ then holds the sdist and the wheel
# (twine upload dist/*). About a minute; pip's cache makes the installs quick.
release-check: setup
	$(BIN)/conveyor broker exec -- $(BIN)/python tools/check-release

docs: $(INSTALLED)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

test:
	@$(PYTHON) tools/phases test setup browser postgresql asyncapi-schema lint typecheck docs-build pytest

check:
	@$(PYTHON) tools/phases check lint typecheck docs-build unit

bench: setup redis
	$(BIN)/conveyor broker exec -- $(BIN)/conveyor bench

soak: setup
	$(BIN)/python tests/soak/soak.py --minutes $(SOAK_MINUTES)

stop: $(INSTALLED)
	$(BIN)/conveyor broker stop

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site dist
