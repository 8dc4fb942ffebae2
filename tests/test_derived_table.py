"""The table of derived state (``core.derived``): complete, true to the code, and shown in the docs.

Each change of the table is made here through the services, and its
transaction must record every outbox kind the table names for it.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from django.utils.module_loading import import_string

from core import derived, outbox
from core.derived import Change, Kinds, ReadTime
from core.models import OutboxEntry
from feed.services import list_create, list_members_add
from social import controls, services
from social.models import FollowImport, Mute
from users.models import User
from users.services import user_set_active

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
START, END = "<!-- derived-table:start -->", "<!-- derived-table:end -->"


class TestTheTable:
    def test_every_structure_has_a_cell_for_every_change(self):
        structures = derived.table()

        assert {s.name for s in structures} >= {
            "follow mirror and counts",
            "inboxes and author outboxes",
            "notification rows",
            "notification groups and unread counters",
            "who to follow and its reasons",
            "directory rankings",
            "block and mute sets",
            "import jobs",
        }
        assert {s.name: s.missing() for s in structures} == {s.name: [] for s in structures}

    def test_every_kind_is_registered_and_every_function_exists(self):
        for structure in derived.table():
            assert callable(import_string(structure.reconcile)), structure.name
            for cells in structure.cells.values():
                for cell in cells:
                    if isinstance(cell, Kinds):
                        for name in cell.names:
                            assert outbox.kind_named(name).name == name
                    elif isinstance(cell, ReadTime):
                        assert callable(import_string(cell.function)), cell.function

    def test_the_docs_show_the_table_as_the_code_declares_it(self):
        text = DOC.read_text()
        shown = text[text.index(START) + len(START) : text.index(END)].strip()

        assert shown == derived.markdown().strip(), "run: manage.py derived_table --write"


def _make(change: Change, people: dict[str, User]) -> None:
    """Make ``change`` between ``a`` (the actor) and ``b``; the set-up before it is done already."""
    a, b = people["a"], people["b"]
    if change in (Change.FOLLOW, Change.REQUEST_MADE):
        services.follow_create(actor=a, followee_id=b.pk)
    elif change in (Change.UNFOLLOW, Change.REQUEST_WITHDRAWN):
        services.follow_delete(actor=a, followee_id=b.pk)
    elif change == Change.REQUEST_APPROVED:
        controls.follow_request_approve(actor=b, requester_id=a.pk)
    elif change == Change.REQUEST_REJECTED:
        controls.follow_request_reject(actor=b, requester_id=a.pk)
    elif change == Change.FOLLOWER_REMOVED:
        controls.follower_remove(actor=b, follower_id=a.pk)
    elif change == Change.BLOCK:
        controls.block_create(actor=b, target_id=a.pk)
    elif change == Change.UNBLOCK:
        controls.block_delete(actor=b, target_id=a.pk)
    elif change == Change.MUTE:
        controls.mute_create(actor=a, target_id=b.pk)
    elif change == Change.UNMUTE:
        Mute.objects.filter(muter=a, muted=b).update(expires_at=timezone.now() - timedelta(seconds=1))
        controls.mutes_expire()
    elif change == Change.PRIVACY_ON:
        controls.account_privacy_set(actor=b, private=True)
    elif change == Change.PRIVACY_OFF:
        controls.account_privacy_set(actor=b, private=False)
    elif change in (Change.DEACTIVATION, Change.REACTIVATION):
        user_set_active(user=b, is_active=change == Change.REACTIVATION)
    elif change == Change.DELETION:
        b.delete()
    else:  # pragma: no cover - a new change needs its line here
        raise AssertionError(change)


def _set_up(change: Change, people: dict[str, User]) -> None:
    """What must stand before ``change``: a follows b (or asked to) and lists it, a mute, a block, b private..."""
    a, b = people["a"], people["b"]
    private = change in (
        Change.REQUEST_MADE,
        Change.REQUEST_APPROVED,
        Change.REQUEST_REJECTED,
        Change.REQUEST_WITHDRAWN,
        Change.PRIVACY_OFF,
    )
    if private:
        controls.account_privacy_set(actor=b, private=True)
    if change not in (Change.FOLLOW, Change.REQUEST_MADE, Change.UNBLOCK):
        services.follow_create(actor=a, followee_id=b.pk)  # a follow, or a request when b is private
        services.follow_create(actor=b, followee_id=a.pk)
        if not private:
            crew = list_create(owner=a, title="crew")  # a's list holds b
            list_members_add(list_=crew, account_ids=[b.pk])
    if change == Change.UNBLOCK:
        controls.block_create(actor=b, target_id=a.pk)
    if change == Change.UNMUTE:
        controls.mute_create(actor=a, target_id=b.pk, duration=timedelta(hours=1))
    if change == Change.REACTIVATION:
        FollowImport.objects.create(user=b, usernames=[a.username], total=1)  # paused while b is away
        user_set_active(user=b, is_active=False)
    if change == Change.DELETION:
        controls.mute_create(actor=b, target_id=a.pk)  # a control of a pair, and b keeps its line in a's notifications


CHANGES: list[Change] = list(Change)


@pytest.mark.django_db
@pytest.mark.parametrize("change", CHANGES, ids=[c.name.lower() for c in CHANGES])
def test_a_change_records_every_kind_the_table_names_for_it(change, user_factory, django_capture_on_commit_callbacks):
    people = {"a": user_factory(), "b": user_factory()}
    with django_capture_on_commit_callbacks(execute=True):
        _set_up(change, people)
    last = OutboxEntry.objects.order_by("-pk").values_list("pk", flat=True).first() or 0

    with django_capture_on_commit_callbacks(execute=True):
        _make(change, people)

    recorded = set(OutboxEntry.objects.filter(pk__gt=last).values_list("kind", flat=True))
    named = {name for s in derived.table() for cell in s.cells[change] if isinstance(cell, Kinds) for name in cell.names}
    assert named - recorded == set(), f"{change}: the table names kinds its transaction did not record"
