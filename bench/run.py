"""followfeed benchmark: every operation three ways on the real graph, beside the raw limits, in one run.

Run it with ``make bench`` (which bootstraps the virtualenv, starts
MariaDB, Redis and RabbitMQ if needed, then runs this script), or::

    .venv/bin/python bench/run.py [--out bench/results] [--fresh] [--skip-scaling] [--quick] [--redis-url URL]

What it does, in order (about 5 minutes on 2 cores the first time, 4 once
the data is in place):

0. Starts a private ``redis-server`` for the run (``bench.servers``: the
   figures must not measure other clients of a shared Redis), unless
   ``--redis-url`` names one to use.
1. Tunes the servers it uses and records their settings: the Redis
   encoding limits ``bench.memory.TUNED`` (CONFIG SET) and, when smaller,
   ``innodb_buffer_pool_size`` to 1 GiB (the default 128 MiB is smaller
   than the follow table with its indexes). ``--no-tune`` leaves them.
2. The scaling series in a child process on its own database and a
   private redis-server (``bench.scaling``): import, rebuild, reconcile and
   memory per edge at 100%, 50%, 25%, 10% of the graph.
3. The data (``bench.data``): the graph imported into the database
   ``followfeed_bench`` (``BENCH_DATABASE_URL``) unless it is already there, its
   mirror rebuilt under the Redis prefix ``bench:``, a 20k-follower and a
   100k-follower account, django-activity-stream's copy, notes and the
   reader's inbox.
4. Raw limits: Redis PING round trip, pipelined ZADD rate, MariaDB
   primary-key SELECT (``bench.raw``).
5. Every operation of ``bench.operations`` three ways, and the fan-out of
   one note to the 100k followers. The Redis way's calls alternate with
   PINGs, and its ratio to PING uses those (same seconds, same load).
6. The outputs in ``--out``: ``results.json`` (every figure), ``results.md``
   (tables), ``results.png`` (chart); the goals are checked in both.

Everything it writes is under its own database names, its own Redis key
prefix (on its own server) and its own Celery queue (deleted at the end);
re-runs reuse the database.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_DATABASE_URL = "mysql://root:@127.0.0.1:3306/followfeed_bench"
BUFFER_POOL_BYTES = 1 << 30


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"), help="output directory (default bench/results)")
    parser.add_argument("--fresh", action="store_true", help="drop the benchmark database first (re-import everything)")
    parser.add_argument("--skip-scaling", action="store_true", help="skip the scaling series")
    parser.add_argument("--no-tune", action="store_true", help="leave the Redis encodings and the InnoDB buffer pool as they are")
    parser.add_argument(
        "--redis-url",
        default=None,
        help="use this Redis (keys under REDIS_KEY_PREFIX, default bench:) instead of a private redis-server started for the run",
    )
    parser.add_argument("--budget", type=float, default=2.0, help="seconds of calls per operation and way (default 2)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small slice of the graph and small accounts (seconds, for the smoke test); figures are not comparable",
    )
    return parser.parse_args(argv)


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return [float("nan")] * 3


def run_scaling(args: argparse.Namespace, scale: Any, url: str) -> dict[str, Any]:
    """Run ``bench/scaling.py`` in a child process on ``<database>_scale``; returns its figures."""
    from bench.db import with_suffix

    out = Path(args.out) / "scaling.json"
    env = {**os.environ, "DATABASE_URL": with_suffix(url, "_scale")}
    command = [sys.executable, str(ROOT / "bench" / "scaling.py"), "--out", str(out), "--dataset", scale.dataset]
    if scale.limit is not None:
        command += ["--limit", str(scale.limit), "--fractions", "1,0.5"]
    subprocess.run(command, env=env, check=True)
    figures: dict[str, Any] = json.loads(out.read_text())
    out.unlink()
    return figures


def tune_servers(enabled: bool) -> dict[str, Any]:
    """Set the Redis encoding limits and a big enough InnoDB buffer pool; returns before/after."""
    from django.db import connection

    from bench.memory import TUNED, encoding_config, set_encoding_config
    from core.redis import get_redis

    client = get_redis()
    done: dict[str, Any] = {"enabled": enabled}
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@innodb_buffer_pool_size")
        pool = int(cursor.fetchone()[0])
        done["innodb_buffer_pool_size_before"] = pool
        if enabled and pool < BUFFER_POOL_BYTES:
            try:
                cursor.execute(f"SET GLOBAL innodb_buffer_pool_size = {BUFFER_POOL_BYTES}")
                time.sleep(2)  # the resize runs in the background
            except Exception as exc:  # noqa: BLE001 - no privilege: recorded, not fatal
                done["innodb_buffer_pool_error"] = str(exc)
        cursor.execute("SELECT @@innodb_buffer_pool_size")
        done["innodb_buffer_pool_size"] = int(cursor.fetchone()[0])
    done["redis_before"] = encoding_config(client)
    if enabled:
        try:
            set_encoding_config(client, TUNED)
        except Exception as exc:  # noqa: BLE001 - CONFIG disabled (managed Redis): recorded
            done["redis_error"] = str(exc)
    done["redis"] = encoding_config(client)
    return done


def drop_bench_queue() -> None:
    """Delete the Celery queue the timed request paths filled (no worker consumes it) with its tasks."""
    from django.conf import settings

    from config.celery_app import app

    try:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(settings.CELERY_TASK_DEFAULT_QUEUE)
    except Exception:  # noqa: BLE001, S110 - queue never declared, or broker gone: nothing to delete
        pass


def unlink_inboxes(user_ids: list[int]) -> None:
    """Remove the inboxes of ``user_ids`` (the big account's fans hold only benchmark notes)."""
    from core.redis import get_redis
    from feed import redis_keys as feed_keys

    client = get_redis()
    for start in range(0, len(user_ids), 1000):
        client.unlink(*[feed_keys.inbox_key(u) for u in user_ids[start : start + 1000]])


def measure_operations(operations: list[Any], budget: float, rounds: int = 3) -> list[dict[str, Any]]:
    """Run every way of every operation, in ``rounds`` rounds that take turns between the ways
    (so a burst of load on the shared machine hits every way alike); the Redis way's calls
    alternate with PINGs, the base of its ratio to the raw round trip."""
    import math

    from bench import timing
    from bench.operations import database_only
    from core.redis import get_redis

    client = get_redis()
    measured: list[dict[str, Any]] = []
    for op in operations:
        durations: dict[str, list[int]] = {name: [] for name in op.ways}
        pings: list[int] = []
        for round_index in range(rounds):
            for way_name, way in op.ways.items():
                options = {
                    "budget_seconds": budget / rounds,
                    "max_calls": math.ceil(way.max_calls / rounds),
                    "min_calls": math.ceil(min(way.min_calls, way.max_calls) / rounds),
                    "warmup": timing.WARMUP_CALLS if round_index == 0 else 1,
                    "first_index": len(durations[way_name]),
                }
                if way.database_only:
                    with database_only():
                        taken, _ = timing.collect(way.call, **options)
                elif way_name == "redis":
                    taken, paired = timing.collect(way.call, client.ping, **options)
                    pings += paired
                else:
                    taken, _ = timing.collect(way.call, **options)
                durations[way_name] += taken
        row: dict[str, Any] = {
            "key": op.key,
            "title": op.title,
            "note": op.note,
            "ways": {name: timing.summarize(taken).as_dict() for name, taken in durations.items()},
        }
        if pings:
            row["ping_p50_us"] = round(timing.summarize(pings).p50_us, 3)
        print(
            f"  {op.title:58} " + "  ".join(f"{name} {row['ways'][name]['p50_us']:>9.1f}µs" for name in row["ways"]), flush=True
        )
        measured.append(row)
    return measured


def add_ratios(operations: list[dict[str, Any]], raw_figures: dict[str, Any]) -> None:
    """Per way: ratio of its p50 to PING (measured next to it) and to the PK SELECT, and how many
    times faster it is than every other way of the same operation."""
    select = raw_figures["mariadb_pk_select"]["p50_us"]
    for op in operations:
        ping = op.get("ping_p50_us") or raw_figures["redis_ping"]["p50_us"]
        for name, data in op["ways"].items():
            data["ratio_to_ping"] = round(data["p50_us"] / ping, 2)
            data["ratio_to_pk_select"] = round(data["p50_us"] / select, 2)
            data["faster_than"] = {
                other: round(other_data["p50_us"] / data["p50_us"], 2)
                for other, other_data in op["ways"].items()
                if other != name
            }


def measure_fan_out(celebrity: Any, runs: int) -> dict[str, Any]:
    """Publish ``runs`` notes by ``celebrity`` and time the fan-out task body of each (``note_fan_out``).

    Every follower is made an active reader first (its inbox marked synced,
    as a sign-in does), so each one costs a real inbox write: the worst
    case, in which the fan-out writes as many members as the raw ZADD
    benchmark does. The markers and inboxes made for it are removed after.
    The raw pipelined ZADD rate is measured right before each run; the
    ratio uses their median.
    """
    import statistics

    from bench import raw
    from bench.operations import PUBLISH_PREFIX
    from bench.timing import summarize
    from core.redis import get_redis
    from feed import outbox as feed_outbox
    from feed import redis_keys as feed_keys
    from feed import services as feed_services
    from social.models import Follow

    client = get_redis()
    followers = list(Follow.objects.filter(followee_id=celebrity.pk).values_list("follower_id", flat=True))
    pipe = client.pipeline(transaction=False)
    for follower_id in followers:
        pipe.set(feed_keys.inbox_synced_key(follower_id), 1, ex=3600, nx=True)
    marked = [follower_id for follower_id, made in zip(followers, pipe.execute()) if made]
    durations: list[int] = []
    raw_rates: list[float] = []
    walked = writes = 0
    try:
        for index in range(runs):
            raw_rates.append(raw.redis_zadd_pipelined(batches=30).ops_per_s)
            note = feed_services.note_create(author=celebrity, body=f"{PUBLISH_PREFIX} fan-out {index}")
            started = time.perf_counter_ns()
            result = feed_outbox.note_fan_out(note_id=note.pk)
            durations.append(time.perf_counter_ns() - started)
            walked, writes = result.followers, result.inbox_writes
            if result.mode != "push":
                raise SystemExit(
                    f"fan-out ran in mode {result.mode!r}: FANOUT_PULL_THRESHOLD must exceed the account's followers"
                )
        # The same ZADDs the fan-out makes, straight into the followers' own inboxes (100k keys,
        # cold in the server's caches, where the raw rate above reuses 1,000 keys), pipelined per 1,000.
        inbox_started = time.perf_counter_ns()
        for start in range(0, len(followers), raw.ZADD_BATCH):
            pipe = client.pipeline(transaction=False)
            for follower_id in followers[start : start + raw.ZADD_BATCH]:
                pipe.zadd(feed_keys.inbox_key(follower_id), {"0": 0})
            pipe.execute()
        inbox_rate = len(followers) / ((time.perf_counter_ns() - inbox_started) / 1e9)
    finally:
        keys = [
            key for follower_id in marked for key in (feed_keys.inbox_synced_key(follower_id), feed_keys.inbox_key(follower_id))
        ]
        for start in range(0, len(keys), 1000):
            client.unlink(*keys[start : start + 1000])
    summary = summarize(durations, units_per_call=writes)
    return {
        "runs": runs,
        "followers": walked,
        "inbox_writes": writes,
        "seconds_p50": round(summary.p50_us / 1e6, 3),
        "seconds_max": round(max(durations) / 1e9, 3),
        "inbox_writes_per_s": round(summary.ops_per_s),
        "followers_per_s": round(summary.ops_per_s * walked / writes) if writes else 0,
        "raw_zadd_per_s": round(statistics.median(raw_rates)),
        "ratio_to_raw_zadd": round(summary.ops_per_s / statistics.median(raw_rates), 3),
        "raw_zadd_to_the_inboxes_per_s": round(inbox_rate),
        "ratio_to_raw_zadd_to_the_inboxes": round(summary.ops_per_s / inbox_rate, 3),
    }


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal of issue 7 with its measured figure from this run."""
    ops = {op["key"]: op["ways"] for op in results["operations"]}
    found: list[dict[str, Any]] = []

    def add(goal: str, value: float | None, target: str, met: bool | None, measured: str, *, info: bool = False) -> None:
        # ``info``: the same figure with user rows, shown beside the goal, not a goal itself.
        found.append({"goal": goal, "value": value, "measured": measured, "target": target, "met": bool(met), "info": info})

    page_floor = results["raw"]["redis_zrevrange_page"]["p50_us"]
    for key, label in (
        ("is_following", "is-following"),
        ("counts", "counts"),
        ("followers_page_1_ids", "followers page 1 (ids)"),
    ):
        ratio = ops[key]["redis"]["ratio_to_ping"]
        extra = ""
        if key == "followers_page_1_ids":
            extra = f"; {ops[key]['redis']['p50_us'] / page_floor:.2f}x a raw ZREVRANGE of the 51 ({page_floor:.0f} µs)"
        add(f"{label}: p50 / PING p50", ratio, "<= 3x", ratio <= 3, f"{ratio:.2f}x ({ops[key]['redis']['p50_us']:.0f} µs{extra})")
    full = ops["followers_page_1"]["redis"]["ratio_to_ping"]
    add(
        "followers page 1 with user rows: p50 / PING p50",
        full,
        "<= 3x",
        full <= 3,
        f"{full:.2f}x ({ops['followers_page_1']['redis']['p50_us']:.0f} µs)",
        info=True,
    )
    for key, label in (
        ("followers_page_depth_ids", "followers page at depth (ids)"),
        ("followers_page_depth", "followers page at depth with user rows"),
        ("common_follows_ids", "common follows (ids)"),
        ("common_follows", "common follows with user rows"),
    ):
        faster = ops[key]["redis"]["faster_than"]["database"]
        extra = ""
        if "offset" in ops[key]:
            extra = f"; {ops[key]['redis']['faster_than']['offset']:.0f}x vs OFFSET"
        add(
            f"{label}: database-only p50 / Redis p50",
            faster,
            ">= 20x",
            faster >= 20,
            f"{faster:.1f}x{extra}",
            info=not key.endswith("_ids"),
        )
    fan_out = results.get("fan_out")
    if fan_out:
        share = fan_out["ratio_to_raw_zadd"]
        add(
            "fan-out inbox writes/s / raw pipelined ZADD rate",
            share,
            ">= 100%",
            share >= 1.0,
            f"{share:.0%} ({fan_out['inbox_writes_per_s']:,} inbox writes/s, every follower an active reader)",
        )
        if "ratio_to_raw_zadd_to_the_inboxes" in fan_out:
            cold = fan_out["ratio_to_raw_zadd_to_the_inboxes"]
            add(
                "fan-out inbox writes/s / raw pipelined ZADD into the same 100k inboxes",
                cold,
                ">= 100%",
                cold >= 1.0,
                f"{cold:.0%} (raw: {fan_out['raw_zadd_to_the_inboxes_per_s']:,}/s)",
                info=True,
            )
    writes = ops["follow_unfollow"]
    write_p50 = writes["redis"]["p50_us"]
    versus_stream = write_p50 / writes["actstream"]["p50_us"]
    versus_database = write_p50 / writes["database"]["p50_us"]
    add(
        "follow + unfollow: p50 / django-activity-stream p50",
        round(versus_stream, 2),
        "<= 1.2x",
        versus_stream <= 1.2,
        f"{versus_stream:.2f}x ({write_p50 / 1000:.1f} ms vs {writes['actstream']['p50_us'] / 1000:.1f} ms)",
    )
    add(
        "follow + unfollow: p50 / followfeed database-only p50",
        round(versus_database, 2),
        "<= 1x",
        versus_database <= 1.0,
        f"{versus_database:.2f}x ({writes['database']['p50_us'] / 1000:.1f} ms database-only)",
    )
    # Issue 26: the sharded page (one script on one server) against the one-key page and the database.
    for sharded, one_key, label in (
        ("followers_page_1_sharded", "followers_page_1", "followers page 1"),
        ("followers_page_depth_sharded", "followers_page_depth", "followers page at depth"),
        ("followers_page_1_sharded_ids", "followers_page_1_ids", "followers page 1 (ids)"),
        ("followers_page_depth_sharded_ids", "followers_page_depth_ids", "followers page at depth (ids)"),
    ):
        rows = not label.endswith("(ids)")
        sharded_p50, one_key_p50 = ops[sharded]["redis"]["p50_us"], ops[one_key]["redis"]["p50_us"]
        add(
            f"{label}, 100k sharded: p50 / 20k one-key p50",
            round(sharded_p50 / one_key_p50, 2),
            "<= 2x",
            sharded_p50 / one_key_p50 <= 2,
            f"{sharded_p50 / one_key_p50:.2f}x ({sharded_p50:.0f} µs vs {one_key_p50:.0f} µs)",
            info=not rows,
        )
        faster = ops[sharded]["redis"]["faster_than"]["database"]
        add(
            f"{label}, 100k sharded: database-only p50 / Redis p50",
            faster,
            ">= 3x",
            faster >= 3,
            f"{faster:.1f}x ({ops[sharded]['database']['p50_us']:.0f} µs database-only)",
            info=not rows,
        )
    page1 = ops["home_feed_page_1"]["redis"]["p50_us"]
    page20 = ops["home_feed_page_20"]["redis"]["p50_us"]
    for key, label in (("home_feed_page_1", "home feed page 1"), ("home_feed_page_20", "home feed page 20")):
        ratio = ops[key]["redis"]["ratio_to_ping"]
        add(
            f"{label} (20 notes, bodies and authors): p50 / PING p50",
            ratio,
            "<= 5x",
            ratio <= 5,
            f"{ratio:.1f}x ({ops[key]['redis']['p50_us'] / 1000:.2f} ms)",
        )
    add("home feed page 20 p50 / page 1 p50", round(page20 / page1, 2), "<= 2x", page20 / page1 <= 2, f"{page20 / page1:.2f}x")
    scaling = results.get("scaling") or {}
    full_graph = next((row for row in scaling.get("series", []) if row["fraction"] == 1.0), None)
    if full_graph:
        for step, label in (("import", "import into MariaDB"), ("rebuild", "rebuild of the Redis mirror")):
            rate = full_graph[step]["edges_per_s"]
            add(
                f"{label}: edges/s",
                rate,
                ">= 100,000",
                rate >= 100_000,
                f"{rate:,} edges/s ({full_graph[step]['seconds']:.1f} s)",
            )
        per_edge = full_graph["memory"]["bytes_per_edge"]
        default = full_graph.get("memory_defaults", {}).get("bytes_per_edge")
        add(
            "Redis memory of the follow graph: bytes/edge",
            per_edge,
            "<= 80",
            per_edge <= 80,
            f"{per_edge:.1f} (Redis defaults: {default:.1f})" if default else f"{per_edge:.1f}",
        )
    duration = results.get("duration_s", 0.0)
    add("whole harness", duration, "< 15 min", duration < 900, f"{duration / 60:.1f} min")
    return found


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    # Always the benchmark's settings (they add django-activity-stream), whatever the shell has.
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    # Set, not defaulted: a DATABASE_URL, key prefix or Celery queue exported
    # for development must never receive the benchmark's data (its queue is
    # deleted at the end). BENCH_* variables choose other names.
    url = os.environ["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DATABASE_URL)
    os.environ["REDIS_KEY_PREFIX"] = os.environ.get("BENCH_REDIS_KEY_PREFIX", "bench:")
    os.environ["CELERY_TASK_DEFAULT_QUEUE"] = os.environ.get("BENCH_CELERY_QUEUE", "bench")
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "false"
    os.environ["FANOUT_PULL_THRESHOLD"] = "1000000"
    if args.quick:
        # Small accounts still exercise the sharded layout.
        os.environ["FOLLOWERS_SHARD_THRESHOLD"] = "2000"
    from bench.db import ensure_database

    ensure_database(url, fresh=args.fresh)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    load_start = loadavg()
    from bench.servers import redis_for_run

    with redis_for_run(args.redis_url) as private_redis:
        return measure(args, argv, url, started, load_start, private_redis=private_redis)


def measure(
    args: argparse.Namespace, argv: list[str] | None, url: str, started: float, load_start: list[float], *, private_redis: bool
) -> int:
    """Everything after the database and Redis exist (see the module docstring)."""

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from actstream import registry

    from bench import data, operations, raw, report
    from feed.models import Note
    from social.redis_keys import followers_zset_key

    scale = data.Scale()
    if args.quick:
        scale = data.Scale(
            limit=30_000, star_followers=1_500, celebrity_followers=3_000, feed_notes=500, background_notes=2_000, depth=1_000
        )

    from django.contrib.auth import get_user_model

    from social.models import Follow

    User = get_user_model()
    registry.register(User)
    registry.register(Note)

    print(
        f"followfeed benchmark: database {settings.DATABASES['default']['NAME']}, Redis prefix {settings.REDIS_KEY_PREFIX!r}",
        flush=True,
    )
    tuning = tune_servers(not args.no_tune)
    results: dict[str, Any] = {
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "make bench" if not argv else "bench/run.py " + " ".join(argv),
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_start": load_start,
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "tuning": tuning,
        "redis_server": "private redis-server started for this run" if private_redis else os.environ["REDIS_URL"],
        "scale": scale.__dict__,
    }
    if not args.skip_scaling:
        print("scaling series (own database, private redis-server) ...", flush=True)
        results["scaling"] = run_scaling(args, scale, url)
    print("data ...", flush=True)
    setup = data.Setup()
    data.ensure_graph(scale, setup)
    heavy = data.most_following(2)
    # The most-followed account other than the reader (on Slashdot the same
    # account tops both lists), so "familiar followers" asks a real question.
    followed = next(user_id for user_id in data.most_followed(3) if user_id not in heavy)
    star = data.ensure_big_account(data.STAR, scale.star_followers, setup)
    celebrity = data.ensure_big_account(data.CELEBRITY, scale.celebrity_followers, setup)
    data.touch_all_users(setup)
    data.ensure_actstream_follows(setup)
    data.ensure_feed(heavy[0], scale, setup)
    results["setup"] = {**setup.__dict__}
    results["servers"] = data.describe_servers()

    import random

    rng = random.Random(5)
    imported = list(User.objects.filter(username__startswith="u").order_by("pk").values_list("pk", flat=True))
    sample = sorted(rng.sample(imported, min(400, len(imported))))
    edges, non_edges = operations.pick_pairs(sample, rng, 100)
    accounts = operations.Accounts(
        followed=followed,
        heavy=heavy,
        star=star,
        celebrity=celebrity,
        reader=heavy[0],
        sample=sample,
        edges=edges,
        non_edges=non_edges,
    )
    results["accounts"] = {k: v for k, v in accounts.__dict__.items() if k not in ("sample", "edges", "non_edges")}
    results["accounts"]["degrees"] = {
        str(user_id): {
            "followers": Follow.objects.filter(followee_id=user_id).count(),
            "following": Follow.objects.filter(follower_id=user_id).count(),
        }
        for user_id in sorted({followed, *heavy, star, celebrity})
    }
    paired = {user_id for pair in edges + non_edges for user_id in pair}
    users = User.objects.in_bulk(sorted({*sample, *paired, followed, *heavy, star, celebrity}))
    fans = list(Follow.objects.filter(followee_id=celebrity).values_list("follower_id", flat=True))
    unlink_inboxes(fans)

    print("raw limits ...", flush=True)
    results["raw"] = {
        "redis_ping": raw.redis_ping(budget_seconds=args.budget).as_dict(),
        "redis_zadd_pipelined": raw.redis_zadd_pipelined().as_dict(),
        "redis_zrevrange_page": raw.redis_zrevrange_page(followers_zset_key(star), budget_seconds=args.budget).as_dict(),
        "mariadb_pk_select": raw.mariadb_pk_select(budget_seconds=args.budget).as_dict(),
    }
    print("operations ...", flush=True)
    ops = operations.follow_graph_operations(
        accounts,
        users,
        depth_cursor=operations.walk_followers(star, scale.depth),
        celebrity_depth_cursor=operations.walk_followers(celebrity, scale.depth),
        depth=scale.depth,
        star_followers=scale.star_followers,
        celebrity_followers=scale.celebrity_followers,
    )
    limit = int(settings.FEED_PAGE_SIZE)
    ops += operations.feed_operations(
        accounts,
        users,
        page20_cursor=operations.walk_home(accounts.reader, 19, limit),
        stream_page20_offset=19 * limit,
        limit=limit,
        celebrity_followers=scale.celebrity_followers,
    )
    try:
        results["operations"] = measure_operations(ops, args.budget)
        print("fan-out ...", flush=True)
        fan_out = measure_fan_out(users[celebrity], runs=3)
    finally:
        data.remove_bench_notes(operations.PUBLISH_PREFIX)
        unlink_inboxes(fans)
        drop_bench_queue()
    results["fan_out"] = fan_out
    results["raw"]["redis_ping_end"] = raw.redis_ping(budget_seconds=min(args.budget, 1.0)).as_dict()
    add_ratios(results["operations"], results["raw"])
    results["machine"]["loadavg_end"] = loadavg()
    results["duration_s"] = round(time.perf_counter() - started, 1)
    results["goals"] = goals(results)
    paths = report.write_all(results, Path(args.out))
    print()
    print(paths["markdown"].read_text())
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
