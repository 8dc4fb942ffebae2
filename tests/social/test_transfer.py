"""Export and import of follows (issue 17): Mastodon's CSV layout, bad files refused whole,
every kind of bad line skipped and reported, re-uploads idempotent, the rate limit waited out."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import cast

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import StreamingHttpResponse
from django.test import Client
from django.utils import timezone

from core.errors import InvalidInput, NotFound
from core.models import OutboxEntry
from core.outbox import drain
from social import controls, services, transfer
from social.models import Follow, FollowImport, FollowRequest
from tests.support.accounts import UserFactory, signed_in

pytestmark = pytest.mark.django_db

HEADER = "Account address,Show boosts,Notify on new posts,Languages\n"


def followees(user):
    return set(Follow.objects.filter(follower=user).values_list("followee__username", flat=True))


class TestExport:
    def test_the_csv_lists_every_followee_in_mastodons_layout(self, alice, bob, charlie, run_commits):
        gone = UserFactory.create(username="gone")
        for target in (bob, charlie, gone):
            run_commits(lambda target=target: services.follow_create(actor=alice, followee_id=target.pk))
        gone.is_active = False
        gone.save()

        response = signed_in(alice).get("/api/follows/export.csv")
        page = signed_in(alice).get("/settings/follows/export.csv")

        assert response.status_code == 200
        assert response["Content-Type"] == "text/csv; charset=utf-8"
        assert response.content.decode() == HEADER + "bob,true,false,\ncharlie,true,false,\n"
        streamed = cast("Iterator[bytes]", cast(StreamingHttpResponse, page).streaming_content)  # a sync view: not async
        assert b"".join(streamed).decode() == response.content.decode()

    def test_signed_out_is_401(self):
        assert Client().get("/api/follows/export.csv").status_code == 401


class TestImport:
    def test_every_kind_of_bad_line_is_skipped_and_reported(self, alice, bob, charlie, user_factory, run_commits, settings):
        settings.CELERY_TASK_ALWAYS_EAGER = True
        deactivated = user_factory(username="sleeper", is_active=False)
        blocker = user_factory(username="blocker")
        private = user_factory(username="private", approve_followers=True)
        run_commits(lambda: controls.block_create(actor=blocker, target_id=alice.pk))
        run_commits(lambda: services.follow_create(actor=alice, followee_id=charlie.pk))
        text = HEADER + "".join(
            f"{name},true,false,\n"
            for name in [
                "bob",
                "nobody_here",
                deactivated.username,
                "blocker",
                "charlie",
                "alice",
                "bad name!",
                "private",
                "@bob",
            ]
        )

        response = run_commits(
            lambda: signed_in(alice).post("/api/follows/import", {"file": SimpleUploadedFile("f.csv", text.encode())})
        )

        job = FollowImport.objects.get()
        assert response.status_code == 202
        assert (job.total, job.position, job.followed, job.finished_at is not None) == (8, 8, 1, True)  # "@bob" is bob again
        assert job.skipped == [
            ["nobody_here", transfer.SKIP_UNKNOWN],
            ["sleeper", transfer.SKIP_INACTIVE],
            ["blocker", transfer.SKIP_BLOCKED],
            ["charlie", transfer.SKIP_FOLLOWING],
            ["alice", transfer.SKIP_SELF],
            ["bad name!", transfer.SKIP_INVALID],
            ["private", transfer.SKIP_REQUESTED],
        ]
        assert followees(alice) == {"bob", "charlie"}
        assert FollowRequest.objects.filter(requester=alice, target=private).exists()
        status = signed_in(alice).get(f"/api/follows/import/{job.pk}").json()["data"]
        assert status["followed"] == 1 and status["finished"] is True and len(status["skipped"]) == 7

    def test_a_plain_list_of_usernames_imports(self, alice, bob, charlie, run_commits, settings):
        settings.CELERY_TASK_ALWAYS_EAGER = True

        run_commits(lambda: signed_in(alice).post("/api/follows/import", data="bob\ncharlie\n\n", content_type="text/plain"))

        assert followees(alice) == {"bob", "charlie"}

    def test_names_are_found_whatever_their_case_as_everywhere(self, alice, bob, charlie, run_commits, settings):
        settings.CELERY_TASK_ALWAYS_EAGER = True

        run_commits(lambda: signed_in(alice).post("/api/follows/import", data="BOB\nCharlie\n", content_type="text/plain"))

        assert followees(alice) == {"bob", "charlie"}

    def test_a_re_upload_follows_nobody_twice(self, alice, bob, charlie, run_commits, settings):
        settings.CELERY_TASK_ALWAYS_EAGER = True
        upload = HEADER + "bob,true,false,\ncharlie,true,false,\n"
        run_commits(lambda: signed_in(alice).post("/api/follows/import", data=upload, content_type="text/csv"))
        entries = OutboxEntry.objects.filter(kind="social.pair").count()

        run_commits(lambda: signed_in(alice).post("/api/follows/import", data=upload, content_type="text/csv"))

        second = FollowImport.objects.order_by("-pk").first()
        assert second is not None
        assert followees(alice) == {"bob", "charlie"}
        assert OutboxEntry.objects.filter(kind="social.pair").count() == entries == 2
        assert (second.followed, [reason for _, reason in second.skipped]) == (0, [transfer.SKIP_FOLLOWING] * 2)

    def test_the_rate_limit_pauses_the_job_which_then_goes_on(self, alice, user_factory, settings, run_commits):
        settings.FOLLOW_RATE = "2/m"
        targets = [user_factory(username=f"target{n}") for n in range(4)]
        job = transfer.follows_import_start(actor=alice, raw="\n".join(t.username for t in targets).encode())

        paused = transfer.follows_import_run(import_id=job.pk)
        job.refresh_from_db()
        settings.FOLLOW_RATE = "100/m"
        waiting = transfer.follows_import_run(import_id=job.pk)  # the drain comes back before the limit lifts
        FollowImport.objects.filter(pk=job.pk).update(waiting_until=timezone.now() - timedelta(seconds=1))  # the window passed
        finished = transfer.follows_import_run(import_id=job.pk)

        assert (paused.done, paused.finished) == (2, False) and paused.wait_seconds >= 1
        assert job.waiting_until is not None
        assert (waiting.done, waiting.finished) == (2, False) and 1 <= waiting.wait_seconds <= paused.wait_seconds + 1
        assert (finished.done, finished.finished) == (4, True)
        assert followees(alice) == {t.username for t in targets}

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            (b"\x89PNG\r\n\x1a\n\x00\x00", "The file is not UTF-8 text."),
            (b"bob\x00\n", "The file is not text (it holds NUL bytes)."),
            (
                b"Name,Email\nbob,b@example.com\n",
                "The columns must be Account address, Show boosts, Notify on new posts, Languages (Mastodon's export), or one username per line.",
            ),
            (
                b"Account address,Email\nbob,x\n",
                "The columns must be Account address, Show boosts, Notify on new posts, Languages (Mastodon's export), or one username per line.",
            ),
            (
                b"bob,charlie\n",
                "The columns must be Account address, Show boosts, Notify on new posts, Languages (Mastodon's export), or one username per line.",
            ),
            (HEADER.encode(), "The file lists no account."),
            (b"\n\n", "The file lists no account."),
            (b"<img src=x onerror=alert(1)>\n", "The file lists no username (one per line, or Mastodon's CSV)."),
            (b'{"usernames": ["u1"]}\n', "The file lists no username (one per line, or Mastodon's CSV)."),
            (b'"unterminated\n', None),
        ],
    )
    def test_a_bad_file_is_400_and_changes_nothing(self, alice, body, message):
        response = signed_in(alice).post("/api/follows/import", {"file": SimpleUploadedFile("f.csv", body)})

        assert response.status_code == 400
        if message:
            assert response.json()["errorMsg"] == message
        assert not FollowImport.objects.exists() and not Follow.objects.exists()

    def test_ten_megabytes_and_a_hundred_thousand_lines_are_refused(self, alice):
        big = signed_in(alice).post("/api/follows/import", {"file": SimpleUploadedFile("f.csv", b"a" * 10 * 1024 * 1024)})
        long = signed_in(alice).post("/api/follows/import", {"file": SimpleUploadedFile("f.csv", b"u\n" * 100_000)})

        assert big.status_code == 400 and big.json()["errorMsg"] == "The file is larger than 1,024 KB."
        assert (
            long.status_code == 400
            and long.json()["errorMsg"] == "The file has 100,000 lines; at most 10,000 accounts can be imported at once."
        )
        assert not FollowImport.objects.exists()

    def test_the_line_limit_counts_accounts_with_or_without_a_header(self, alice, settings):
        settings.FOLLOWS_IMPORT_MAX_LINES = 3
        names = [f"u{n}" for n in range(4)]

        plain = signed_in(alice).post("/api/follows/import", data="\n".join(names), content_type="text/plain")
        csv = signed_in(alice).post(
            "/api/follows/import", data=HEADER + "".join(f"{n},true,false,\n" for n in names), content_type="text/csv"
        )
        fits = transfer.parse_import((HEADER + "".join(f"{n},true,false,\n" for n in names[:3])).encode())

        assert plain.status_code == csv.status_code == 400
        assert plain.json()["errorMsg"] == "The file has 4 lines; at most 3 accounts can be imported at once."
        assert fits == names[:3]
        assert not FollowImport.objects.exists()

    def test_nothing_uploaded_is_400(self, alice):
        assert signed_in(alice).post("/api/follows/import", {}).status_code == 400
        assert signed_in(alice).post("/api/follows/import", data="", content_type="text/csv").status_code == 400

    def test_someone_elses_import_is_404(self, alice, bob):
        job = transfer.follows_import_start(actor=alice, raw=b"bob\n")

        assert signed_in(bob).get(f"/api/follows/import/{job.pk}").status_code == 404
        assert signed_in(bob).get("/api/follows/import/abc").status_code == 400

    @pytest.mark.parametrize(
        ("body", "message"), [(None, "Choose a file to import."), (b"Name,Email\nbob,b@example.com\n", "The columns must be")]
    )
    def test_a_bad_file_on_the_settings_page_is_400_with_the_reason(self, alice, body, message):
        data = {"file": SimpleUploadedFile("f.csv", body)} if body is not None else {}

        response = signed_in(alice).post("/settings/follows/", data)

        assert response.status_code == 400
        assert message in response.content.decode()
        assert not FollowImport.objects.exists()

    def test_the_settings_page_shows_the_progress(self, alice, bob, charlie, run_commits):
        client = signed_in(alice)
        upload = SimpleUploadedFile("f.csv", b"bob\ncharlie\nnobody\n")

        response = client.post("/settings/follows/", {"file": upload})
        page = client.get("/settings/follows/")

        assert response.status_code == 302
        assert b'<progress id="import-progress" max="3" value="0">' in page.content


def send_pending_import(import_id: int, attempts: int = 5) -> None:
    """Make sure the import's entry reached the worker: the product leaves a refused message to
    the drain (no beat runs here), and on CI the broker has reset the test process's first
    publish after the fork-heavy race tests; send it again on fresh connections."""
    import time

    from config.celery_app import app
    from core.tasks import outbox_apply

    entry = OutboxEntry.objects.get(kind="social.follows_import", subject_id=import_id)
    for _ in range(attempts):
        if FollowImport.objects.get(pk=import_id).position or OutboxEntry.objects.filter(pk=entry.pk, attempts__gt=0).exists():
            return
        time.sleep(1.0)
        if FollowImport.objects.get(pk=import_id).position:
            return
        app._pool = None
        app.amqp._producer_pool = None
        try:
            outbox_apply.apply_async(kwargs={"entry_ids": [entry.pk]})
            return
        except Exception:  # noqa: BLE001, S112 - the broker refused again: retried
            continue


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
class TestImportThroughTheWorker:
    def test_an_import_interrupted_by_a_worker_kill_resumes_without_following_anyone_twice(self, queue, worker):
        from tests.support.faults import wait_until

        alice = UserFactory.create(username="alice")
        targets = [UserFactory.create(username=f"target{n:02d}") for n in range(30)]
        first = worker(FOLLOWS_IMPORT_PAUSE_SECONDS="0.1")
        job = transfer.follows_import_start(actor=alice, raw="\n".join(t.username for t in targets).encode())
        send_pending_import(job.pk)

        wait_until(
            lambda: FollowImport.objects.get(pk=job.pk).position >= 5, timeout=60, interval=0.01, what="the import under way"
        )
        first.kill()  # SIGKILL: the task is not acknowledged, RabbitMQ redelivers it
        at_kill = FollowImport.objects.get(pk=job.pk).position
        worker()
        wait_until(lambda: FollowImport.objects.get(pk=job.pk).finished_at is not None, timeout=60, what="the import finished")

        job.refresh_from_db()
        # A social.pair entry's object is the followee: never None (cast for the type checker only).
        pair_entries = [
            cast(int, e)
            for e in OutboxEntry.objects.filter(kind="social.pair", subject_id=alice.pk).values_list("object_id", flat=True)
        ]
        assert 5 <= at_kill < 30
        assert followees(alice) == {t.username for t in targets}
        # A follow and its line's checkpoint commit together: a kill loses neither.
        assert (job.position, job.followed, job.skipped) == (30, 30, [])
        assert sorted(pair_entries) == sorted(t.pk for t in targets)  # one follow per account, none twice


class TestImportRuns:
    def test_a_run_overtaken_by_another_run_of_the_same_import_stops_without_undoing_it(self, alice, user_factory, monkeypatch):
        targets = [user_factory(username=f"t{n}") for n in range(3)]
        job = transfer.follows_import_start(actor=alice, raw="\n".join(t.username for t in targets).encode())
        real = transfer._handle_line

        def other_run_finishes_first(actor, import_id, position):
            # A redelivered message's run handled every line while this one read the checkpoint.
            monkeypatch.setattr(transfer, "_handle_line", real)
            transfer.follows_import_run(import_id=import_id)
            return real(actor, import_id, position)

        monkeypatch.setattr(transfer, "_handle_line", other_run_finishes_first)
        step = transfer.follows_import_run(import_id=job.pk)

        job.refresh_from_db()
        assert (step.finished, step.wait_seconds) == (False, 0)
        assert (job.position, job.followed, job.skipped) == (3, 3, [])  # its checkpoint was not overwritten
        assert followees(alice) == {t.username for t in targets}

    def test_many_bad_lines_keep_a_bounded_list_and_a_count(self, alice):
        names = [f"nobody{n}" for n in range(transfer.SKIPS_KEPT + 20)]
        job = transfer.follows_import_start(actor=alice, raw="\n".join(names).encode())

        transfer.follows_import_run(import_id=job.pk)

        job.refresh_from_db()
        assert job.position == len(names) and job.skipped_count == len(names)
        assert len(job.skipped) == transfer.SKIPS_KEPT

    def test_an_import_whose_account_was_deleted_is_done_and_holds_up_no_other_entry(self, alice, bob, charlie, run_commits):
        job = transfer.follows_import_start(actor=alice, raw=b"bob\n")  # its job never ran
        alice.delete()
        run_commits(lambda: services.follow_create(actor=charlie, followee_id=bob.pk))  # an entry after it
        OutboxEntry.objects.update(attempts=1)  # every task's grace is over

        result = drain()

        assert not FollowImport.objects.filter(pk=job.pk).exists()
        assert OutboxEntry.objects.get(kind="social.follows_import", subject_id=job.pk).applied_at is not None
        assert list(OutboxEntry.objects.filter(applied_at__isnull=True).values_list("kind", flat=True)) == []
        assert (result.stuck, result.redis_down) == (0, False)


def mastodon_file(names: list[str], form: str) -> bytes:
    """A follows file in Mastodon's layout, written as Mastodon writes it (``plain``), with a
    UTF-8 BOM and CR LF line ends (``bom_crlf``), or with every field quoted (``quoted``)."""
    rows = [HEADER.rstrip("\n").split(","), *([name, "true", "false", ""] for name in names)]
    if form == "quoted":
        return "".join(",".join(f'"{cell}"' for cell in row) + "\r\n" for row in rows).encode()
    text = "".join(",".join(row) + "\n" for row in rows)
    if form == "bom_crlf":
        return b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode()
    return text.encode()


FORMS = ["plain", "bom_crlf", "quoted"]


class TestC28FileForms:
    @pytest.mark.parametrize("form", FORMS)
    @pytest.mark.parametrize("through", ["api", "page"])
    def test_three_accounts_at_a_limit_of_three_are_all_followed(
        self, alice, bob, charlie, user_factory, run_commits, settings, form, through
    ):
        settings.FOLLOWS_IMPORT_MAX_LINES = 3
        settings.CELERY_TASK_ALWAYS_EAGER = True
        dave = user_factory(username="dave")
        upload = SimpleUploadedFile("follows.csv", mastodon_file(["bob", "charlie", dave.username], form))
        url = "/api/follows/import" if through == "api" else "/settings/follows/"

        response = run_commits(lambda: signed_in(alice).post(url, {"file": upload}))

        job = FollowImport.objects.get()
        assert response.status_code == (202 if through == "api" else 302)
        assert job.usernames == ["bob", "charlie", "dave"]
        assert (job.total, job.position, job.followed, job.skipped) == (3, 3, 3, [])
        assert followees(alice) == {"bob", "charlie", "dave"}

    @pytest.mark.parametrize("form", FORMS)
    @pytest.mark.parametrize("through", ["api", "page"])
    def test_four_accounts_at_a_limit_of_three_are_400_and_change_nothing(
        self, alice, bob, charlie, user_factory, settings, form, through
    ):
        settings.FOLLOWS_IMPORT_MAX_LINES = 3
        names = ["bob", "charlie", user_factory(username="dave").username, user_factory(username="erin").username]
        upload = SimpleUploadedFile("follows.csv", mastodon_file(names, form))
        url = "/api/follows/import" if through == "api" else "/settings/follows/"

        response = signed_in(alice).post(url, {"file": upload})

        assert response.status_code == 400
        assert "The file has 4 lines; at most 3 accounts can be imported at once." in response.content.decode()
        assert not FollowImport.objects.exists() and not Follow.objects.exists()

    @pytest.mark.parametrize(
        ("raw", "usernames"),
        [
            # A quoted header with other casing and spaces, doubled quotes, a blank line.
            (b'" account address ","SHOW BOOSTS"\r\n"bob","true"\r\n\r\n"charlie","false"\r\n', ["bob", "charlie"]),
            # Quotes only where a spreadsheet needs them: a comma inside the languages field.
            (b'Account address,Show boosts,Notify on new posts,Languages\nbob,true,false,"en,de"\n', ["bob"]),
            # A plain list whose names are quoted.
            (b'"bob"\r\n"@charlie"\r\n', ["bob", "charlie"]),
        ],
    )
    def test_quoting_follows_the_csv_rules_not_a_listed_input(self, settings, raw, usernames):
        settings.FOLLOWS_IMPORT_MAX_LINES = 2

        assert transfer.parse_import(raw) == usernames

    def test_a_quoted_line_break_is_one_row_not_two(self, settings):
        settings.FOLLOWS_IMPORT_MAX_LINES = 1

        # One field holding a line break: one row (not "2 lines"), and not a username.
        with pytest.raises(InvalidInput, match="The file lists no username"):
            transfer.parse_import(b'"bob\ncharlie"\n')
        assert transfer.parse_import(HEADER.encode() + b'bob,true,false,"en\nde"\n') == ["bob"]


def run_at_once(*steps) -> list[BaseException]:
    """Run ``steps`` in threads started together, each on its own DB connection; the errors."""
    import threading

    from django.db import connection

    barrier = threading.Barrier(len(steps))
    errors: list[BaseException] = []

    def run(step) -> None:
        try:
            barrier.wait()
            step()
        except BaseException as exc:  # noqa: BLE001 - collected and asserted
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(step,)) for step in steps]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return errors


@pytest.mark.django_db(transaction=True)
class TestConcurrentImports:
    ROUNDS = 3

    def test_two_imports_of_one_list_report_exactly_the_rows_made(self, redis_client, monkeypatch):
        import threading

        from social.selectors import follow_counts
        from tests.support.graph import assert_mirror_equals_database

        real = transfer._skip_reason
        in_step = threading.Barrier(2)

        def both_checked(actor, username):
            # Both imports read "not followed yet" before either follows: the widest window.
            reason = real(actor, username)
            try:
                in_step.wait(timeout=2)
            except threading.BrokenBarrierError:
                in_step.reset()
            return reason

        monkeypatch.setattr(transfer, "_skip_reason", both_checked)

        for round_ in range(self.ROUNDS):
            actor = UserFactory.create(username=f"importer{round_}")
            targets = [UserFactory.create(username=f"r{round_}t{n:02d}") for n in range(20)]
            raw = "\n".join(t.username for t in targets).encode()
            first, second = (unstarted_import(actor, raw) for _ in range(2))

            errors = run_at_once(*(partial_run(job.pk) for job in (first, second)))

            first.refresh_from_db()
            second.refresh_from_db()
            rows = Follow.objects.filter(follower=actor).count()
            assert errors == []
            assert rows == 20
            assert first.followed + second.followed == rows  # each row reported once, by the import that made it
            for job in (first, second):
                assert (job.position, job.finished_at is not None) == (20, True)
                assert job.followed + len(job.skipped) == 20
                assert {reason for _, reason in job.skipped} <= {transfer.SKIP_FOLLOWING}
            assert follow_counts(user_id=actor.pk).following == 20
            assert_mirror_equals_database(redis_client, [actor.pk, *(t.pk for t in targets)])

    def test_two_runs_of_one_import_handle_each_line_once(self):
        actor = UserFactory.create(username="importer")
        targets = [UserFactory.create(username=f"t{n:02d}") for n in range(20)]
        job = unstarted_import(actor, "\n".join(t.username for t in targets).encode())

        errors = run_at_once(partial_run(job.pk), partial_run(job.pk))

        job.refresh_from_db()
        assert errors == []
        assert (job.position, job.followed, job.skipped) == (20, 20, [])
        assert Follow.objects.filter(follower=actor).count() == 20


def unstarted_import(actor, raw: bytes) -> FollowImport:
    """An import recorded as ``follows_import_start`` records it, without the outbox entry that
    would run it at once here (Celery is eager in tests): the test runs it."""
    usernames = transfer.parse_import(raw)
    return FollowImport.objects.create(user=actor, usernames=usernames, total=len(usernames))


def partial_run(import_id: int):
    return lambda: transfer.follows_import_run(import_id=import_id)


class TestImportsAfterDeletions:
    """An import's progress and counts equal what the database shows when an account it
    concerns is deleted mid-import (its report is the record of each line when handled)."""

    def test_the_importing_account_deleted_mid_import_leaves_no_job_no_follow_and_no_pending_entry(
        self, alice, user_factory, run_commits
    ):
        targets = [user_factory(username=f"t{n}") for n in range(4)]
        job = transfer.follows_import_start(actor=alice, raw="\n".join(t.username for t in targets).encode())  # its entry pending

        first = run_commits(lambda: transfer.follows_import_run(import_id=job.pk, limit=2))
        alice_id = alice.pk
        run_commits(alice.delete)
        OutboxEntry.objects.update(attempts=1)  # every task's grace is over
        result = drain()

        assert (first.done, first.finished) == (2, False)
        with pytest.raises(NotFound):
            transfer.follows_import_run(import_id=job.pk)
        assert not FollowImport.objects.filter(pk=job.pk).exists()
        assert not Follow.objects.filter(follower_id=alice_id).exists()
        assert not OutboxEntry.objects.filter(kind="social.follows_import", applied_at__isnull=True).exists()
        assert result.stuck == 0

    def test_a_listed_account_deleted_mid_import(self, alice, user_factory, run_commits):
        names = ["t0", "t1", "t2", "t3"]
        targets = {name: user_factory(username=name) for name in names}
        job = FollowImport.objects.create(user=alice, usernames=names, total=4)

        run_commits(lambda: transfer.follows_import_run(import_id=job.pk, limit=2))  # t0 and t1 followed
        run_commits(targets["t0"].delete)  # handled already
        run_commits(targets["t2"].delete)  # not handled yet
        step = run_commits(lambda: transfer.follows_import_run(import_id=job.pk))

        job.refresh_from_db()
        rows = set(Follow.objects.filter(follower=alice).values_list("followee__username", flat=True))
        assert step.finished and (job.position, job.total) == (4, 4)
        assert job.skipped == [["t2", transfer.SKIP_UNKNOWN]]
        # t0's line followed it when handled: the report keeps that line, the graph lost the row.
        assert (job.followed, job.skipped_count) == (3, 1)
        assert rows == {"t1", "t3"}
        assert services_counts(alice) == len(rows)


def services_counts(user) -> int:
    from social.selectors import follow_counts

    return follow_counts(user_id=user.pk).following


@pytest.mark.django_db(transaction=True)
class TestImportRacingDeletion:
    # A deletion locks the account's row before it collects the rows that cascade
    # (users.models.UserQuerySet), so a follow the account makes meanwhile (here the import's)
    # waits and finds the account gone, instead of failing the DELETE on a foreign key.
    def test_the_importing_account_deleted_while_its_import_runs(self, settings):
        import threading

        from django.db import connection

        from tests.support.faults import wait_until

        settings.FOLLOWS_IMPORT_PAUSE_SECONDS = 0.02
        actor = UserFactory.create(username="importer")
        targets = [UserFactory.create(username=f"t{n:02d}") for n in range(40)]
        job = unstarted_import(actor, "\n".join(t.username for t in targets).encode())
        outcome: dict[str, object] = {}

        def run() -> None:
            try:
                outcome["step"] = transfer.follows_import_run(import_id=job.pk)
            except BaseException as exc:  # noqa: BLE001 - asserted below
                outcome["error"] = exc
            finally:
                connection.close()

        runner = threading.Thread(target=run)
        runner.start()
        wait_until(
            lambda: FollowImport.objects.get(pk=job.pk).position >= 3, timeout=30, interval=0.005, what="the import under way"
        )
        actor_id = actor.pk
        actor.delete()
        runner.join(60)

        assert not runner.is_alive()
        assert isinstance(outcome.get("error"), NotFound)  # the job went with its account
        assert not FollowImport.objects.filter(pk=job.pk).exists()
        assert not Follow.objects.filter(follower_id=actor_id).exists()  # no follow made after the deletion survived it


class TestADeactivatedImporter:
    def test_its_import_stops_without_spending_lines_and_goes_on_when_reactivated(self, alice, user_factory, run_commits):
        from users.services import user_set_active

        targets = [user_factory(username=f"t{n}") for n in range(4)]
        job = transfer.follows_import_start(actor=alice, raw="\n".join(t.username for t in targets).encode())  # entry pending
        run_commits(lambda: transfer.follows_import_run(import_id=job.pk, limit=1))
        run_commits(lambda: user_set_active(user=alice, is_active=False))
        OutboxEntry.objects.update(attempts=1)  # every task's grace is over

        drain()
        job.refresh_from_db()
        while_inactive = (job.position, job.followed, job.skipped, job.finished_at)
        pending_while_inactive = OutboxEntry.objects.filter(kind="social.follows_import", applied_at__isnull=True).count()
        run_commits(lambda: user_set_active(user=alice, is_active=True))  # Celery is eager: the import goes on
        job.refresh_from_db()

        assert while_inactive == (1, 1, [], None)
        assert pending_while_inactive == 0  # settled, not retried every drain
        assert (job.position, job.followed, job.skipped, job.finished_at is not None) == (4, 4, [], True)
        assert followees(alice) == {t.username for t in targets}


@pytest.mark.django_db
class TestImportsReconcile:
    def test_an_unfinished_import_without_a_pending_entry_gets_it_again(self, settings, django_capture_on_commit_callbacks):
        from core.models import OutboxEntry
        from social.tasks import social_imports_reconcile

        actor = UserFactory.create(username="stalled")
        job = FollowImport.objects.create(user=actor, usernames=["nobody"], total=1)

        found = transfer.imports_drift(repair=False)
        with django_capture_on_commit_callbacks(execute=False):
            repaired = social_imports_reconcile()

        assert (found, repaired) == (1, 1)
        assert list(
            OutboxEntry.objects.filter(kind="social.follows_import", applied_at__isnull=True).values_list("subject_id", flat=True)
        ) == [job.pk]
        assert transfer.imports_drift(repair=False) == 0
        assert settings.CELERY_BEAT_SCHEDULE["reconcile-imports-nightly"]["task"] == "social.tasks.social_imports_reconcile"
