"""A private Redis Cluster for tests: six redis-server processes (3 masters, 3 replicas) on loopback.

Started from the installed ``redis-server`` with ``cluster-enabled yes``,
each node on a port whose cluster bus port (port + 10000) is free too, and
joined with ``redis-cli --cluster create --cluster-replicas 1``. Nothing is
persisted (no RDB, no AOF): a killed master's data survives only on its
replica, which the cluster promotes (``cluster-node-timeout`` is short so a
failover takes about a second or two).
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from tests.support.commands import redis_server_command

NODE_TIMEOUT_MS = 1000


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_cluster_ports(count: int) -> list[int]:
    """``count`` ports in 20000-44999 whose bus ports (+10000) are free as well."""
    found: list[int] = []
    while len(found) < count:
        port = random.randint(20_000, 44_999)
        if port not in found and _port_free(port) and _port_free(port + 10_000):
            found.append(port)
    return found


@dataclass
class ClusterNode:
    port: int
    process: subprocess.Popen[bytes] | None = None

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2)


class RedisClusterNodes:
    """Six nodes; ``url`` is the ``redis+cluster://`` form the settings take."""

    def __init__(self, nodes: int = 6) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="followfeed-cluster-"))
        self.nodes = [ClusterNode(port) for port in free_cluster_ports(nodes)]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{node.port}" for node in self.nodes[:3])

    def _start_node(self, node: ClusterNode) -> None:
        work = self.directory / str(node.port)
        work.mkdir(exist_ok=True)
        node.process = subprocess.Popen(
            redis_server_command(
                node.port,
                "--dir",
                str(work),
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                str(NODE_TIMEOUT_MS),
                "--cluster-require-full-coverage",
                "no",
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait(lambda: self._pings(node), what=f"node {node.port}")

    def start(self) -> None:
        """Start every node, create the cluster and wait until every node reports it ok."""
        for node in self.nodes:
            self._start_node(node)
        subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "create",
                *(f"127.0.0.1:{node.port}" for node in self.nodes),
                "--cluster-replicas",
                "1",
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.wait_healthy()
        self._wait(lambda: all(self._replicated(node) for node in self.nodes), what="a replica of every master")

    def wait_healthy(self, timeout: float = 30) -> None:
        """Until every running node says ``cluster_state:ok`` and all 16384 slots are served."""
        self._wait(
            lambda: all(self._ok(node) for node in self.nodes if node.process is not None),
            timeout=timeout,
            what="cluster_state ok",
        )

    def masters(self) -> list[ClusterNode]:
        """The nodes that are masters now (after a failover, a former replica among them)."""
        return [node for node in self.nodes if node.process is not None and self._role(node) == "master"]

    def kill(self, node: ClusterNode) -> None:
        """SIGKILL ``node`` (its data is lost; a replica of a master takes over)."""
        if node.process is not None:
            node.process.kill()
            node.process.wait()
            node.process = None

    def wait_failover(self, killed: ClusterNode, timeout: float = 30) -> None:
        """Until the killed master's slots are served by its promoted replica: no running node
        names the killed port as a slot owner and each counts all 16384 slots ok
        (``cluster_state`` alone says ok at once: the failure is noticed only after the node
        timeout, and with ``cluster-require-full-coverage no`` the other slots serve meanwhile)."""

        def promoted() -> bool:
            owners = [self._slot_owners(node) for node in self.nodes if node.process is not None]
            return all(ports and killed.port not in ports for ports in owners) and all(
                self._slots_ok(node) == 16384 for node in self.nodes if node.process is not None
            )

        self._wait(promoted, timeout=timeout, what="failover")

    def restart(self, node: ClusterNode) -> None:
        """Start a killed node again; it rejoins (its nodes.conf is kept) as a replica."""
        self._start_node(node)
        self.wait_healthy()

    def stop(self) -> None:
        for node in self.nodes:
            self.kill(node)
        shutil.rmtree(self.directory, ignore_errors=True)

    # --- probes ---

    @staticmethod
    def _pings(node: ClusterNode) -> bool:
        try:
            return bool(node.client().ping())
        except redis.exceptions.RedisError:
            return False

    @staticmethod
    def _ok(node: ClusterNode) -> bool:
        try:
            info = node.client().cluster("info")
        except redis.exceptions.RedisError:
            return False
        text = info if isinstance(info, str) else str(info)
        return "cluster_state:ok" in text.replace("'", "") or (
            isinstance(info, dict) and info.get("cluster_state") == "ok" and int(info.get("cluster_slots_ok", 0)) == 16384
        )

    @staticmethod
    def _slot_ranges(node: ClusterNode) -> list[list[object]]:
        try:
            reply = node.client().execute_command("CLUSTER SLOTS")
        except redis.exceptions.RedisError:
            return []
        return [list(entry) for entry in reply] if isinstance(reply, list) else []

    @classmethod
    def _slot_owners(cls, node: ClusterNode) -> set[int]:
        """Ports of the masters ``node`` says serve slots."""
        return {int(entry[2][1]) for entry in cls._slot_ranges(node)}  # type: ignore[index]

    @classmethod
    def _replicated(cls, node: ClusterNode) -> bool:
        """Whether ``node`` sees a replica beside every master (a failover needs one)."""
        ranges = cls._slot_ranges(node)
        return bool(ranges) and all(len(entry) >= 4 for entry in ranges)

    @staticmethod
    def _slots_ok(node: ClusterNode) -> int:
        try:
            info = node.client().cluster("info")
        except redis.exceptions.RedisError:
            return 0
        if isinstance(info, dict):
            return int(info.get("cluster_slots_ok", 0))
        fields = dict(line.split(":", 1) for line in str(info).splitlines() if ":" in line)
        return int(fields.get("cluster_slots_ok", 0))

    @staticmethod
    def _role(node: ClusterNode) -> str:
        try:
            return str(node.client().info("replication").get("role", ""))
        except redis.exceptions.RedisError:
            return ""

    @staticmethod
    def _wait(condition, *, timeout: float = 30, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            time.sleep(0.1)
