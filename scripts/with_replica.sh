#!/usr/bin/env bash
# Run a command against a private MariaDB primary and replica (GTID
# replication on loopback) and a private Redis, all started here and
# stopped afterwards whatever happens (tests/replica.py):
#
#   bash scripts/with_replica.sh .venv/bin/python -m pytest -m replica tests/core/test_replica.py
#
# The command gets DATABASE_URL (the primary), DATABASE_REPLICA_URL (the
# replica, a SELECT-only account), REDIS_URL, and the root URLs of both
# servers for the tests' lag control; its exit status is this script's.
# The system MariaDB and Redis are not touched.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then
    echo "usage: bash scripts/with_replica.sh <command> [args...]" >&2
    exit 2
fi
exec "${PYTHON:-.venv/bin/python}" -m tests.replica run -- "$@"
