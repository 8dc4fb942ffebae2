"""The private redis-server of the fault tests (``tests.support.faults.RedisServer``) is its own:
another test process's server on the port it picked sends it to another port."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.faults import RedisServer

# They start redis-server processes: Redis is installed.
pytestmark = pytest.mark.services


def test_a_server_whose_port_was_taken_starts_on_another_and_answers_as_itself() -> None:
    first = RedisServer()
    first.start()
    second = RedisServer()
    second.port = first.port  # as if free_port had handed both processes the same port
    try:
        second.start()

        assert second.port != first.port
        assert second.process is not None and first.process is not None
        assert second.client().info("server")["process_id"] == second.process.pid
        assert first.client().info("server")["process_id"] == first.process.pid
    finally:
        second.stop()
        first.stop()


def test_a_restart_keeps_its_port() -> None:
    server = RedisServer()
    server.start()
    port = server.port
    try:
        server.kill()
        server.start()

        assert server.port == port
        assert server.process is not None
        assert server.client().info("server")["process_id"] == server.process.pid
    finally:
        server.stop()


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    server = RedisServer(data_dir=tmp_path / "no such directory")
    first_port = server.port

    with pytest.raises(AssertionError, match="ended") as raised:
        server.start()

    assert "no such directory" in str(raised.value)  # redis-server's own message, from its log
    assert server.port == first_port  # not taken for a busy port
