#!/bin/bash
# Two versions of the code under the same HTTP load, taking turns: a change's effect on requests/s
# measured in one period, so the machine's drift (the floor moves 20-30% between runs of
# bench/http_load.py) falls on both sides alike.
#
#   bash bench/http_ab.sh BEFORE_COMMIT [ROUNDS] [SECONDS]
#
# Needs the data bench/http_load.py made (the database followfeed_http and its Redis snapshot in
# var/bench-http/). Checks BEFORE_COMMIT out in a temporary worktree, starts a private redis-server
# from the snapshot and one gunicorn (3 sync workers, production settings) per version, signs the
# benchmark's reader in once per version, then runs wrk (32 connections, 2 threads) against each
# path (the Mastodon API's with an access token of the reader), before and after in turn, ROUNDS
# times (default 3) for SECONDS each (default 6); AB_PATHS="path path ..." loads those paths only.
# Prints one line per run: round, version, path, requests/s, load average.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BEFORE=${1:?usage: bench/http_ab.sh BEFORE_COMMIT [ROUNDS] [SECONDS]}
ROUNDS=${2:-3}
SECONDS_EACH=${3:-6}
PY="$ROOT/.venv/bin/python"
WORK=$(mktemp -d)
REDIS_PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
git -C "$ROOT" worktree add -q "$WORK/before" "$BEFORE"
cleanup() {
    for version in before after; do
        [ -f "$WORK/$version.pid" ] && kill "$(cat "$WORK/$version.pid")" 2>/dev/null || true
    done
    redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
    git -C "$ROOT" worktree remove --force "$WORK/before" || true
    rm -rf "$WORK"
}
trap cleanup EXIT
cp "$ROOT/var/bench-http/followfeed_http.rdb" "$WORK/dump.rdb"
redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$WORK" --dbfilename dump.rdb --save "" \
    --appendonly no --zset-max-listpack-entries 3000 --set-max-intset-entries 3000 >/dev/null
until redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; do sleep 0.2; done
export DJANGO_SETTINGS_MODULE=bench.http_settings DJANGO_ALLOWED_HOSTS=127.0.0.1,localhost \
    DJANGO_SECRET_KEY="$("$PY" -c 'import secrets; print(secrets.token_urlsafe(50))')" \
    DATABASE_URL=mysql://root:@127.0.0.1:3306/followfeed_http REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0" \
    CELERY_BROKER_URL=amqp://guest:guest@127.0.0.1:5672/http_bench CELERY_TASK_DEFAULT_QUEUE=http_bench_ab \
    BENCH_STATIC_ROOT="$WORK/static" LOG_LEVEL=WARNING
(cd "$ROOT" && PYTHONPATH="$ROOT" "$PY" manage.py collectstatic --noinput -v0)
# One session per version, written by that version's code: it names that version's first
# authentication backend (a version without it would see the other's session as signed out).
sign_in() {
    (cd "$1" && PYTHONPATH="$1" "$PY" -c '
import django
django.setup()
from importlib import import_module
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from users.models import User
reader = User.objects.get(username="u2494")
store = import_module(settings.SESSION_ENGINE).SessionStore()
store[SESSION_KEY] = str(reader.pk)
store[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
store[HASH_SESSION_KEY] = reader.get_session_auth_hash()
store.create()
print(store.session_key)')
}
declare -A SESSION=([before]="$(sign_in "$WORK/before")" [after]="$(sign_in "$ROOT")")
# An access token of the reader for the Mastodon API's path (the same database serves both versions).
TOKEN=$(cd "$ROOT" && PYTHONPATH="$ROOT" "$PY" -c '
import django
django.setup()
from bench.http_setup import mastodon_token
from users.models import User
print(mastodon_token(User.objects.get(username="u2494").pk))')
declare -A PORT=([before]=0 [after]=0)
for version in before after; do
    dir=$([ "$version" = before ] && echo "$WORK/before" || echo "$ROOT")
    PORT[$version]=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    (cd "$dir" && PYTHONPATH="$dir" "$ROOT/.venv/bin/gunicorn" config.wsgi --bind "127.0.0.1:${PORT[$version]}" --workers 3 \
        --error-logfile "$WORK/$version.err" --daemon --pid "$WORK/$version.pid")
done
headers() {  # version path
    case "$2" in
        /api/v1/*) echo "-H|X-Forwarded-Proto: https|-H|Authorization: Bearer $TOKEN" ;;
        *) echo "-H|X-Forwarded-Proto: https|-H|Cookie: sessionid=${SESSION[$1]}|-H|Accept: text/html" ;;
    esac
}
PATHS=(/bench/floor /home /u/u398/ /u/u398/followers/ /api/feed /api/users/399/followers "/api/v1/timelines/home?limit=40")
if [ -n "${AB_PATHS:-}" ]; then read -ra PATHS <<< "$AB_PATHS"; fi  # some paths only, more rounds in the same time
for version in before after; do
    IFS='|' read -r -a HEADERS <<< "$(headers "$version" /bench/floor)"
    until curl -sf -o /dev/null "${HEADERS[@]}" "http://127.0.0.1:${PORT[$version]}/bench/floor"; do sleep 0.5; done
    for path in "${PATHS[@]}"; do  # warm, and every answer a 200
        IFS='|' read -r -a HEADERS <<< "$(headers "$version" "$path")"
        status=$(curl -s -o /dev/null -w '%{http_code}' "${HEADERS[@]}" "http://127.0.0.1:${PORT[$version]}$path")
        [ "$status" = 200 ] || { echo "$version $path answered $status" >&2; exit 1; }
        wrk -c8 -t2 -d1s "${HEADERS[@]}" "http://127.0.0.1:${PORT[$version]}$path" >/dev/null
    done
done
for round in $(seq "$ROUNDS"); do
    for path in "${PATHS[@]}"; do
        for version in before after; do
            IFS='|' read -r -a HEADERS <<< "$(headers "$version" "$path")"
            rate=$(wrk -c32 -t2 -d"${SECONDS_EACH}s" "${HEADERS[@]}" "http://127.0.0.1:${PORT[$version]}$path" | awk '/Requests\/sec/ {print $2}')
            echo "round $round $version $path $rate requests/s, load $(cut -d' ' -f1 /proc/loadavg)"
        done
    done
done
