#!/usr/bin/env bash
# Start MariaDB, Redis and RabbitMQ on loopback if they are not answering.
# Used by `make test` and .ci/run; idempotent.
set -u

wait_for() {  # name, seconds, command...
  local name=$1 seconds=$2; shift 2
  for _ in $(seq 1 "$seconds"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  echo "ensure_services: $name did not come up" >&2
  return 1
}

if ! mariadb -uroot -h127.0.0.1 -e 'select 1' >/dev/null 2>&1; then
  echo "ensure_services: starting MariaDB"
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  wait_for MariaDB 60 mariadb -uroot -h127.0.0.1 -e 'select 1' || exit 1
fi

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "ensure_services: starting Redis"
  # lazyfree-*: a server-side DEL, RENAME over a key, expiry or eviction of a
  # big value frees it in the background thread, as UNLINK does (the code
  # already uses UNLINK; this also covers what it does not control).
  # *-entries 3000: sets and sorted sets of up to 3000 members stay compact
  # (intset, listpack); the follow graph of Slashdot then takes 59 bytes per
  # follow instead of 120 with the defaults (bench/results, bench/memory.py).
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --lazyfree-lazy-server-del yes --lazyfree-lazy-user-del yes --lazyfree-lazy-expire yes --lazyfree-lazy-eviction yes \
    --zset-max-listpack-entries 3000 --set-max-intset-entries 3000
  wait_for Redis 30 redis-cli -h 127.0.0.1 -p 6379 ping || exit 1
fi

if ! (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  echo "ensure_services: starting RabbitMQ"
  rabbitmq-server -detached
  wait_for RabbitMQ 90 bash -c 'exec 3<>/dev/tcp/127.0.0.1/5672' || exit 1
  sleep 3
fi
exit 0
