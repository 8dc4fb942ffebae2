"""The scaling series: import, rebuild, reconcile and Redis memory per edge at fractions of the graph.

Run by ``bench/run.py`` in a process of its own (its own database and its
own Redis), or alone::

    .venv/bin/python bench/scaling.py --out /tmp/scaling.json [--fractions 1,0.5,0.25,0.1]

For each fraction f (largest first) the follows table and the accounts are
emptied and a uniform sample of the graph is imported: the edges whose
``crc32("<a>:<b>") mod 10000 < f * 10000`` (the same edges in every run,
each fraction a subset of the larger ones; f = 1 is the dataset file
itself). Then, on a private ``redis-server`` flushed before each step:

- ``import``: ``datatools.importer.graph_import`` into the empty tables (users
  and follows; the ``load`` path), edges per second;
- ``rebuild``: ``social.rebuild.rebuild_all`` into the empty Redis;
- ``reconcile``: ``social.reconcile.reconcile_all`` (digest check, dry run),
  which must find no drift;
- ``memory``: the sum of ``MEMORY USAGE`` over the follow-graph keys
  (``bench.memory``), per edge, with the tuned encoding limits
  (``bench.memory.TUNED``); at f = 1 also with the server's defaults.

The private server (``redis-server`` on a free port, no persistence) is
stopped at the end. The database is ``<main database>_scale``, created and
migrated when missing (the name must end in ``_scale``: every run empties
its tables); nothing else uses it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FRACTIONS = (1.0, 0.5, 0.25, 0.1)


def sample_file(edges: list[tuple[int, int]], fraction: float, directory: Path) -> tuple[Path, int]:
    """Write the ``fraction`` sample of ``edges`` as an edge list; returns ``(path, edges)``."""
    bound = round(fraction * 10_000)
    kept = [(a, b) for a, b in edges if zlib.crc32(f"{a}:{b}".encode()) % 10_000 < bound]
    path = directory / f"sample-{fraction:g}.txt"
    path.write_text("".join(f"{a}\t{b}\n" for a, b in kept))
    return path, len(kept)


def empty_graph_tables() -> None:
    """Empty the follows, outbox and accounts tables (and everything that points at accounts)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SET SESSION foreign_key_checks = 0")
        try:
            for table in connection.introspection.table_names():
                if table.startswith(("social_", "users_", "feed_", "actstream_", "django_admin_log", "django_session")):
                    cursor.execute(f"TRUNCATE TABLE {connection.ops.quote_name(table)}")
        finally:
            cursor.execute("SET SESSION foreign_key_checks = 1")


def measure_fraction(server: Any, path: Path, edges: int, *, with_defaults: dict[str, str] | None) -> dict[str, Any]:
    """Import ``path`` into empty tables, then rebuild, reconcile and weigh the mirror."""
    from django.conf import settings

    from bench.memory import TUNED, follow_graph_memory, set_encoding_config
    from core.redis import forget_sentinel
    from datatools.importer import graph_import
    from social.rebuild import rebuild_all
    from social.reconcile import reconcile_all

    figures: dict[str, Any] = {"edges": edges}
    empty_graph_tables()
    started = time.perf_counter()
    stats = graph_import(path)
    seconds = time.perf_counter() - started
    figures["import"] = {
        "seconds": round(seconds, 3),
        "edges_per_s": round(stats.edges_inserted / seconds),
        "users_created": stats.users_created,
        "method": stats.method,
    }
    assert stats.edges_inserted == edges, (stats, edges)
    prefix = str(settings.REDIS_KEY_PREFIX)
    if with_defaults is not None:
        set_encoding_config(server.client, with_defaults)
        server.client.flushall()
        forget_sentinel()
        rebuild_all()
        memory = follow_graph_memory(server.client, prefix)
        figures["memory_defaults"] = {**memory, "bytes_per_edge": round(memory["bytes"] / edges, 1), "config": with_defaults}
        set_encoding_config(server.client, TUNED)
    server.client.flushall()
    forget_sentinel()
    used_before = int(server.client.info("memory")["used_memory"])
    started = time.perf_counter()
    rebuilt = rebuild_all()
    seconds = time.perf_counter() - started
    figures["rebuild"] = {"seconds": round(seconds, 3), "edges_per_s": round(rebuilt.edges / seconds), "users": rebuilt.users}
    used_after = int(server.client.info("memory")["used_memory"])
    started = time.perf_counter()
    report = reconcile_all(repair=False)
    seconds = time.perf_counter() - started
    figures["reconcile"] = {
        "seconds": round(seconds, 3),
        "edges_per_s": round(edges / seconds),
        "drift": report.drift,
        "users_checked": report.users_checked,
    }
    memory = follow_graph_memory(server.client, prefix)
    figures["memory"] = {
        **memory,
        "bytes_per_edge": round(memory["bytes"] / edges, 1),
        "used_memory_delta_per_edge": round((used_after - used_before) / edges, 1),
        "config": dict(TUNED),
    }
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scaling series of import, rebuild, reconcile and memory per edge.")
    parser.add_argument("--out", required=True, help="where to write the JSON figures")
    parser.add_argument("--fractions", default=",".join(f"{f:g}" for f in FRACTIONS), help="comma-separated, e.g. 1,0.5,0.25,0.1")
    parser.add_argument("--dataset", default="soc-Slashdot0902.txt.gz")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N rows of the dataset (tests)")
    args = parser.parse_args(argv)
    fractions = sorted((float(f) for f in args.fractions.split(",")), reverse=True)

    from bench.db import database_name, ensure_database

    url = os.environ.setdefault("DATABASE_URL", "mysql://root:@127.0.0.1:3306/followfeed_bench_scale")
    if not database_name(url).endswith("_scale"):
        # Every run empties the accounts and follows tables of this database.
        raise SystemExit(f"the scaling series empties its database; its name must end in _scale, not {database_name(url)}")
    ensure_database(url)
    from bench.servers import PrivateRedis

    server = PrivateRedis()
    try:
        os.environ["REDIS_URL"] = server.url
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
        import django

        django.setup()
        from django.core.management import call_command

        from bench.memory import TUNED, encoding_config, set_encoding_config
        from datatools.datasets import dataset_path
        from datatools.importer import ImportStats, read_edge_columns, unique_edges

        call_command("migrate", verbosity=0, interactive=False)
        defaults = {name: encoding_config(server.client)[name] for name in TUNED}
        set_encoding_config(server.client, TUNED)
        path = dataset_path(args.dataset)
        sources, targets = read_edge_columns(path, args.limit)
        edges = unique_edges(sources, targets, ImportStats())
        series: list[dict[str, Any]] = []
        with tempfile.TemporaryDirectory(prefix="followfeed-scaling-") as directory:
            for fraction in fractions:
                if fraction >= 1.0 and args.limit is None:
                    sample, count = path, len(edges)
                else:
                    sample, count = sample_file(edges, fraction, Path(directory))
                figures = measure_fraction(server, sample, count, with_defaults=defaults if fraction == fractions[0] else None)
                series.append({"fraction": fraction, **figures})
                print(
                    f"  {fraction:>5.0%}: {count:>8,} edges  import {figures['import']['edges_per_s']:>9,}/s  "
                    f"rebuild {figures['rebuild']['edges_per_s']:>9,}/s  reconcile {figures['reconcile']['seconds']:>6.2f}s  "
                    f"{figures['memory']['bytes_per_edge']:>6.1f} B/edge",
                    flush=True,
                )
        result = {
            "dataset": args.dataset,
            "limit": args.limit,
            "redis_version": server.client.info("server")["redis_version"],
            "redis_defaults": defaults,
            "redis_tuned": dict(TUNED),
            "series": series,
        }
        Path(args.out).write_text(json.dumps(result, indent=2))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
