# The two commands: `make run` (the site on the real Slashdot graph, no
# services needed) and `make test` (the whole suite on MariaDB, Redis, RabbitMQ).
PY := .venv/bin/python
PORT ?= 8000
# pytest-xdist's processes for make test (auto: one per core).
TEST_PROCESSES ?= auto

.PHONY: run test bootstrap services bench

run:
	bash scripts/bootstrap.sh run
	env -u DATABASE_URL -u DATABASE_REPLICA_URL -u REDIS_URL -u REDIS_CLUSTER_NODES -u CELERY_BROKER_URL \
		-u CELERY_TASK_ALWAYS_EAGER -u DJANGO_READ_DOT_ENV_FILE DJANGO_SETTINGS_MODULE=config.settings.local \
		$(PY) manage.py run_demo --port $(PORT)

test:
	bash scripts/bootstrap.sh dev
	bash scripts/ensure_services.sh
	$(PY) -m pytest -n $(TEST_PROCESSES) --dist loadfile $(PYTEST_ARGS)

bench:
	bash scripts/bootstrap.sh dev
	bash scripts/ensure_services.sh
	$(PY) bench/run.py
	$(PY) bench/write_path_profile.py --out bench/results/profile_write_path.txt
	$(PY) bench/home_page.py --out bench/results/home_page.json
	$(PY) bench/controls.py --out bench/results/controls.json
	$(PY) bench/suggestions.py --out bench/results/suggestions.json
	$(PY) bench/http_load.py --out bench/results --profile home --profile-label latest
	$(PY) bench/first_run.py --out bench/results/first_run.json
	$(PY) bench/metrics_cost.py --out bench/results/metrics_cost.json
	$(PY) bench/mastodon_home.py --out bench/results/mastodon_home.json
	$(PY) bench/streaming.py --out bench/results/streaming.json
	$(PY) bench/list_timeline.py --out bench/results/list_timeline.json
