"""Redis Cluster mode: the client django-redis hands out, and commands routed by hash slot.

On when ``REDIS_URL`` is ``redis+cluster://host:port[,...]`` or ``REDIS_CLUSTER_NODES`` is set
(``ClusterConnectionFactory``). Code correct on both: commands and scripts touch one slot,
pipelines come from ``pipeline(client)`` (a ``RoutedPipeline`` on a cluster), scripts from
``lua``/``queue_script``, per-server work from ``primaries``. Design:
docs/architecture.md#redis-cluster-and-a-read-replica.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar
from urllib.parse import urlparse

import redis
from django_redis.pool import ConnectionFactory
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.commands.core import Script
from redis.crc import key_slot
from redis.retry import Retry

CLUSTER_SCHEME = "redis+cluster://"
SLOTS = 16384

Pipe = Any  # redis.client.Pipeline or RoutedPipeline: both queue commands by name


def cluster_nodes(url: str) -> list[tuple[str, int]]:
    """The seed nodes of ``redis+cluster://host:port[,host:port...]`` as ``[(host, port)]``.

    :raises ValueError: not that scheme, or a node without a numeric port.
    """
    if not url.startswith(CLUSTER_SCHEME):
        raise ValueError(f"not a {CLUSTER_SCHEME} URL: {url!r}")
    found = []
    for part in url[len(CLUSTER_SCHEME) :].strip("/").split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isascii() or not port.isdigit():
            raise ValueError(f"a cluster node is host:port, not {part!r}")
        found.append((host, int(port)))
    return found


class ClusterConnectionFactory(ConnectionFactory):  # type: ignore[misc]
    """django-redis connection factory for Redis Cluster (``OPTIONS["CONNECTION_FACTORY"]``).

    ``OPTIONS["CLUSTER_NODES"]``: the ``[(host, port)]`` seeds (django-redis would read a comma in
    ``LOCATION`` as replicas). One ``RedisCluster`` per process and location.
    """

    _clusters: ClassVar[dict[str, RedisCluster]] = {}

    def connect(self, url: str) -> RedisCluster:
        client = self._clusters.get(url)
        if client is None:
            if url.startswith(CLUSTER_SCHEME):
                nodes = self.options.get("CLUSTER_NODES") or cluster_nodes(url)
            else:  # a redis:// location: that one node is the seed
                parsed = urlparse(url)
                nodes = [(parsed.hostname or "127.0.0.1", parsed.port or 6379)]
            client = RedisCluster(
                startup_nodes=[ClusterNode(host, int(port)) for host, port in nodes],  # type: ignore[no-untyped-call]
                password=self.options.get("PASSWORD"),
                socket_timeout=self.options.get("SOCKET_TIMEOUT"),
                socket_connect_timeout=self.options.get("SOCKET_CONNECT_TIMEOUT"),
                # A dead master must not stall each command through many
                # retries: fail fast, the per-node breaker sends that node's
                # reads to the database until the replica is promoted.
                retry=Retry(NoBackoff(), 1),
                # The surviving slots keep serving while some are uncovered.
                require_full_coverage=False,
            )
            self._clusters[url] = client
        return client

    def disconnect(self, connection: Any) -> None:
        connection.close()


_cluster_types: dict[type, bool] = {}


def is_cluster(client: object) -> bool:
    """Whether ``client`` is a ``RedisCluster``."""
    # Answered once per client type: ``isinstance`` against redis-py's
    # cluster class (a ``Protocol``) is slow, and a page asks several times.
    kind = type(client)
    found = _cluster_types.get(kind)
    if found is None:
        found = _cluster_types[kind] = isinstance(client, RedisCluster)
    return found


def node_client(client: Any, key: str) -> redis.Redis:
    """The plain client of the master serving ``key``'s slot (``client`` itself on one server)."""
    if not is_cluster(client):
        return client  # type: ignore[no-any-return]
    node = client.nodes_manager.get_node_from_slot(client.keyslot(key))
    if node.redis_connection is None:
        client.get_redis_connection(node)
    return node.redis_connection  # type: ignore[no-any-return]


def node_name(client: Any, key: str) -> str:
    """``host:port`` of the master serving ``key``'s slot; ``""`` on one server."""
    if not is_cluster(client):
        return ""
    return str(client.nodes_manager.get_node_from_slot(client.keyslot(key)).name)


def primaries(client: Any) -> list[tuple[str, redis.Redis]]:
    """``[(name, plain client)]`` of every master (one server: ``[("", client)]``)."""
    if not is_cluster(client):
        return [("", client)]
    found = []
    for node in client.get_primaries():
        if node.redis_connection is None:
            client.get_redis_connection(node)
        found.append((str(node.name), node.redis_connection))
    return found


# How long (seconds) a process trusts its table of slot ranges (redis-py
# may move single slots in place after a MOVED reply).
RANGES_TTL_SECONDS = 5.0
_ranges: list[tuple[object, float, list[tuple[int, int, str]]]] = []


def slot_ranges(client: Any) -> list[tuple[int, int, str]]:
    """``[(first slot, last slot, master name)]``: the contiguous runs of slots each master
    serves, from the client's slot map (one server: one run of every slot, name ``""``)."""
    if not is_cluster(client):
        return [(0, SLOTS - 1, "")]
    cache = client.nodes_manager.slots_cache
    now = time.monotonic()
    # Keyed by the slot map itself, held here: a refresh makes a new map, and
    # an id() alone could be the recycled address of the old one.
    if _ranges and _ranges[0][0] is cache and _ranges[0][1] > now:
        return _ranges[0][2]
    found: list[tuple[int, int, str]] = []
    for slot in range(SLOTS):
        nodes = cache.get(slot)
        name = str(nodes[0].name) if nodes else ""
        if found and found[-1][2] == name and found[-1][1] == slot - 1:
            found[-1] = (found[-1][0], slot, name)
        else:
            found.append((slot, slot, name))
    _ranges[:] = [(cache, now + RANGES_TTL_SECONDS, found)]
    return found


def range_start(client: Any, key: str) -> int:
    """The first slot of the run of slots (``slot_ranges``) that holds ``key``."""
    ranges = slot_ranges(client)
    index = bisect.bisect_right([start for start, _, _ in ranges], slot_of(key)) - 1
    return ranges[max(0, index)][0]


def refresh(client: Any) -> None:
    """Re-read the slot map (after MOVED, or a node that stopped answering)."""
    if is_cluster(client):
        try:
            client.nodes_manager.initialize()
        except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException, OSError):
            pass  # the next command tries again


_slot_tags: list[str] = []


def slot_tag(slot: int) -> str:
    """The shortest decimal string that hashes to ``slot``: ``f"{{{slot_tag(s)}}}"`` in a key puts
    the key on slot ``s`` (a key per slot, e.g. the mirror's sentinels)."""
    if not _slot_tags:
        table: list[str | None] = [None] * SLOTS
        missing, number = SLOTS, 0
        while missing:
            text = str(number)
            found = key_slot(text.encode())
            if table[found] is None:
                table[found] = text
                missing -= 1
            number += 1
        _slot_tags.extend(tag for tag in table if tag is not None)
    return _slot_tags[slot]


def slot_of(key: str) -> int:
    """The hash slot of ``key`` (its hash tag's, when it has one)."""
    return int(key_slot(key.encode()))


# An id no account has, to see where a key function puts the id's hash tag.
_PROBE_ID = 2**62 + 12345


def tag_template(build: Callable[[int], str]) -> tuple[str, str]:
    """``(head, tail)`` such that ``build(i) == head + "{" + str(i) + "}" + tail``: scripts take these
    and ids instead of every key.

    :raises ValueError: ``build``'s keys carry no ``{id}`` hash tag.
    """
    key = build(_PROBE_ID)
    head, tag, tail = key.partition(f"{{{_PROBE_ID}}}")
    if not tag:
        raise ValueError(f"{build.__qualname__} makes keys without an id hash tag: {key!r}")
    return head, tail


class RoutedPipeline:
    """A pipeline over a cluster: each command goes to a pipeline of the master of its first key;
    ``execute()`` runs one per master (after a failure, commands for other masters may have run).
    """

    def __init__(self, client: RedisCluster) -> None:
        self.client = client
        self._pipes: dict[str, redis.client.Pipeline] = {}
        self._order: list[tuple[str, int]] = []

    def _queue(self, key: str, command: Callable[[redis.client.Pipeline], object]) -> RoutedPipeline:
        name = node_name(self.client, key)
        pipe = self._pipes.get(name)
        if pipe is None:
            pipe = self._pipes[name] = node_client(self.client, key).pipeline(transaction=False)
        command(pipe)
        self._order.append((name, len(pipe.command_stack) - 1))
        return self

    def __getattr__(self, command: str) -> Callable[..., RoutedPipeline]:
        def queue(key: str, *args: Any, **kwargs: Any) -> RoutedPipeline:
            return self._queue(key, lambda pipe: getattr(pipe, command)(key, *args, **kwargs))

        return queue

    def zintercard(self, numkeys: int, keys: Sequence[str], limit: int = 0) -> RoutedPipeline:
        # The key count comes first: route by the first key.
        return self._queue(keys[0], lambda pipe: pipe.zintercard(numkeys, list(keys), limit=limit))

    def queue_script(self, script: Script, keys: Sequence[str], args: Sequence[Any]) -> RoutedPipeline:
        return self._queue(keys[0], lambda pipe: script(keys=list(keys), args=list(args), client=pipe))

    def queue_eval(self, source: str, keys: Sequence[str], args: Sequence[Any]) -> RoutedPipeline:
        return self._queue(keys[0], lambda pipe: pipe.eval(source, len(keys), *keys, *args))

    def __len__(self) -> int:
        return len(self._order)

    def execute(self) -> list[Any]:
        """Run the queued commands; the replies in queue order (MOVED/ASK replies are re-sent through the cluster client).

        :raises: the first other Redis error of any command (after re-reading the slot map).
        """
        replies: dict[str, list[Any]] = {}
        try:
            for name, pipe in self._pipes.items():
                stack = list(pipe.command_stack)
                scripts = {script.sha: script for script in pipe.scripts}
                answers = replies[name] = pipe.execute(raise_on_error=False)
                moved = [index for index, answer in enumerate(answers) if isinstance(answer, redis.exceptions.AskError)]
                if moved:
                    refresh(self.client)
                for index in moved:
                    answers[index] = self._send_again(stack[index], scripts)
            failed = next((answer for answers in replies.values() for answer in answers if isinstance(answer, Exception)), None)
            if failed is not None:
                raise failed
        except (redis.exceptions.RedisError, OSError):
            refresh(self.client)
            raise
        finally:
            self._pipes = {}
        ordered = [replies[name][index] for name, index in self._order]
        self._order = []
        return ordered

    def _send_again(self, queued: Any, scripts: dict[str, Script]) -> Any:
        args, options = queued
        if str(args[0]).upper() == "EVALSHA" and args[1] in scripts:
            # The new master may not have the script cached: send its source.
            args = ("EVAL", scripts[args[1]].script, *args[2:])
        try:
            return self.client.execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except redis.exceptions.ResponseError as exc:  # a script's own error, returned like the pipeline's
            return exc


def pipeline(client: Any) -> Pipe:
    """A non-transactional pipeline of ``client``: redis-py's on one server, a ``RoutedPipeline``
    on a cluster (see the module docstring)."""
    if is_cluster(client):
        return RoutedPipeline(client)
    return client.pipeline(transaction=False)


_scripts: dict[str, Script] = {}


def lua(source: str) -> Script:
    """The ``Script`` of Lua ``source``, one per source: called with ``client=`` (a client or a
    plain pipeline) it runs EVALSHA there, loading the script on that server first if needed."""
    found = _scripts.get(source)
    if found is None:
        # Bytes: the SHA needs no client's encoder, so one Script serves every server.
        found = _scripts[source] = Script(None, source.encode())  # type: ignore[arg-type]
    return found


def queue_eval(pipe: Pipe, source: str, keys: Sequence[str], args: Sequence[Any]) -> None:
    """Queue Lua ``source`` as an EVAL (keys of one slot) on either kind of pipeline.

    For small hot scripts: a pipeline holding a ``Script`` costs a SCRIPT EXISTS round trip first.
    """
    if isinstance(pipe, RoutedPipeline):
        pipe.queue_eval(source, keys, args)
    else:
        pipe.eval(source, len(keys), *keys, *args)


def queue_script(pipe: Pipe, script: Script, keys: Sequence[str], args: Sequence[Any]) -> None:
    """Queue ``script`` (keys of one slot) on either kind of pipeline."""
    if isinstance(pipe, RoutedPipeline):
        pipe.queue_script(script, keys, args)
    else:
        script(keys=list(keys), args=list(args), client=pipe)
