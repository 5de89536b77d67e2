# Conveyor's two commands: `make run` and `make test`. Both set everything up first.
#
#   make run     virtualenv + editable install + Kafka jars, start the development broker,
#                run the example app and its web UI on http://127.0.0.1:9000/ until Ctrl-C
#                (the broker keeps running: `make stop` stops it)
#   make test    the same set-up, then lint, type check and the whole test suite against a
#                real broker (started and stopped again unless one runs already, or
#                KAFKA_BOOTSTRAP_SERVERS points at your own Kafka); the browser tests need
#                Debian's chromium and the PostgreSQL sink's tests Debian's postgresql, each
#                installed with apt-get when missing and run as root; the AsyncAPI tests
#                the official AsyncAPI 3.0 JSON Schema, fetched with npm into .cache/
#   (make bench installs Debian's redis-server the same way: the jobs benchmark's Celery
#   and Dramatiq run on it)
#   make release-check  (part of make test) the sdist and wheel built into dist/ and checked:
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

.PHONY: all setup browser postgresql asyncapi-schema redis run test lint typecheck pytest docs docs-build release-check bench soak stop clean

all: test

$(INSTALLED): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Conveyor needs Python 3.11 or newer; run make with PYTHON=python3.11 (or newer).")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(INSTALLED)

setup: $(INSTALLED)
	$(BIN)/conveyor broker fetch

run: setup
	$(BIN)/conveyor broker start
	$(BIN)/python examples/quickstart.py

lint: $(INSTALLED)
	$(BIN)/ruff check src tests bench examples docs/hooks tools/check-release
	$(BIN)/ruff format --check src tests bench examples docs/hooks tools/check-release

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
	$(BIN)/conveyor broker exec -- $(BIN)/pytest $(PYTEST_ARGS)

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

test: lint typecheck docs-build release-check pytest

bench: setup redis
	$(BIN)/conveyor broker exec -- $(BIN)/conveyor bench

soak: setup
	$(BIN)/python tests/soak/soak.py --minutes $(SOAK_MINUTES)

stop: $(INSTALLED)
	$(BIN)/conveyor broker stop

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site dist
