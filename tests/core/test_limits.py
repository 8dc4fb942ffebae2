"""Limits on abuse (core.limits): one test per limit, each past its edge, on pages and in the API.

The test settings lift the rates (one test account does far more than a
person); each test sets the limit it is about. Windows are django-ratelimit's
fixed windows, so a test that needs its steps inside one window first waits
for a fresh one (``fresh_window``).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client

from core import limits
from feed.models import Note
from social import services as social_services
from social.models import Follow
from tests.support.accounts import signed_in
from tests.support.faults import free_port
from users.models import User
from users.selectors import sign_in_identity

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"


def fresh_window(group: str, who: str, rate_setting: str, *, needed: float) -> None:
    """Wait until the current window of ``group``/``who`` has at least ``needed`` seconds left."""
    while True:
        usage = limits._usage(group, who, rate_setting, increment=False)
        assert usage is not None
        assert usage["limit"] > 0, "the rate-limit cache did not answer"
        if usage["time_left"] >= needed:
            return
        # django-ratelimit reads the clock twice (the window's end, then time_left), so a
        # second's tick between the two gives -1: the window has just ended.
        time.sleep(max(0, usage["time_left"]) + 0.05)


class TestFollowsPerDay:
    def test_the_401st_follow_of_the_day_is_a_429_with_retry_after(self, settings: Any, alice: Any) -> None:
        settings.FOLLOW_RATE = "400/d"
        targets = User.objects.bulk_create([User(username=f"target{index}") for index in range(401)])
        for target in targets[:400]:
            social_services.follow_create(actor=alice, followee_id=target.pk)

        response = signed_in(alice).put(f"/api/follow/{targets[400].pk}/true")

        assert Follow.objects.filter(follower=alice).count() == 400
        assert response.status_code == 429
        assert response.json() == {
            "success": False,
            "errorMsg": "You followed too many accounts today; try again later.",
            "data": None,
        }
        assert 0 < int(response["Retry-After"]) <= 86_400 + 1

    def test_a_repeat_or_an_unfollow_is_not_counted(self, settings: Any, alice: Any, user_factory: Any) -> None:
        settings.FOLLOW_RATE = "2/d"
        first, second = user_factory(), user_factory()
        client = signed_in(alice)

        answers = [
            client.put(f"/api/follow/{first.pk}/true").status_code,
            client.put(f"/api/follow/{first.pk}/true").status_code,  # already following: no new follow
            client.put(f"/api/follow/{first.pk}/false").status_code,
            client.put(f"/api/follow/{second.pk}/true").status_code,
            client.put(f"/api/follow/{first.pk}/true").status_code,  # the third new follow
        ]

        assert answers == [200, 200, 200, 200, 429]

    def test_the_page_answers_429_with_the_reason_and_the_way_back(
        self, settings: Any, alice: Any, bob: Any, charlie: Any
    ) -> None:
        settings.FOLLOW_RATE = "1/d"
        client = signed_in(alice)
        client.post("/u/bob/follow/")

        response = client.post("/u/charlie/follow/")

        assert response.status_code == 429 and int(response["Retry-After"]) > 0
        assert "You followed too many accounts today; try again later." in response.content.decode()
        assert '<a href="/u/charlie/">Back to @charlie</a>' in response.content.decode()
        assert not Follow.objects.filter(follower=alice, followee=charlie).exists()

    def test_the_limit_holds_while_redis_is_down(self, settings: Any, alice: Any, user_factory: Any) -> None:
        settings.FOLLOW_RATE = "2/d"
        settings.CACHES = {
            **settings.CACHES,
            "default": {**settings.CACHES["default"], "LOCATION": f"redis://127.0.0.1:{free_port()}/0"},
        }
        targets = [user_factory() for _ in range(3)]
        client = signed_in(alice)

        answers = [client.put(f"/api/follow/{target.pk}/true").status_code for target in targets]

        assert answers == [200, 200, 429]
        assert Follow.objects.filter(follower=alice).count() == 2


class TestFollowingCap:
    def test_past_the_cap_a_follow_is_422_until_followers_raise_it(
        self, settings: Any, alice: Any, user_factory: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        settings.FOLLOWING_MAX = 3
        settings.FOLLOWING_RATIO = 1.1
        followees = [user_factory() for _ in range(4)]
        client = signed_in(alice)
        answers = []
        for followee in followees:
            with django_capture_on_commit_callbacks(execute=True):  # each request commits, then its follow is mirrored
                answers.append(client.put(f"/api/follow/{followee.pk}/true").status_code)
        refused = client.put(f"/api/follow/{followees[3].pk}/true")
        # Ten followers: 1.1 x 10 = 11 is now the cap.
        with django_capture_on_commit_callbacks(execute=True):
            for _ in range(10):
                social_services.follow_create(actor=user_factory(), followee_id=alice.pk)
        allowed = client.put(f"/api/follow/{followees[3].pk}/true")

        assert answers == [200, 200, 200, 422]
        assert refused.json()["errorMsg"] == "You follow 3 accounts, the most you can (3); unfollow some first."
        assert allowed.status_code == 200
        assert Follow.objects.filter(follower=alice).count() == 4

    @pytest.mark.django_db(transaction=True)
    def test_concurrent_follows_cannot_pass_the_cap_together(self, settings: Any, user_factory: Any) -> None:
        settings.FOLLOWING_MAX = 2
        settings.FOLLOWING_RATIO = 1.1
        actor = user_factory()
        followees = [user_factory() for _ in range(12)]
        answers = run_at_once(lambda followee: signed_in(actor).put(f"/api/follow/{followee.pk}/true").status_code, followees)

        assert sorted(answers) == [200, 200] + [422] * 10
        assert Follow.objects.filter(follower=actor).count() == 2

    def test_the_cap_is_mastodons_rule(self, settings: Any) -> None:
        settings.FOLLOWING_MAX = 7500
        settings.FOLLOWING_RATIO = 1.1

        assert [social_services.following_limit(followers=n) for n in (0, 6818, 6819, 10_000)] == [7500, 7500, 7500, 11_000]


class TestNotesPerHour:
    def test_the_api_answers_429_past_the_rate_and_writes_nothing(self, settings: Any, alice: Any) -> None:
        settings.NOTE_RATE = "2/h"
        client = signed_in(alice)

        answers = [client.post("/api/notes", {"body": f"note {index}"}) for index in range(3)]

        assert [answer.status_code for answer in answers] == [201, 201, 429]
        assert answers[2].json()["errorMsg"] == "You published too many notes for now; try again later."
        assert 0 < int(answers[2]["Retry-After"]) <= 3600 + 1
        assert Note.objects.filter(author=alice).count() == 2

    def test_the_form_shows_the_reason_beside_the_text(self, settings: Any, alice: Any) -> None:
        settings.NOTE_RATE = "1/h"
        client = signed_in(alice)
        client.post("/notes/", {"body": "first"})

        response = client.post("/notes/", {"body": "second"})

        assert response.status_code == 429
        assert response.context["form"].errors["body"] == ["You published too many notes for now; try again later."]
        assert response.context["form"]["body"].value() == "second"  # the text is kept
        assert "Retry-After" in response


class TestSignUpsPerAddress:
    def sign_up(self, username: str, address: str) -> Any:
        return Client(REMOTE_ADDR=address).post("/signup/", {"username": username, "password1": PASSWORD, "password2": PASSWORD})

    def test_past_the_rate_one_address_is_refused_and_another_is_not(self, settings: Any) -> None:
        settings.SIGNUP_RATE = "2/h"

        answers = [self.sign_up(f"new{index}", "203.0.113.7") for index in range(3)]
        elsewhere = self.sign_up("new3", "203.0.113.8")

        assert [answer.status_code for answer in answers] == [302, 302, 429]
        assert answers[2].context["form"].non_field_errors() == ["Too many accounts created from here; try again later."]
        assert int(answers[2]["Retry-After"]) > 0
        assert elsewhere.status_code == 302
        assert sorted(User.objects.values_list("username", flat=True)) == ["new0", "new1", "new3"]

    def test_behind_a_proxy_the_configured_header_is_the_address(self, settings: Any) -> None:
        settings.SIGNUP_RATE = "1/h"
        settings.CLIENT_ADDRESS_HEADER = "HTTP_X_REAL_IP"

        def from_client(username: str, address: str) -> int:
            client = Client(REMOTE_ADDR="10.0.0.1", HTTP_X_REAL_IP=address)  # the proxy's address is always the same
            return client.post("/signup/", {"username": username, "password1": PASSWORD, "password2": PASSWORD}).status_code

        assert [from_client("a1", "198.51.100.1"), from_client("a2", "198.51.100.2"), from_client("a3", "198.51.100.1")] == [
            302,
            302,
            429,
        ]


class TestSignInLockout:
    def sign_in(self, username: str, password: str, address: str = "192.0.2.1") -> Any:
        return Client(REMOTE_ADDR=address).post("/login/", {"username": username, "password": password})

    def test_after_the_failures_the_right_password_is_refused_until_the_window_ends(
        self, settings: Any, user_factory: Any
    ) -> None:
        # A window long enough for four sign-ins on a loaded machine (each hashes a password).
        settings.LOGIN_FAILURE_ACCOUNT_RATE = "3/8s"
        user_factory(username="dora", password=PASSWORD)
        fresh_window("login_failures_account", sign_in_identity("dora"), "LOGIN_FAILURE_ACCOUNT_RATE", needed=6.0)

        failures = [self.sign_in("dora", "wrong password", address=f"192.0.2.{index}").status_code for index in range(3)]
        locked = self.sign_in("dora", PASSWORD, address="192.0.2.50")
        time.sleep(int(locked["Retry-After"]) + 0.2)
        lifted = self.sign_in("dora", PASSWORD, address="192.0.2.50")

        assert failures == [200, 200, 200]
        assert locked.status_code == 429
        assert "Too many failed sign-ins" in locked.content.decode()
        assert "_auth_user_id" not in locked.wsgi_request.session
        assert lifted.status_code == 302 and lifted["Location"] == "/home"

    def test_the_lock_is_per_account_name_whatever_its_case(self, settings: Any, user_factory: Any) -> None:
        settings.LOGIN_FAILURE_ACCOUNT_RATE = "2/h"
        user_factory(username="dora", password=PASSWORD)

        self.sign_in("dora", "wrong", address="192.0.2.1")
        self.sign_in("DORA", "wrong", address="192.0.2.2")

        assert self.sign_in("Dora", PASSWORD, address="192.0.2.3").status_code == 429

    @pytest.mark.parametrize("spelling", [" dora", "ＤＯＲＡ", "Dóra", "dora "])
    def test_every_spelling_that_signs_in_as_the_account_counts_against_it(
        self, spelling: str, settings: Any, user_factory: Any
    ) -> None:
        settings.LOGIN_FAILURE_ACCOUNT_RATE = "2/h"
        user_factory(username="dora", password=PASSWORD)
        signs_in = self.sign_in(spelling, PASSWORD, address="192.0.2.9").status_code

        self.sign_in(spelling, "wrong", address="192.0.2.1")
        self.sign_in("dora", "wrong", address="192.0.2.2")

        assert signs_in == 302  # the form and the column's collation take it as dora
        assert self.sign_in(spelling, PASSWORD, address="192.0.2.3").status_code == 429
        assert self.sign_in("dora", PASSWORD, address="192.0.2.4").status_code == 429

    def test_one_address_trying_many_accounts_is_locked_out(self, settings: Any, user_factory: Any) -> None:
        settings.LOGIN_FAILURE_ADDRESS_RATE = "3/h"
        user_factory(username="erin", password=PASSWORD)
        for index in range(3):
            self.sign_in(f"someone{index}", "guess", address="198.51.100.9")

        same_address = self.sign_in("erin", PASSWORD, address="198.51.100.9")
        other_address = self.sign_in("erin", PASSWORD, address="198.51.100.10")

        assert same_address.status_code == 429
        assert other_address.status_code == 302

    def test_a_locked_sign_in_does_not_check_the_password(self, settings: Any, user_factory: Any, monkeypatch: Any) -> None:
        settings.LOGIN_FAILURE_ACCOUNT_RATE = "1/h"
        user_factory(username="dora", password=PASSWORD)
        self.sign_in("dora", "wrong")
        checked: list[str] = []
        monkeypatch.setattr("django.contrib.auth.forms.authenticate", lambda *args, **kwargs: checked.append("yes"))

        response = self.sign_in("dora", PASSWORD)

        assert response.status_code == 429
        assert checked == []


class TestCountingWhileRedisIsDown:
    @pytest.mark.django_db(transaction=True)
    def test_concurrent_increments_in_the_database_cache_all_count_and_keep_the_expiry(self) -> None:
        from django.core.cache import caches

        from core.cache import CountingDatabaseCache

        cache = caches["database"]
        assert isinstance(cache, CountingDatabaseCache)
        cache.delete("hits")  # the cache table outlives a test's flush (it is no model's table)
        cache.add("hits", 0, 3600)
        expires_before = _expiry(cache, "hits")

        run_at_once(lambda _: [cache.incr("hits") for _ in range(10)], range(8))

        assert cache.get("hits") == 80
        assert _expiry(cache, "hits") == expires_before

    def test_a_store_switch_between_the_add_and_the_increment_counts_instead_of_refusing(
        self, monkeypatch: Any, settings: Any, alice: Any
    ) -> None:
        from django.core.cache import caches

        from core import cache as cache_module

        counts = caches["limits"]
        caches["database"].delete("switch")
        monkeypatch.setattr(cache_module, "redis_available", lambda *args, **kwargs: False)
        added_in_database = counts.add("switch", 1, 60)  # Redis down: the count starts in the database
        monkeypatch.setattr(cache_module, "redis_available", lambda *args, **kwargs: True)
        after_switch = [counts.incr("switch"), counts.incr("switch")]  # Redis back: the key is not there

        settings.FOLLOW_RATE = "5/h"
        assert added_in_database is True
        assert after_switch == [1, 2]
        assert caches["default"].get("switch") == 2
        limits.hit("follows", str(alice.pk), "FOLLOW_RATE", message="refused")  # counts, does not refuse

    def test_incr_of_a_missing_or_expired_key_is_a_value_error(self) -> None:
        from django.core.cache import caches

        cache = caches["database"]
        cache.set("gone", 1, -1)

        with pytest.raises(ValueError):
            cache.incr("absent")
        with pytest.raises(ValueError):
            cache.incr("gone")


class TestConcurrentSignUps:
    @pytest.mark.django_db(transaction=True)
    def test_one_name_in_three_spellings_at_once_makes_one_account_and_no_500(self) -> None:
        def sign_up(username: str) -> int:
            form = {"username": username, "password1": PASSWORD, "password2": PASSWORD}
            return Client(REMOTE_ADDR=f"203.0.113.{len(username) + ord(username[0])}").post("/signup/", form).status_code

        answers = run_at_once(sign_up, ["quinn", "QUINN", "Quinn", "qUinn", "quInn", "quiNn"])

        assert answers.count(302) == 1
        assert set(answers) - {302} <= {400, 409}
        assert User.objects.filter(username__iexact="quinn").count() == 1


def run_at_once(work: Any, items: Any) -> list[Any]:
    """``work(item)`` for every item, each in its own thread (and database connection), started together."""
    import threading

    from django.db import connection

    items = list(items)
    barrier = threading.Barrier(len(items))
    results: list[Any] = [None] * len(items)

    def run(index: int, item: Any) -> None:
        try:
            barrier.wait()
            results[index] = work(item)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index, item)) for index, item in enumerate(items)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def _expiry(cache: Any, key: str) -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT expires FROM core_cache WHERE cache_key = %s", [cache.make_and_validate_key(key)])
        return cursor.fetchone()[0]


class TestPasswords:
    def test_sign_up_shows_the_rules_and_refuses_a_weak_password(self) -> None:
        form_page = Client().get("/signup/").content.decode()
        response = Client().post("/signup/", {"username": "weak", "password1": "1", "password2": "1"})

        assert "Your password must contain at least 10 characters." in form_page
        assert "can’t be entirely numeric" in form_page
        assert response.status_code == 400
        errors = response.context["form"].errors["password2"]
        assert "This password is too short. It must contain at least 10 characters." in errors
        assert "This password is entirely numeric." in errors
        assert not User.objects.filter(username="weak").exists()
