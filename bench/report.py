"""Write the benchmark's figures: ``results.json`` (everything), ``results.md`` (tables), ``results.png`` (chart)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

WAY_LABELS = {
    "redis": "followfeed (Redis)",
    "database": "followfeed, database only",
    "offset": "plain Django OFFSET",
    "actstream": "django-activity-stream",
}
WAY_COLORS = {"redis": "#d62728", "database": "#1f77b4", "offset": "#9467bd", "actstream": "#7f7f7f"}


def print_and_save(results: dict[str, Any], out: str | None) -> None:
    """Print ``results`` as indented JSON, and write the same to ``out`` when given."""
    text = json.dumps(results, indent=2)
    print(text)
    if out:
        Path(out).write_text(text + "\n")


def fmt_us(value: float | None) -> str:
    """A latency for humans: ``42 µs``, ``1.3 ms``, ``2.1 s``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if value < 1000:
        return f"{value:.0f} µs"
    if value < 1_000_000:
        return f"{value / 1000:.1f} ms" if value < 100_000 else f"{value / 1000:.0f} ms"
    return f"{value / 1e6:.2f} s"


def fmt_ratio(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.1f}x" if value < 100 else f"{value:.0f}x"


def fmt_rate(value: float) -> str:
    return f"{value:,.0f}"


def accounts_line(results: dict[str, Any]) -> str:
    """Which accounts the operations use, with their degrees."""
    accounts = results["accounts"]
    degrees = accounts.get("degrees", {})

    def of(user_id: int, side: str) -> str:
        return f"{degrees.get(str(user_id), {}).get(side, 0):,}"

    a, b = accounts["heavy"]
    return (
        f"Accounts: the reader of the home feed and the common-follows pair follow {of(a, 'following')} and "
        f"{of(b, 'following')} accounts; familiar followers of an account with {of(accounts['followed'], 'followers')} "
        f"followers; pages of a {of(accounts['star'], 'followers')}-follower account (one key) and a "
        f"{of(accounts['celebrity'], 'followers')}-follower account (followers in {results['servers'].get('followers_shards', 16)} shard keys); "
        "counts and is-following over 400 random accounts and 200 pairs, follow + unfollow over 100 pairs that do not follow."
    )


def markdown(results: dict[str, Any]) -> str:
    """The Markdown tables of ``results`` (operations, raw limits, fan-out, scaling, goals)."""
    raw = results["raw"]
    lines = [
        (
            f"Run {results['generated_at']} on {results['machine']['cpus']} cores "
            f"(load average {results['machine']['loadavg_start'][0]:.1f} at the start, "
            f"{results['machine']['loadavg_end'][0]:.1f} at the end), {results['servers']['redis_version'] and 'Redis ' + results['servers']['redis_version']}, "
            f"MariaDB {results['servers']['mariadb_version']}; graph {results['scale']['dataset']} "
            f"({results['setup']['edges']:,} follows, {results['setup']['users']:,} accounts) plus a "
            f"{results['scale']['star_followers']:,}-follower and a {results['scale']['celebrity_followers']:,}-follower account."
        ),
        "",
        accounts_line(results),
        "",
        'Latency per call, p50 / p99 (wall clock, one Python process). "x faster" compares p50s.',
        "",
        "| operation | followfeed (Redis) | followfeed, database only | django-activity-stream | Redis vs database only | Redis vs activity-stream | Redis / PING |",
        "|---|---|---|---|---|---|---|",
    ]
    for op in results["operations"]:
        ways = op["ways"]

        def cell(way: str, ways: dict[str, Any] = ways) -> str:
            data = ways.get(way)
            return f"{fmt_us(data['p50_us'])} / {fmt_us(data['p99_us'])}" if data else "–"

        redis = ways.get("redis", {})
        database_cell = cell("database")
        if "offset" in ways:
            database_cell += f" (OFFSET: {fmt_us(ways['offset']['p50_us'])})"
        lines.append(
            f"| {op['title']} | {cell('redis')} | {database_cell} | {cell('actstream')} | "
            f"{fmt_ratio(redis.get('faster_than', {}).get('database'))}"
            + (f" ({fmt_ratio(redis.get('faster_than', {}).get('offset'))} vs OFFSET)" if "offset" in ways else "")
            + f" | {fmt_ratio(redis.get('faster_than', {}).get('actstream'))} | {fmt_ratio(redis.get('ratio_to_ping'))} |"
        )
    fan_out = results.get("fan_out")
    lines += [
        "",
        "Raw limits in the same run: "
        f"Redis PING round trip {fmt_us(raw['redis_ping']['p50_us'])} p50 ({fmt_us(raw['redis_ping']['p99_us'])} p99); "
        f"pipelined ZADD {fmt_rate(raw['redis_zadd_pipelined']['ops_per_s'])} commands/s; "
        + (
            f"ZREVRANGE of a 51-member page with scores {fmt_us(raw['redis_zrevrange_page']['p50_us'])} p50; "
            if "redis_zrevrange_page" in raw
            else ""
        )
        + f"MariaDB primary-key SELECT {fmt_us(raw['mariadb_pk_select']['p50_us'])} p50.",
    ]
    if fan_out:
        lines += [
            "",
            (
                f"Fan-out of one note to {fan_out['followers']:,} followers, every one an active reader (the fan-out task's body, "
                f"{fan_out['runs']} runs): {fan_out['seconds_p50']:.2f} s p50, "
                f"{fmt_rate(fan_out.get('inbox_writes_per_s', fan_out['followers_per_s']))} inbox writes/s "
                f"= {fan_out['ratio_to_raw_zadd']:.0%} of the raw pipelined ZADD rate measured right before "
                f"({fmt_rate(fan_out.get('raw_zadd_per_s', 0))}/s). "
                "The database-only way and django-activity-stream deliver at read time instead (the home feed rows)."
            ),
        ]
    scaling = results.get("scaling") or {}
    if scaling.get("series"):
        lines += [
            "",
            (
                "Scaling series (uniform samples of the graph, fresh tables and an empty private Redis for each; "
                f"encodings {', '.join(f'{k} {v}' for k, v in scaling['redis_tuned'].items())}):"
            ),
            "",
            "| share of graph | follows | import | rebuild | reconcile (digest) | Redis bytes per edge |",
            "|---|---|---|---|---|---|",
        ]
        for row in sorted(scaling["series"], key=lambda r: r["fraction"]):
            memory = f"{row['memory']['bytes_per_edge']:.1f}"
            if "memory_defaults" in row:
                memory += f" (Redis defaults: {row['memory_defaults']['bytes_per_edge']:.1f})"
            lines.append(
                f"| {row['fraction']:.0%} | {row['edges']:,} | {row['import']['seconds']:.1f} s ({fmt_rate(row['import']['edges_per_s'])}/s) "
                f"| {row['rebuild']['seconds']:.1f} s ({fmt_rate(row['rebuild']['edges_per_s'])}/s) "
                f"| {row['reconcile']['seconds']:.1f} s (drift {row['reconcile']['drift']}) | {memory} |"
            )
    lines += ["", "| goal | measured | target | met |", "|---|---|---|---|"]
    for goal in results["goals"]:
        verdict = "yes" if goal["met"] else "**no**"
        if goal.get("info"):
            verdict = f"({'yes' if goal['met'] else 'no'}: for comparison, not a goal)"
        lines.append(f"| {goal['goal']} | {goal['measured']} | {goal['target']} | {verdict} |")
    return "\n".join(lines) + "\n"


def chart(results: dict[str, Any], path: Path) -> None:
    """A PNG: p50 latency per operation and way (log scale, raw limits as lines), and the scaling series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    operations = results["operations"]
    scaling = (results.get("scaling") or {}).get("series") or []
    fig = plt.figure(figsize=(12, 10 if scaling else 7))
    grid = fig.add_gridspec(2 if scaling else 1, 2, height_ratios=[2.2, 1] if scaling else [1])
    ax = fig.add_subplot(grid[0, :])
    ways = [way for way in WAY_LABELS if any(way in op["ways"] for op in operations)]
    height = 0.8 / len(ways)
    for slot, way in enumerate(ways):
        ys, xs = [], []
        for row, op in enumerate(operations):
            if way in op["ways"]:
                ys.append(row + (slot - (len(ways) - 1) / 2) * height)
                xs.append(op["ways"][way]["p50_us"])
        ax.barh(ys, xs, height=height, color=WAY_COLORS[way], label=WAY_LABELS[way])
    raw = results["raw"]
    ax.axvline(raw["redis_ping"]["p50_us"], color="black", linestyle="--", linewidth=1, label="raw: Redis PING round trip")
    ax.axvline(
        raw["mariadb_pk_select"]["p50_us"], color="black", linestyle=":", linewidth=1, label="raw: MariaDB primary-key SELECT"
    )
    ax.set_yticks(range(len(operations)))
    ax.set_yticklabels([op["title"] for op in operations], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("p50 latency per call (µs, log scale)")
    ax.set_title(f"followfeed vs the alternatives on {results['scale']['dataset']} ({results['setup']['edges']:,} follows)")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", which="both", alpha=0.3)
    if scaling:
        rows = sorted(scaling, key=lambda r: r["edges"])
        edges = [r["edges"] / 1000 for r in rows]
        left = fig.add_subplot(grid[1, 0])
        left.plot(edges, [r["import"]["seconds"] for r in rows], "o-", label="import (MariaDB)")
        left.plot(edges, [r["rebuild"]["seconds"] for r in rows], "o-", label="rebuild (Redis mirror)")
        left.plot(edges, [r["reconcile"]["seconds"] for r in rows], "o-", label="reconcile (digest)")
        left.set_xlabel("follows (thousands)")
        left.set_ylabel("seconds")
        left.set_title("Scaling: time", fontsize=10)
        left.legend(fontsize=8)
        left.grid(alpha=0.3)
        right = fig.add_subplot(grid[1, 1])
        right.plot(edges, [r["memory"]["bytes_per_edge"] for r in rows], "o-", color="#d62728", label="tuned encodings")
        defaults = [(r["edges"] / 1000, r["memory_defaults"]["bytes_per_edge"]) for r in rows if "memory_defaults" in r]
        if defaults:
            right.plot(*zip(*defaults), "s", color="#7f7f7f", label="Redis defaults")
        right.axhline(80, color="black", linestyle=":", linewidth=1, label="goal: 80")
        right.set_xlabel("follows (thousands)")
        right.set_ylabel("bytes per follow")
        right.set_ylim(bottom=0)
        right.set_title("Scaling: Redis memory of the follow graph", fontsize=10)
        right.legend(fontsize=8)
        right.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_all(results: dict[str, Any], directory: Path) -> dict[str, Path]:
    """Write the three outputs into ``directory``; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {"json": directory / "results.json", "markdown": directory / "results.md", "chart": directory / "results.png"}
    paths["json"].write_text(json.dumps(results, indent=2, default=str) + "\n")
    paths["markdown"].write_text(markdown(results))
    chart(results, paths["chart"])
    return paths
