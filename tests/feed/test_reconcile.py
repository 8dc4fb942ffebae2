"""Inbox reconcile: drift behind the application's back is found exactly and repaired."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command

from feed import redis_keys
from feed.models import InboxReconcileRun
from feed.reconcile import reconcile_inboxes
from tests.support.accounts import make_user
from tests.support.consistency import feed_differences
from tests.support.feed import inbox, inbox_ids

pytestmark = pytest.mark.django_db

BASE_MS = 1_700_000_000_000


@pytest.fixture
def readers(follow: Any, publish: Any) -> dict[str, Any]:
    """Three maintained readers of two authors, three notes each."""
    a, b, c = make_user("a"), make_user("b"), make_user("c")
    x, y = make_user("x"), make_user("y")
    for reader in (a, b, c):
        follow(reader, x)
        follow(reader, y)
    notes = [publish(author, f"{author.username}{i}") for i in range(3) for author in (x, y)]
    return {"a": a, "b": b, "c": c, "x": x, "y": y, "notes": notes}


def run(*argv: str) -> str:
    out = StringIO()
    call_command("reconcile_feeds", *argv, stdout=out, verbosity=0)
    return out.getvalue()


class TestReconcileInboxes:
    def test_clean_inboxes_report_no_drift(self, readers: dict[str, Any]) -> None:
        report = reconcile_inboxes()

        assert (report.readers_checked, report.drift, report.readers_repaired) == (5, 0, 0)

    def test_missing_extra_and_rescored_notes_are_counted_exactly_and_repaired(
        self, readers: dict[str, Any], redis_client: Any
    ) -> None:
        a, b, c = readers["a"], readers["b"], readers["c"]
        first, second = readers["notes"][0], readers["notes"][1]
        redis_client.zrem(redis_keys.inbox_key(a.pk), first.pk)  # missing
        redis_client.zadd(redis_keys.inbox_key(b.pk), {"999999999": 1, "junk": 2})  # two extra
        redis_client.zadd(redis_keys.inbox_key(c.pk), {str(second.pk): 5})  # score wrong
        expected = {reader: inbox(redis_client, reader) for reader in (b, c)}

        report = reconcile_inboxes()
        again = reconcile_inboxes()

        assert report.as_dict() == {
            "readers_checked": 5,
            "readers_drifted": 3,
            "notes_missing": 1,
            "notes_extra": 2,
            "scores_wrong": 1,
            "readers_repaired": 3,
            "lists_drifted": 0,
            "last_user_id": readers["y"].pk,
        }
        assert expected != {reader: inbox(redis_client, reader) for reader in (b, c)}
        assert again.drift == 0
        assert feed_differences([a.pk, b.pk, c.pk]) == {}

    def test_a_dry_run_repairs_nothing(self, readers: dict[str, Any], redis_client: Any) -> None:
        a = readers["a"]
        redis_client.zrem(redis_keys.inbox_key(a.pk), readers["notes"][0].pk)
        before = inbox_ids(redis_client, a)

        report = reconcile_inboxes(repair=False)

        assert (report.notes_missing, report.readers_repaired) == (1, 0)
        assert inbox_ids(redis_client, a) == before

    def test_an_inbox_that_is_not_maintained_is_not_checked(self, readers: dict[str, Any], redis_client: Any) -> None:
        a = readers["a"]
        redis_client.delete(redis_keys.inbox_synced_key(a.pk))
        redis_client.zadd(redis_keys.inbox_key(a.pk), {"999999999": 1})

        report = reconcile_inboxes()

        assert (report.readers_checked, report.drift) == (4, 0)  # a reads the database anyway

    def test_one_reader_and_a_sample(self, readers: dict[str, Any]) -> None:
        one = reconcile_inboxes(user_id=readers["a"].pk)
        none = reconcile_inboxes(sample=0.000001, seed=1)

        assert one.readers_checked == 1
        assert none.readers_checked == 0

    def test_notes_of_a_deleted_or_hidden_note_left_behind_are_extra(self, readers: dict[str, Any], redis_client: Any) -> None:
        from feed.models import Note

        note = readers["notes"][-1]
        Note.objects.filter(pk=note.pk).update(is_hidden=True)  # the retract never ran

        report = reconcile_inboxes()

        assert (report.notes_extra, report.readers_drifted, report.readers_repaired) == (3, 3, 3)
        assert all(note.pk not in inbox_ids(redis_client, readers[name]) for name in "abc")


class TestNoFalseDrift:
    """What an inbox holds at and below its floor may differ from the truth with nothing wrong
    (pages read that part from the database); a pulled author's notes delivered before it was
    pulled stay until the next rebuild (pages merge its outbox anyway)."""

    @pytest.fixture
    def full(self, follow: Any, publish: Any, settings: Any) -> dict[str, Any]:
        """A reader of one author whose inbox is at a cap of 4, its floor set by the trim."""
        settings.INBOX_MAX_LEN = 4
        reader, author = make_user("r"), make_user("w")
        follow(reader, author)
        notes = [publish(author, at_ms=BASE_MS + i) for i in range(6)]
        return {"reader": reader, "author": author, "notes": notes}

    def test_a_note_deleted_from_a_full_inbox(self, full: dict[str, Any], run_commits: Any, redis_client: Any) -> None:
        from feed.services import note_delete

        newest = full["notes"][-1]
        run_commits(lambda: note_delete(note=newest, actor=full["author"]))

        assert len(inbox_ids(redis_client, full["reader"])) == 3  # the truth is 4 notes, one below the floor
        assert reconcile_inboxes(repair=False).drift == 0

    def test_equal_times_cut_at_the_cap(self, follow: Any, publish: Any, settings: Any, redis_client: Any) -> None:
        settings.INBOX_MAX_LEN = 3
        reader, author = make_user("r"), make_user("w")
        follow(reader, author)
        publish(author, at_ms=BASE_MS)
        while len(str(publish(author, at_ms=BASE_MS).pk)) < 2:  # ids of one length: bytes order = id order
            pass
        tied = [publish(author, at_ms=BASE_MS + 1), publish(author, at_ms=BASE_MS + 1)]
        newer = [publish(author, at_ms=BASE_MS + 2), publish(author, at_ms=BASE_MS + 3)]

        held = inbox_ids(redis_client, reader)
        assert held[:2] == [newer[1].pk, newer[0].pk] and len(held) == 3 and held[2] in {n.pk for n in tied}
        assert reconcile_inboxes(repair=False).drift == 0

    def test_a_followee_pulled_since_its_notes_arrived(self, follow: Any, publish: Any, settings: Any, redis_client: Any) -> None:
        reader, author, other = make_user("r"), make_user("w"), make_user("o")
        follow(reader, author)
        early = publish(author, at_ms=BASE_MS)
        settings.FANOUT_PULL_THRESHOLD = 2
        follow(other, author)
        publish(author, at_ms=BASE_MS + 1)  # its fan-out finds 2 followers: pulled from now on

        assert redis_client.sismember(redis_keys.pull_authors_key(), str(author.pk))
        assert early.pk in inbox_ids(redis_client, reader)
        assert reconcile_inboxes(repair=False).drift == 0

    def test_an_emptied_inbox_is_still_drift(self, readers: dict[str, Any], redis_client: Any) -> None:
        redis_client.delete(redis_keys.inbox_key(readers["a"].pk))

        report = reconcile_inboxes(repair=False)

        assert (report.readers_drifted, report.notes_missing) == (1, 6)


class TestCommand:
    def test_prints_the_figures_and_records_the_run(self, readers: dict[str, Any], redis_client: Any) -> None:
        redis_client.zrem(redis_keys.inbox_key(readers["a"].pk), readers["notes"][0].pk)

        figures = json.loads(run("--json"))

        assert {k: figures[k] for k in ("readers_checked", "readers_drifted", "notes_missing", "readers_repaired")} == {
            "readers_checked": 5,
            "readers_drifted": 1,
            "notes_missing": 1,
            "readers_repaired": 1,
        }
        stored = InboxReconcileRun.objects.get(pk=figures["run"])
        assert stored.finished_at is not None and stored.notes_missing == 1

    def test_a_dry_run_that_finds_drift_exits_3(self, readers: dict[str, Any], redis_client: Any) -> None:
        redis_client.zrem(redis_keys.inbox_key(readers["a"].pk), readers["notes"][0].pk)

        with pytest.raises(SystemExit) as exit_:
            run("--dry-run")

        assert exit_.value.code == 3

    @pytest.mark.parametrize("argv", [["--user", "999999999"], ["--batch", "0"], ["--sample", "2"], ["--sample", "x"]])
    def test_bad_arguments_are_errors_that_change_nothing(self, argv: list[str], readers: dict[str, Any]) -> None:
        from django.core.management.base import CommandError

        with pytest.raises((CommandError, SystemExit)):
            run(*argv)

        assert InboxReconcileRun.objects.count() == 0

    def test_runs_nightly_after_the_graph(self) -> None:
        schedule = settings.CELERY_BEAT_SCHEDULE

        assert schedule["reconcile-inboxes-nightly"]["task"] == "feed.tasks.feed_inboxes_reconcile"
        assert (
            schedule["reconcile-inboxes-nightly"]["schedule"].hour,
            schedule["reconcile-social-cache-nightly"]["schedule"].hour,
        ) == (
            {4},
            {3},
        )

    def test_the_nightly_task_resumes_an_interrupted_run(self, readers: dict[str, Any]) -> None:
        from feed.tasks import feed_inboxes_reconcile

        InboxReconcileRun.objects.create(last_user_id=readers["b"].pk)

        figures = feed_inboxes_reconcile()

        assert figures["readers_checked"] == 3  # c, x and y: after the checkpoint
        assert InboxReconcileRun.objects.get().finished_at is not None
