# The two commands: `make run` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# pytest in parallel processes (pytest-xdist): most of the suite waits on servers and
# processes, so more processes than cores pays; each has its own test database, Dovecot and MEDIA_ROOT.
PYTEST_WORKERS ?= 6
PYTEST := $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist load

.PHONY: setup run test test-fast test-django6 bench bench-imports bench-site-page bench-portfolio bench-mail bench-mail-api bench-live bench-outbox bench-mail-scale bench-prune bench-schema bench-profile bench-hostile bench-snapshot bench-soak migrate stopdb clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

migrate: setup
	$(BIN)/python manage.py migrate --noinput

# scripts/run_all.py checks RUN_ADDRESS's port first, then migrates and seeds the demo login, then starts
# the web, a worker and a poller: a taken port stops it before anything starts.
run: setup
	$(BIN)/python scripts/run_all.py

test: setup
	sh scripts/install_browser.sh
	sh scripts/install_dovecot.sh
	$(BIN)/ruff check .
	$(BIN)/python manage.py makemigrations --check --dry-run
	@# The Django 6.1 task-backend tests (mostly building their venv) run beside the suite; their lines follow it.
	@mkdir -p .data; sh scripts/test_django6.sh > .data/test-django6.log 2>&1 & django6=$$!; \
	echo "$(PYTEST) --durations=20"; $(PYTEST) --durations=20; suite=$$?; \
	wait $$django6; tasks=$$?; cat .data/test-django6.log; \
	test $$suite -eq 0 && test $$tasks -eq 0

# The task-backend tests on Django 6.1 (built-in django.tasks) in a venv of their own, .venv-django6, on the
# newest Python >= 3.12 found; skipped with one line when there is none. `make test` runs it beside the suite.
test-django6: setup
	sh scripts/test_django6.sh

# For local work: without the tests that start real processes (kill -9, outages) or a browser. CI runs `make test`.
test-fast: setup
	sh scripts/install_dovecot.sh
	$(PYTEST) -m "not processes and not e2e"

# The peers make bench runs beside runjobs (procrastinate, django-tasks-db; bench/peers.py): the pinned `bench`
# extra, in this venv, installed here only. Without them `python -m bench.queue` says so and runs without them.
BENCH_STAMP := $(VENV)/.bench-peers-stamp

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench: migrate $(BENCH_STAMP)
	$(BIN)/python -m bench.queue

bench-imports: migrate
	$(BIN)/python -m bench.imports

bench-site-page: migrate
	$(BIN)/python -m bench.site_page

# /imports/sites/ for 200 sites of 16 months of daily rows (4.8 M rows): median server time per view (issue 36).
bench-portfolio: migrate
	$(BIN)/python -m bench.portfolio

bench-mail: migrate
	sh scripts/install_dovecot.sh
	$(BIN)/python -m bench.mail

bench-mail-api: migrate
	sh scripts/install_dovecot.sh
	$(BIN)/python -m bench.mail_api

bench-live: migrate
	sh scripts/install_dovecot.sh
	$(BIN)/python -m bench.live

bench-outbox: migrate
	$(BIN)/python -m bench.outbox

bench-mail-scale: migrate
	sh scripts/install_dovecot.sh
	$(BIN)/python -m bench.mail_scale

bench-prune: migrate
	$(BIN)/python -m bench.prune

# What issue 35's hostile files and addresses cost one web request, each beside an ordinary one (a minute).
bench-hostile: migrate
	$(BIN)/python -m bench.hostile

bench-schema: setup
	$(BIN)/python -m bench.schema_cost

bench-profile: setup
	sh scripts/install_postgres_profiling.sh
	$(BIN)/python -m bench.queue_profile

# The claim with a snapshot held open through 100,000 jobs, and one worker's RSS over 1,000,000 (issue 22;
# docs/benchmarks.md). Each prints figures, takes 15-30 minutes and drops its own database.
bench-snapshot: migrate
	$(BIN)/python -m bench.held_snapshot

bench-soak: migrate
	$(BIN)/python -m bench.soak

stopdb: setup
	$(BIN)/python -c "from pathlib import Path; from seoinsight.embedded_db import stop; print('stopped' if stop(Path('.data/postgres').resolve()) else 'not running')"

clean:
	rm -rf $(VENV) .venv-django6 *.egg-info
