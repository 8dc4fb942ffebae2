"""Live updates: the streaming process (uvicorn, ``config.asgi``) against a real Celery worker,
Redis and MariaDB. Mastodon.py 2.3.3's ``stream_user`` gets ``update``, ``delete`` and
``notification``; a reader sees only what its home feed shows; a stream outlives a Redis restart
and a reconnection with ``Last-Event-ID`` replays what it missed."""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from typing import Any

import pytest
from mastodon import Mastodon, StreamListener
from oauth2_provider.models import AccessToken

from core.redis import get_redis
from feed import redis_keys as feed_keys
from feed.models import DIRECT, Note
from feed.services import list_create, list_members_add, list_members_remove, note_create, note_delete
from social import redis_keys as social_keys
from social.controls import mute_create
from social.services import follow_create, follow_delete
from social.visibility import muted_ids
from tests.client_api.conftest import make_app, make_token
from tests.support.accounts import make_user
from tests.support.faults import DELIVERY_TIMEOUT, RedisServer, point_at, wait_until
from tests.support.feed import fanned_out
from tests.support.streaming import EventReader, Frame, StreamingServer, open_stream

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def streaming(worker: Any) -> Iterator[StreamingServer]:
    """A worker on this test's queue and the streaming process, both on this test's Redis prefix."""
    worker()
    server = StreamingServer()
    server.start()
    yield server
    server.stop()


def token_for(user: Any, name: str) -> str:
    app = make_app(name=f"stream {name}")
    make_token(user, app, token=f"{name}-stream-token")
    return f"{name}-stream-token"


def follow(follower: Any, followee: Any) -> None:
    follow_create(actor=follower, followee_id=followee.pk)
    wait_until(lambda: fanned_in(follower, followee), timeout=DELIVERY_TIMEOUT, what="the follow applied")


def fanned_in(follower: Any, followee: Any) -> bool:
    return bool(get_redis().sismember(social_keys.following_set_key(follower.pk), str(followee.pk)))


def publish(author: Any, body: str) -> Note:
    note = note_create(author=author, body=body)
    wait_until(lambda: fanned_out(note), timeout=DELIVERY_TIMEOUT, what=f"{body!r} fanned out")
    return note


def frames_until(stream: EventReader, last: Note) -> list[Frame]:
    """The events ``stream`` sends up to and with the ``update`` of ``last`` (heartbeats left out)."""
    heard = []
    while True:
        frame = stream.frames.get(timeout=DELIVERY_TIMEOUT)
        if frame.event:
            heard.append(frame)
        if frame.event == "update" and frame.id == str(last.pk):
            return heard


class Listener(StreamListener):
    """Mastodon.py's listener that keeps what it hears, in order."""

    def __init__(self) -> None:
        self.heard: queue.Queue[tuple[str, Any]] = queue.Queue()

    def on_update(self, status: Any) -> None:
        self.heard.put(("update", status))

    def on_delete(self, status_id: Any) -> None:
        self.heard.put(("delete", status_id))

    def on_notification(self, notification: Any) -> None:
        self.heard.put(("notification", notification))

    def next(self, kind: str) -> Any:
        while True:
            heard_kind, payload = self.heard.get(timeout=DELIVERY_TIMEOUT)
            if heard_kind == kind:
                return payload


class TestMastodonPyStreamUser:
    def test_update_delete_and_notification_arrive(self, streaming: StreamingServer) -> None:
        alice, bob, charlie = make_user("alice"), make_user("bob"), make_user("charlie")
        follow(alice, bob)
        api = Mastodon(access_token=token_for(alice, "alice"), api_base_url=streaming.url, version_check_mode="none")
        listener = Listener()
        handle = api.stream_user(listener, run_async=True)
        try:
            wait_until(handle.is_receiving, timeout=10, what="the stream open")
            note = publish(bob, "live note")
            update = listener.next("update")
            rest = api.timeline_home()[0]
            note_delete(note=note, actor=bob)
            deleted = listener.next("delete")
            follow_create(actor=charlie, followee_id=alice.pk)
            notification = listener.next("notification")
        finally:
            handle.close()

        assert str(update.id) == str(note.pk)
        assert update == rest  # the Status exactly as the REST API gives it
        assert str(deleted) == str(note.pk)
        assert notification.type == "follow" and str(notification.account.id) == str(charlie.pk)

    def test_the_instance_points_clients_at_the_streaming_process(self, streaming: StreamingServer) -> None:
        api = Mastodon(api_base_url=streaming.url, version_check_mode="none")

        assert api.instance_v1().urls.streaming_api == f"ws://127.0.0.1:{streaming.port}"


class TestWhatAReaderSees:
    def test_no_update_of_an_author_the_reader_unfollowed(self, streaming: StreamingServer) -> None:
        alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
        follow(alice, bob)
        follow(alice, carol)
        with open_stream(streaming.url, token_for(alice, "alice")) as stream:
            follow_delete(actor=alice, followee_id=bob.pk)
            wait_until(lambda: not fanned_in(alice, bob), timeout=DELIVERY_TIMEOUT, what="the unfollow applied")
            after = publish(bob, "after the unfollow")
            marker = publish(carol, "from carol")

            seen = stream.next_event("update", timeout=DELIVERY_TIMEOUT)
            rest = stream.drain()

        assert json.loads(seen.data)["id"] == str(marker.pk)
        assert str(after.pk) not in {json.loads(frame.data)["id"] for frame in rest if frame.event == "update"}

    def test_a_private_accounts_note_never_reaches_a_non_follower(self, streaming: StreamingServer) -> None:
        eve, dave, carol = make_user("eve"), make_user("dave", approve_followers=True), make_user("carol")
        follow(eve, carol)
        with open_stream(streaming.url, token_for(eve, "eve")) as stream:
            private = publish(dave, "followers only")
            marker = publish(carol, "public")

            seen = stream.next_event("update", timeout=DELIVERY_TIMEOUT)
            rest = stream.drain()

        assert json.loads(seen.data)["id"] == str(marker.pk)
        assert all(str(private.pk) not in frame.data for frame in rest)

    def test_a_direct_note_and_its_deletion_reach_its_authors_stream_alone(self, streaming: StreamingServer) -> None:
        alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
        follow(alice, bob)
        follow(alice, carol)
        with (
            open_stream(streaming.url, token_for(alice, "alice")) as follower,
            open_stream(streaming.url, token_for(bob, "bob")) as author,
        ):
            direct = note_create(author=bob, body="only me", visibility=DIRECT)
            own = author.next_event("update", timeout=DELIVERY_TIMEOUT)
            note_delete(note=direct, actor=bob)
            own_gone = author.next_event("delete", timeout=DELIVERY_TIMEOUT)
            marker = publish(carol, "after the direct note")
            heard = frames_until(follower, marker)

        assert own.id == str(direct.pk)
        assert own_gone.data == str(direct.pk)
        assert [(frame.event, frame.id) for frame in heard] == [("update", str(marker.pk))]

    def test_a_reader_of_the_api_alone_gets_updates(self, streaming: StreamingServer) -> None:
        # Never signed in to the site: no visit made its inbox maintained before the stream opened.
        alice, bob = make_user("alice", active=False), make_user("bob")
        follow(alice, bob)
        with open_stream(streaming.url, token_for(alice, "alice")) as stream:
            wait_until(
                lambda: get_redis().exists(feed_keys.inbox_synced_key(alice.pk)), timeout=DELIVERY_TIMEOUT, what="the inbox kept"
            )
            note = publish(bob, "to a reader of the API")
            seen = stream.next_event("update", timeout=DELIVERY_TIMEOUT)

        assert seen.id == str(note.pk)

    def test_a_reconnection_with_last_event_id_replays_the_missed_notes(self, streaming: StreamingServer) -> None:
        alice, bob = make_user("alice"), make_user("bob")
        follow(alice, bob)
        token = token_for(alice, "alice")
        with open_stream(streaming.url, token) as stream:
            first = publish(bob, "seen live")
            last_id = stream.next_event("update", timeout=DELIVERY_TIMEOUT).id
        missed = [publish(bob, f"missed {i}") for i in range(3)]

        with open_stream(streaming.url, token, **{"Last-Event-ID": str(last_id)}) as stream:
            replayed = [stream.next_event("update", timeout=DELIVERY_TIMEOUT) for _ in missed]

        assert last_id == str(first.pk)
        assert [frame.id for frame in replayed] == [str(note.pk) for note in missed]


class TestPulledAuthors:
    def test_a_pulled_authors_note_reaches_its_followers_streams_and_not_a_muters(self, queue: str, worker: Any) -> None:
        worker(FANOUT_PULL_THRESHOLD="1")
        alice, bob, carol, dave = make_user("alice"), make_user("bob"), make_user("carol"), make_user("dave")
        follow(alice, bob)
        follow(carol, bob)
        follow(carol, dave)
        publish(bob, "makes bob a pulled author")  # one follower already reaches the threshold
        assert str(bob.pk).encode() in get_redis().smembers(feed_keys.pull_authors_key())
        mute_create(actor=carol, target_id=bob.pk)
        wait_until(lambda: bob.pk in muted_ids(user_id=carol.pk), timeout=DELIVERY_TIMEOUT, what="the mute mirrored")
        streaming = StreamingServer()
        streaming.start()
        try:
            with (
                open_stream(streaming.url, token_for(alice, "alice")) as follower,
                open_stream(streaming.url, token_for(carol, "carol")) as muter,
            ):
                pulled = publish(bob, "no inbox gets this")
                marker = publish(dave, "carol's marker")

                seen = follower.next_event("update", timeout=DELIVERY_TIMEOUT)
                muter_seen = muter.next_event("update", timeout=DELIVERY_TIMEOUT)
                muter_rest = muter.drain()
        finally:
            streaming.stop()

        assert seen.id == str(pulled.pk)
        assert muter_seen.id == str(marker.pk)
        assert all(frame.id != str(pulled.pk) for frame in muter_rest)


class TestCredentials:
    def test_a_revoked_tokens_stream_ends_and_another_goes_on(self, worker: Any) -> None:
        worker()
        alice, bob = make_user("alice"), make_user("bob")
        follow(alice, bob)
        fast = {"STREAMING_HEARTBEAT_SECONDS": "0.5", "STREAMING_CREDENTIALS_CHECK_SECONDS": "0.5"}
        streaming = StreamingServer(extra_env=fast)
        streaming.start()
        try:
            with (
                open_stream(streaming.url, token_for(alice, "alice")) as revoked,
                open_stream(streaming.url, token_for(bob, "bob")) as kept,
            ):
                AccessToken.objects.filter(token="alice-stream-token").delete()
                wait_until(revoked.ended.is_set, timeout=DELIVERY_TIMEOUT, what="the revoked token's stream ended")
                wait_until(lambda: any(frame.comment == "thump" for frame in kept.drain()), timeout=10, what="a heartbeat")
                still_open = not kept.ended.is_set()
        finally:
            streaming.stop()

        assert still_open


class TestRedisRestart:
    def test_the_stream_stays_up_and_loses_no_note_the_feed_shows(self, queue: str, worker: Any, settings: Any) -> None:
        server = RedisServer()
        server.start()
        streaming = StreamingServer(redis_url=server.url, extra_env={"STREAMING_HEARTBEAT_SECONDS": "1"})
        try:
            point_at(settings, server)
            worker(REDIS_URL=server.url)
            alice, bob = make_user("alice"), make_user("bob")
            follow(alice, bob)
            streaming.start()
            with open_stream(streaming.url, token_for(alice, "alice")) as stream:
                before = publish(bob, "before the restart")
                live = stream.next_event("update", timeout=DELIVERY_TIMEOUT)

                server.kill()
                # Committed while Redis is down: no inbox gets it, the feed shows it from the database.
                during = note_create(author=bob, body="while Redis was down")
                server.start()

                replayed = stream.next_event("update", timeout=DELIVERY_TIMEOUT)
                stream.drain()
                wait_until(lambda: any(frame.comment == "thump" for frame in stream.drain()), timeout=10, what="a heartbeat")
        finally:
            streaming.stop()
            server.stop()

        assert live.id == str(before.pk)
        assert replayed.id == str(during.pk)


class TestListStream:
    def test_a_members_note_arrives_on_the_list_stream_and_others_do_not(self, streaming: StreamingServer) -> None:
        alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
        follow(alice, bob)
        follow(alice, carol)
        # Exclusive: bob's notes leave alice's home feed, but not the list's stream.
        only_bob = list_create(owner=alice, title="bob only", exclusive=True)
        list_members_add(list_=only_bob, account_ids=[bob.pk])
        api = Mastodon(access_token=token_for(alice, "alice"), api_base_url=streaming.url, version_check_mode="none")
        listener = Listener()
        handle = api.stream_list(only_bob.pk, listener, run_async=True)
        try:
            wait_until(handle.is_receiving, timeout=10, what="the stream open")
            other = publish(carol, "not a member's")
            member = publish(bob, "a member's")
            update = listener.next("update")
            rest = api.timeline_list(only_bob.pk)[0]
            note_delete(note=member, actor=bob)
            deleted = listener.next("delete")
        finally:
            handle.close()

        assert str(update.id) == str(member.pk) != str(other.pk)
        assert update == rest  # as the REST list timeline gives it
        assert str(deleted) == str(member.pk)
        assert str(member.pk) not in {str(status.id) for status in api.timeline_home()}

    def test_a_member_removed_from_the_list_sends_no_further_update(self, streaming: StreamingServer) -> None:
        alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
        follow(alice, bob)
        follow(alice, carol)
        both = list_create(owner=alice, title="both")
        list_members_add(list_=both, account_ids=[bob.pk, carol.pk])
        with open_stream(streaming.url, token_for(alice, "alice"), path=f"/api/v1/streaming/list?list={both.pk}") as stream:
            list_members_remove(list_=both, account_ids=[bob.pk])
            gone = publish(bob, "after leaving the list")
            marker = publish(carol, "still a member")

            seen = stream.next_event("update", timeout=DELIVERY_TIMEOUT)
            rest = stream.drain()

        assert json.loads(seen.data)["id"] == str(marker.pk)
        assert str(gone.pk) not in {json.loads(frame.data)["id"] for frame in rest if frame.event == "update"}
