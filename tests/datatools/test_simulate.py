"""simulate_activity: the Higgs replay on a real imported graph slice, and the demo's home feed."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from datatools import simulate
from datatools.datasets import dataset_path
from datatools.importer import graph_import
from feed import redis_keys, selectors
from feed.models import Note
from social.models import Follow
from social.rebuild import rebuild_all
from users.models import User

pytestmark = pytest.mark.django_db


@pytest.fixture
def imported(db):
    """A real slice: the first 3,000 follows of wiki-Vote, password "pw", mirrored in Redis."""
    graph_import(dataset_path("wiki-Vote.txt.gz"), password="pw", limit=3000)
    rebuild_all()
    return User.objects.count()


class TestPlan:
    def test_prolific_posters_map_onto_the_most_followed_accounts(self, imported):
        accounts = simulate.accounts_by_followers()
        end = timezone.now().replace(microsecond=0)

        plan = simulate.plan_replay(dataset_path(simulate.HIGGS_ACTIVITY), notes=500, accounts=accounts, end=end)

        assert plan.rows_read == 563_069
        assert plan.posters == 279_379
        assert plan.mapping[89805] == accounts[0]  # 656 actions -> most followed
        assert len(plan.mapping) == len(accounts)
        assert 480 <= len(plan.rows) <= 500
        assert plan.rows[-1][2] + plan.shift == int(end.timestamp())
        times = [row[2] for row in plan.rows]
        assert times == sorted(times)  # real order, real spacing
        assert plan.rows[-1][2] - plan.rows[0][2] > 6 * 86400  # the whole week, bursts included


class TestCommand:
    def test_replays_notes_and_rebuilds_feeds_and_if_empty_is_a_no_op(self, imported, redis_client):
        out = StringIO()

        call_command("simulate_activity", "--notes", "400", "--no-progress", stdout=out)
        count = Note.objects.count()
        call_command("simulate_activity", "--if-empty", "--no-progress", stdout=out)

        assert 380 <= count <= 400
        assert Note.objects.count() == count
        assert "nothing to simulate" in out.getvalue()
        newest = Note.objects.order_by("-created_at").first()
        oldest = Note.objects.order_by("created_at").first()
        assert newest is not None and oldest is not None
        assert timezone.now() - timedelta(minutes=5) < newest.created_at < timezone.now()
        assert timedelta(days=6) < newest.created_at - oldest.created_at < timedelta(days=7)
        per_author = Counter(Note.objects.values_list("author_id", flat=True))
        assert max(per_author.values()) > 3 * (count / len(per_author))  # skewed, like the source
        assert Note.objects.filter(fanned_out_at__isnull=True).count() == 0
        top = newest.author_id
        assert redis_client.zscore(redis_keys.outbox_key(top), newest.pk) == newest.published_ms

    def test_signing_in_shows_notes_of_exactly_the_followed_accounts_newest_first(
        self, imported, django_capture_on_commit_callbacks
    ):
        call_command("simulate_activity", "--notes", "2000", "--no-progress", stdout=StringIO())
        authors = set(Note.objects.values_list("author_id", flat=True))
        reader = max(
            User.objects.filter(username__startswith="u"),
            key=lambda u: len(authors & set(Follow.objects.filter(follower=u).values_list("followee_id", flat=True))),
        )
        followed = set(Follow.objects.filter(follower=reader).values_list("followee_id", flat=True))

        client = Client()
        with django_capture_on_commit_callbacks(execute=True):  # the sign-in's catch-up runs
            assert client.login(username=reader.username, password="pw")
        html = client.get("/home").content.decode()
        page = selectors.home_timeline(user_id=reader.pk, cursor=None, limit=20)

        expected = list(
            Note.objects.filter(author_id__in=followed).order_by("-created_at", "id").values_list("pk", flat=True)[:20]
        )
        assert page.source == "redis"
        assert [n.pk for n in page.notes] == expected
        assert {n.author_id for n in page.notes} <= followed
        assert html.count('class="note"') == len(expected) > 0
        assert "Catching up" not in html

    def test_refuses_a_missing_dataset_and_bad_counts(self, imported):
        from django.core.management import CommandError

        with pytest.raises(CommandError):
            call_command("simulate_activity", "--dataset", "no-such-file.txt.gz")
        with pytest.raises(CommandError):
            call_command("simulate_activity", "--notes", "0")
