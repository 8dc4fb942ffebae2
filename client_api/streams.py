"""Mastodon's streaming API as server-sent events, served by the ASGI process (``config.asgi``
under uvicorn): ``GET /api/v1/streaming/user`` (events ``update``, ``delete``, ``notification``
and ``:thump`` heartbeats), ``/api/v1/streaming/list?list=ID`` (``update``, ``delete``) and
``/api/v1/streaming/health``.

One Redis pub/sub connection per process (``Hub``) listens on the channels of every open stream
(``core.redis_keys.stream_channel``, and the channels of the pulled authors a reader follows) and
hands each message to the streams that wait on it. A stream formats an event when it sends it,
from the database, as the REST API does, and drops an ``update`` its reader's home feed would not
show now. Design: docs/architecture.md#live-updates-streaming; the API: docs/api.md#streaming.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlparse

import redis
import redis.asyncio as aioredis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from core import redis_keys as core_keys
from core.cluster import cluster_nodes
from core.errors import InvalidInput
from core.parsing import parse_id
from core.responses import JsonResponse
from core.streaming import DELETE, NOTIFICATION, UPDATE, Event
from feed import selectors as feed_selectors
from feed import services as feed_services
from users.models import User

from . import formatting, selectors
from .http import DISABLED, INVALID_TOKEN, OUT_OF_SCOPE, bearer, error
from .scopes import allows

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Seconds between two attempts to reach Redis again after the subscriber's connection failed.
RECONNECT_SECONDS = 0.5
# Messages waiting per stream before the oldest are dropped (a stuck client must not hold memory).
QUEUE_SIZE = 256
# Put on every stream's queue once the hub listens again after losing Redis: replay from the
# last event sent, as a reconnection with Last-Event-ID does.
RESYNC = "resync"


def _subscriber() -> aioredis.Redis:
    """An asyncio client of the server the hub subscribes on: ``REDIS_URL``, or a cluster's first
    seed (a plain PUBLISH reaches the subscribers of every node of a cluster)."""
    url = str(settings.REDIS_URL)
    if bool(settings.REDIS_CLUSTER):
        host, port = cluster_nodes(url)[0]
        return aioredis.Redis(host=host, port=port, socket_keepalive=True)
    return aioredis.Redis.from_url(url, socket_keepalive=True)


class Hub:
    """The process's one pub/sub connection: ``listeners`` maps a channel to the queues of the
    streams that wait on it; ``run`` reads messages and puts each on those queues."""

    def __init__(self) -> None:
        self.listeners: dict[str, set[asyncio.Queue[Event | str]]] = defaultdict(set)
        self.pubsub: Any = None
        self.task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()

    def start(self) -> None:
        """Start ``run`` on the running loop, once."""
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self.run())

    async def subscribe(self, channels: list[str], queue: asyncio.Queue[Event | str]) -> None:
        """Let ``queue`` receive the messages of ``channels`` (subscribing those new to the process)."""
        self.start()
        new = [channel for channel in channels if not self.listeners.get(channel)]
        for channel in channels:
            self.listeners[channel].add(queue)
        if new and self.pubsub is not None and self.ready.is_set():
            with contextlib.suppress(*_REDIS_ERRORS):
                # A failure here is the reader loop's too: it subscribes every channel again.
                await self.pubsub.subscribe(*new)

    async def unsubscribe(self, channels: list[str], queue: asyncio.Queue[Event | str]) -> None:
        """Stop ``queue``'s messages of ``channels``; a channel nobody waits on is unsubscribed."""
        gone = []
        for channel in channels:
            waiting = self.listeners.get(channel)
            if waiting is not None:
                waiting.discard(queue)
                if not waiting:
                    del self.listeners[channel]
                    gone.append(channel)
        if gone and self.pubsub is not None and self.ready.is_set():
            with contextlib.suppress(*_REDIS_ERRORS):
                await self.pubsub.unsubscribe(*gone)

    def _hand(self, channel: str, item: Event | str) -> None:
        for queue in list(self.listeners.get(channel, ())):
            _put(queue, item)

    async def run(self) -> None:
        """Listen until cancelled; after a lost connection, subscribe every channel again and tell
        every stream to replay what it may have missed."""
        lost = False
        while True:
            client = _subscriber()
            try:
                self.pubsub = client.pubsub(ignore_subscribe_messages=True)
                await self.pubsub.ping()
                if self.listeners:
                    await self.pubsub.subscribe(*self.listeners)
                self.ready.set()
                # A stream that subscribed while the line above was awaited saw the hub not ready.
                late = [channel for channel in self.listeners if channel.encode() not in self.pubsub.channels]
                if late:
                    await self.pubsub.subscribe(*late)
                if lost:
                    for queues in list(self.listeners.values()):
                        for queue in list(queues):
                            _put(queue, RESYNC)
                    lost = False
                while True:
                    if not self.pubsub.subscribed:
                        # Nothing to read until a stream subscribes.
                        await asyncio.sleep(0.05)
                        continue
                    message = await self.pubsub.get_message(timeout=1.0)
                    if message is None or message.get("type") != "message":
                        continue
                    event = Event.decode(message["data"])
                    channel = message["channel"].decode() if isinstance(message["channel"], bytes) else message["channel"]
                    if event is not None:
                        self._hand(channel, event)
            except asyncio.CancelledError:
                raise
            except _REDIS_ERRORS as exc:
                logger.warning("streaming: Redis pub/sub lost (%s); reconnecting", exc)
                self.ready.clear()
                lost = True
                await asyncio.sleep(RECONNECT_SECONDS)
            finally:
                with contextlib.suppress(Exception):
                    await client.aclose()


_REDIS_ERRORS: tuple[type[BaseException], ...] = (redis.RedisError, OSError, ConnectionError)


def _put(queue: asyncio.Queue[Event | str], item: Event | str) -> None:
    if queue.full():
        # The oldest goes: a stream this far behind replays from its last id on RESYNC anyway.
        queue.get_nowait()
    queue.put_nowait(item)


_hubs: dict[int, Hub] = {}


def hub() -> Hub:
    """The hub of the running event loop (one per process and loop)."""
    loop = asyncio.get_running_loop()
    found = _hubs.get(id(loop))
    if found is None:
        found = _hubs[id(loop)] = Hub()
    return found


def _database(function: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """``function`` run on the event loop's shared thread pool, not a thread of its request: a
    stream lives for hours, and a thread (with a database connection) per stream would not let
    one process hold thousands."""
    return sync_to_async(function, thread_sensitive=False)


# --- authentication -----------------------------------------------------------------


def _token_user(raw: str, scope: str) -> tuple[User | None, str | None, int]:
    """``(user, None, 200)`` for a live token with ``scope``, else ``(None, message, status)``."""
    token = selectors.access_token(raw)
    if token is None or token.user is None:
        return None, INVALID_TOKEN, 401
    if not token.user.is_active:
        return None, DISABLED, 403  # as every other endpoint answers a deactivated account's token
    if not allows(token.scope.split(), scope):
        return None, OUT_OF_SCOPE, 403
    return token.user, None, 200


def _still_allowed(raw: str | None, scope: str, reader_id: int) -> bool:
    """Whether a stream opened with the token ``raw`` (None: the site's session) for ``scope`` may go
    on: the token is live with the scope and its account active (the session's account active)."""
    if raw:
        user, message, _ = _token_user(raw, scope)
        return message is None and user is not None and user.pk == reader_id
    return User.objects.filter(pk=reader_id, is_active=True).exists()


async def _reader(request: HttpRequest, scope: str = "read:statuses") -> tuple[User | None, JsonResponse | None]:
    """The stream's reader from its token (header or ``access_token``, needing ``scope``) or the site's session."""
    raw = bearer(request)
    if raw:
        user, message, status = await _database(_token_user)(raw, scope)
        return user, (error(message, status) if message else None)
    session_user = await request.auser()
    if isinstance(session_user, User) and session_user.is_active:
        return session_user, None
    return None, error("Error: Missing access token", 401)


def _cors(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
    """Let a page of the same host on another port (``make run``'s site) read the stream with its
    cookie; any other origin gets no CORS header (a token client needs none)."""
    origin = request.headers.get("Origin")
    if origin and urlparse(origin).hostname == request.get_host().rsplit(":", 1)[0].strip("[]"):
        response["Access-Control-Allow-Origin"] = origin
        response["Access-Control-Allow-Credentials"] = "true"
        response["Vary"] = "Origin"
    return response


# --- the events -----------------------------------------------------------------------


def _frame(event: str, data: str, event_id: int | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n"


@dataclass(frozen=True)
class Timeline:
    """What one stream sends: ``read``, the timeline's pages (the replay's read); ``channels``,
    where its live events come from; ``shown(note_id)``, the note of a live ``update`` when the
    timeline shows it now (else None); ``notifications``, whether notifications are sent too;
    ``allowed()``, whether its credentials still hold (set by ``_stream``)."""

    reader: User
    read: selectors.Reader
    channels: list[str]
    shown: Callable[[int], Any]
    notifications: bool
    allowed: Callable[[], bool] = lambda: True


def _replay(request: HttpRequest, timeline: Timeline, after: int) -> list[tuple[int, str]]:
    """The timeline's notes newer than note id ``after`` (the read its REST timeline makes),
    oldest first, as ``(note id, frame)``."""
    limit = int(settings.STREAMING_REPLAY_LIMIT)
    try:
        notes, _ = selectors.timeline_window(timeline.read, max_id=None, since_id=None, min_id=after, limit=limit)
    except InvalidInput:
        # Too far behind to find the notes just after ``after``: the newest ones instead.
        notes, _ = selectors.timeline_window(timeline.read, max_id=None, since_id=after, min_id=None, limit=limit)
    ordered = sorted(notes, key=lambda note: note.pk)
    return [
        (note.pk, _frame(UPDATE, json.dumps(shape), note.pk))
        for note, shape in zip(ordered, formatting.statuses_json_of(request, ordered))
    ]


def _newest_id(timeline: Timeline) -> int:
    """The id of the newest note of the timeline now (0: none)."""
    notes, _ = selectors.timeline_window(timeline.read, max_id=None, since_id=None, min_id=None, limit=1)
    return max((note.pk for note in notes), default=0)


def _render(request: HttpRequest, timeline: Timeline, event: Event) -> str | None:
    """The frame of ``event`` for the timeline's reader, or None when the timeline would not show it now."""
    if event.kind == DELETE:
        if not selectors.stream_delete_shown(reader=timeline.reader, note_id=event.object_id):
            return None
        return _frame(DELETE, str(event.object_id))
    if event.kind == UPDATE:
        note = timeline.shown(event.object_id)
        if note is None:
            return None
        return _frame(UPDATE, json.dumps(formatting.statuses_json_of(request, [note])[0]), note.pk)
    if event.kind == NOTIFICATION and timeline.notifications:
        row = selectors.notification_of(recipient_id=timeline.reader.pk, notification_id=event.object_id)
        if row is None:
            return None
        return _frame(NOTIFICATION, json.dumps(formatting.notification_json(request, row)))
    return None


def _home(reader: User) -> Timeline:
    """The user stream: the home feed (the reader's own channel and those of the pulled authors it
    follows, read when the stream opens) and notifications. Opening it is a visit to the home feed:
    fan-out delivers to (and so announces on the channel of) a maintained inbox only."""
    feed_services.feed_visit(user=reader)
    channels = [
        core_keys.stream_channel(reader.pk),
        *(core_keys.author_stream_channel(author_id) for author_id in selectors.followed_pull_authors(user_id=reader.pk)),
    ]
    return Timeline(
        reader=reader,
        read=selectors.home_with_own(user=reader),
        channels=channels,
        shown=lambda note_id: selectors.stream_note(reader=reader, note_id=note_id),
        notifications=True,
    )


def _list(reader: User, list_id: int) -> Timeline | None:
    """The list stream of ``reader``'s list ``list_id`` (None: not its list): the channels of the
    members when the stream opens; an update is sent while its author is a member the list shows."""
    if feed_selectors.list_of(owner_id=reader.pk, list_id=list_id) is None:
        return None

    def shown(note_id: int) -> Any:
        note = selectors.stream_note(reader=reader, note_id=note_id)
        if note is None or note.author_id not in feed_selectors.list_member_ids_database(list_id=list_id):
            return None
        return note

    members = feed_selectors.list_member_ids_database(list_id=list_id)
    return Timeline(
        reader=reader,
        read=lambda cursor, limit: feed_selectors.list_timeline(reader_id=reader.pk, list_id=list_id, cursor=cursor, limit=limit),
        channels=[core_keys.author_stream_channel(member) for member in sorted(members)],
        shown=shown,
        notifications=False,
    )


async def _events(request: HttpRequest, timeline: Timeline, after: int | None) -> AsyncIterator[str]:
    """A stream: a replay of what came after note ``after`` (None: nothing), then live events and
    a heartbeat comment every ``STREAMING_HEARTBEAT_SECONDS`` of silence."""
    queue: asyncio.Queue[Event | str] = asyncio.Queue(maxsize=QUEUE_SIZE)
    channels = timeline.channels
    the_hub = hub()
    await the_hub.subscribe(channels, queue)
    # Updates sent, so a replay and a live message of the same note send it once.
    sent: set[int] = set()
    try:
        yield ":)\n\n"  # the headers go out at once; Mastodon's streaming server greets so too
        last = after if after is not None else await _database(_newest_id)(timeline)
        if after is not None:
            for note_id, frame in await _database(_replay)(request, timeline, after):
                sent.add(note_id)
                last = max(last, note_id)
                yield frame
        heartbeat = float(settings.STREAMING_HEARTBEAT_SECONDS)
        check_every = float(settings.STREAMING_CREDENTIALS_CHECK_SECONDS)
        checked = time.monotonic()
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), timeout=min(heartbeat, check_every))
            except TimeoutError:
                item = None
            if time.monotonic() - checked >= check_every:
                if not await _database(timeline.allowed)():
                    return  # a revoked token or a deactivated account: the stream ends, as Mastodon's does
                checked = time.monotonic()
            if item is None:
                yield ":thump\n\n"
                continue
            if item == RESYNC:
                for note_id, frame in await _database(_replay)(request, timeline, last):
                    if note_id not in sent:
                        sent.add(note_id)
                        last = max(last, note_id)
                        yield frame
                continue
            assert isinstance(item, Event)
            if item.kind == UPDATE and item.object_id in sent:
                continue
            rendered = await _database(_render)(request, timeline, item)
            if rendered is None:
                continue
            if item.kind == UPDATE:
                sent.add(item.object_id)
                last = max(last, item.object_id)
            yield rendered
    finally:
        await the_hub.unsubscribe(channels, queue)


def _last_event_id(request: HttpRequest) -> int | None:
    """``Last-Event-ID`` (or the ``last_event_id`` query parameter, for a first EventSource).

    :raises InvalidInput: not a note id.
    """
    raw = request.headers.get("Last-Event-ID") or request.GET.get("last_event_id")
    if raw in (None, ""):
        return None
    return parse_id(raw, name="Last-Event-ID")


async def _stream(request: HttpRequest, scope: str, timeline_of: Callable[[User], Timeline | None]) -> HttpResponseBase:
    """The server-sent events of the timeline ``timeline_of(reader)`` (None: 404; ``InvalidInput``:
    400), for a reader authorised with ``scope`` (or the session), from ``Last-Event-ID`` when
    given; the credentials are checked first (no token: 401 whatever else is wrong)."""
    if request.method not in ("GET", "HEAD"):
        return _cors(request, error("Method not allowed", 405))
    reader, failure = await _reader(request, scope)
    if failure is not None or reader is None:
        return _cors(request, failure or error(INVALID_TOKEN, 401))
    try:
        after = _last_event_id(request)
        timeline = await _database(timeline_of)(reader)
    except InvalidInput as exc:
        return _cors(request, error(exc.message, 400))
    if timeline is None:
        return _cors(request, error("Record not found", 404))
    timeline = replace(timeline, allowed=partial(_still_allowed, bearer(request), scope, reader.pk))
    if not isinstance(request, ASGIRequest):
        # Under gunicorn (WSGI) an endless stream would hold a worker for good: streams are the
        # streaming process's (STREAMING_API_URL, or a proxy routing /api/v1/streaming to it).
        return _cors(request, error("Streaming is served by the streaming process", 503))
    response = StreamingHttpResponse(_events(request, timeline, after), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    # A proxy in front (nginx) must pass each event on at once, not buffer them.
    response["X-Accel-Buffering"] = "no"
    return _cors(request, response)


# No CSRF check: a stream writes nothing, and a POST must get Mastodon's 405, not the site's 403 page.
@csrf_exempt
async def user(request: HttpRequest) -> HttpResponseBase:
    """GET /api/v1/streaming/user: the reader's home feed and notifications as server-sent events."""
    return await _stream(request, "read:statuses", _home)


@csrf_exempt
async def list_stream(request: HttpRequest) -> HttpResponseBase:
    """GET /api/v1/streaming/list?list=ID: the timeline of the reader's list ``ID`` as server-sent
    events (``update``, ``delete``); a missing or malformed ``list`` is a 400, another's list a 404."""
    return await _stream(request, "read:lists", lambda reader: _list(reader, parse_id(request.GET.get("list"), name="list")))


@csrf_exempt
async def health(request: HttpRequest) -> HttpResponse:
    """GET /api/v1/streaming/health: ``OK`` (the streaming process answers)."""
    return HttpResponse("OK", content_type="text/plain")
