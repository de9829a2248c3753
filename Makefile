# One command runs the main job (`make run`), one runs the tests (`make test`).
# Both bootstrap .venv from the lock file on first use; only Python 3.11+ and make are needed.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# `make run` needs only the engine's extra (requirements/run.lock), not the test toolchain: a
# first run on a fresh machine installs a fraction of what `make test` does.
RUN_VENV  ?= .venv-run
RUN_STAMP := $(RUN_VENV)/.installed
PORT   ?= 8080
ENGINE_PORT ?= 8000
DB     ?= firstwrite-local.db

.PHONY: run test test-fast lint typecheck check bench screenshots lock clean \
	proof proof-ci proof-linearizability proof-crash proof-hostile proof-race proof-consumers

$(STAMP): requirements/dev.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements/dev.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $@

$(RUN_STAMP): requirements/run.lock pyproject.toml
	$(PYTHON) -m venv $(RUN_VENV)
	$(RUN_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements/run.lock
	$(RUN_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $@

## run: the payments demo on 127.0.0.1:$(PORT), deduplicated by Idempotency-Key, on the local
## engine (database file $(DB)); the engine's DynamoDB endpoint on 127.0.0.1:$(ENGINE_PORT)
run: $(RUN_STAMP)
	$(RUN_VENV)/bin/firstwrite demo --port $(PORT) --engine-port $(ENGINE_PORT) --db $(DB)

# The tests write bytecode caches even where PYTHONDONTWRITEBYTECODE is set: without them every
# worker re-compiles (and re-rewrites the asserts of) every module it collects, and every child
# interpreter the tests start (servers, the CLI, docs blocks) re-compiles the package it imports.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest
# One worker per CPU the run may use, plus one: a third of the suite's time is spent waiting
# (attack and quiet windows on the wall clock, child processes, servers), so on 2 cores 3
# workers keep both busy (126% CPU with 2 workers). A wider CI machine runs wider. loadgroup
# keeps each docs page's blocks on one worker (one namespace).
XDIST  := -n $(shell $(PYTHON) -c 'import os; print(1 + (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))') --dist loadgroup

## test: lint, type-check, then the whole test suite (slow tests included)
test: $(STAMP) lint typecheck
	$(PYTEST) $(XDIST)

## test-fast: the suite without the slow tests (tests/conftest.py says which), property tests
## at a fifth of their examples (tests/hypothesis_budget.py): a pre-commit loop
test-fast: $(STAMP)
	$(PYTEST) $(XDIST) -m "not slow" --hypothesis-profile=fast

## proof-linearizability, proof-crash, proof-hostile, proof-race, proof-consumers: the long forms
## of the proof suites (docs/reliability.md; `make test` runs their short forms); `proof`: all.
## PROOF_REPORT=file.jsonl appends each suite's numbers to that file.
PROOF_RUN = FIRSTWRITE_PROOF=long FIRSTWRITE_PROOF_REPORT=$(PROOF_REPORT) $(PYTEST) -n 0 -p no:randomly
proof: proof-linearizability proof-crash proof-hostile proof-race proof-consumers

## proof-ci: the subset of the long forms CI runs after `make test` (.ci/run), bounded to about
## 12 minutes by the suites' own deadlines: the linearizability proof on the engine (every
## target but moto's reference rounds) and the first-writer race (docs/reliability.md).
proof-ci: $(STAMP)
	$(PROOF_RUN) tests/proof/test_lincheck.py tests/proof/test_linearizability.py tests/engine/test_race.py -k "not moto"

proof-linearizability: $(STAMP)
	$(PROOF_RUN) tests/proof/test_lincheck.py tests/proof/test_linearizability.py

proof-crash: $(STAMP)
	$(PROOF_RUN) tests/proof/test_crash_cycles.py

proof-race: $(STAMP)
	$(PROOF_RUN) tests/engine/test_race.py

proof-consumers: $(STAMP)
	$(PROOF_RUN) tests/proof/test_consumer_chaos.py

proof-hostile: $(STAMP)
	$(PROOF_RUN) tests/proof/test_hostile.py tests/proof/test_hostile_heads.py tests/proof/test_hostile_apps.py \
		tests/proof/test_hostile_partiql.py

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy

## bench: run every benchmark and rewrite BENCHMARKS.md
bench: $(STAMP)
	$(PY) -m bench

## screenshots: retake the console's screenshots in docs/img/ (headless Chromium, via its browser tests)
screenshots: $(STAMP)
	FIRSTWRITE_SCREENSHOTS=docs/img $(PY) -m pytest -q -p no:randomly -n 0 tests/console/test_browser.py -k "race_32 or race_timeline or lease-takeover or transaction-cancelled or stale-replica or hot-partition or redelivered-batch or worker-killed or skewed-worker or regions-both or long_key"

## lock: re-resolve requirements/dev.lock and run.lock (needs uv; run by a maintainer, not by CI)
lock:
	uv pip compile pyproject.toml requirements/dev.in --all-extras -o requirements/dev.lock --generate-hashes --python-version 3.11 --no-header
	uv pip compile pyproject.toml --extra engine -c requirements/dev.lock -o requirements/run.lock --generate-hashes --python-version 3.11 --no-header

clean:
	rm -rf $(VENV) $(RUN_VENV) .pytest_cache .mypy_cache .ruff_cache
