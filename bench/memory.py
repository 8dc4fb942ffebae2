"""Redis memory of the follow-graph structures: the sum of ``MEMORY USAGE`` over their keys.

``MEMORY USAGE key SAMPLES 0`` counts every element of the value plus the
key's own overhead (key string, object header, main dictionary entry), so
the sum over the follow-graph keys is what the follow graph costs Redis,
without the allocator's fragmentation or other data in the same server.

Encodings decide most of it. Redis keeps a small sorted set as one
listpack and a small set of integers as one intset (compact arrays, about
10 and 4-8 bytes per member); past ``zset-max-listpack-entries`` (default
128) and ``set-max-intset-entries`` (default 512) members it converts them
to a skiplist plus hash table and a hash table (dozens of bytes per member).
On Slashdot most lists have fewer than 3000 members, so raising both limits
to ``TUNED`` keeps nearly every key compact. The price: a listpack is
searched linearly, so ZADD/ZRANK/ZSCORE on a 3000-member listpack costs a
few microseconds more than on a skiplist; ranges (pages) are as fast.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

# The encoding limits the benchmark (and scripts/ensure_services.sh) use.
TUNED: dict[str, str] = {"zset-max-listpack-entries": "3000", "set-max-intset-entries": "3000"}
# The follow-graph key patterns of social.redis_keys (per account, every layout).
PATTERNS = ("follow:{", "following:z:{", "followers:{", "followers:z:{", "followers:layout:{")


def encoding_config(client: Any) -> dict[str, str]:
    """The server's current encoding limits (``CONFIG GET``) for sets and sorted sets."""
    found: dict[str, str] = {}
    for name in ("zset-max-listpack-entries", "zset-max-listpack-value", "set-max-intset-entries", "set-max-listpack-entries"):
        for key, value in client.config_get(name).items():
            found[str(key)] = str(value)
    return found


def set_encoding_config(client: Any, values: dict[str, str]) -> dict[str, str]:
    """``CONFIG SET`` each of ``values``; returns what the server had before (only the names set)."""
    before = encoding_config(client)
    for name, value in values.items():
        client.config_set(name, value)
    return {name: before.get(name, "") for name in values}


def follow_graph_memory(client: Any, prefix: str, *, batch: int = 1000) -> dict[str, Any]:
    """Sum of ``MEMORY USAGE`` over every follow-graph key under ``prefix`` (SCAN, never KEYS).

    :returns: ``{"keys", "bytes", "encodings": {"zset/listpack": n, ...}}``.
    """
    total = 0
    keys = 0
    encodings: Counter[str] = Counter()
    wanted = tuple(f"{prefix}{pattern}".encode() for pattern in PATTERNS)

    def flush(chunk: list[bytes]) -> None:
        nonlocal total, keys
        pipe = client.pipeline(transaction=False)
        for key in chunk:
            pipe.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0")
            pipe.type(key)
            pipe.object("encoding", key)
        replies = pipe.execute()
        for index in range(len(chunk)):
            size, kind, encoding = replies[3 * index : 3 * index + 3]
            if size is None:  # removed meanwhile
                continue
            total += int(size)
            keys += 1
            kind = kind.decode() if isinstance(kind, bytes) else str(kind)
            encoding = encoding.decode() if isinstance(encoding, bytes) else str(encoding)
            encodings[f"{kind}/{encoding}"] += 1

    pending: list[bytes] = []
    for key in client.scan_iter(match=f"{prefix}follow*", count=batch):
        if key.startswith(wanted) and not key.endswith(b":rebuild"):
            pending.append(key)
        if len(pending) >= batch:
            flush(pending)
            pending = []
    if pending:
        flush(pending)
    return {"keys": keys, "bytes": total, "encodings": dict(sorted(encodings.items()))}
