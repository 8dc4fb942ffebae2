"""Usernames: one rule everywhere (sign-up, the admin, a model's full_clean, imports), and the
follows export never writes a cell a spreadsheet runs as a formula (the trial's third hole)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from social import transfer
from social.models import Follow
from tests.support.accounts import signed_in
from users.models import User

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"
FORMULAS = ["+1+2", "-1+2", "@SUM", "=1+2"]


class TestOneRule:
    @pytest.mark.parametrize("name", FORMULAS)
    def test_the_admin_refuses_what_sign_up_refuses(self, name: str, superuser_client: Any) -> None:
        response = superuser_client.post(
            "/admin/users/user/add/", {"username": name, "password1": PASSWORD, "password2": PASSWORD, "usable_password": "true"}
        )
        signup = Client().post("/signup/", {"username": name, "password1": PASSWORD, "password2": PASSWORD})

        assert response.status_code == 200
        assert "username" in response.context["adminform"].form.errors
        assert signup.status_code == 400
        assert not User.objects.filter(username=name).exists()

    def test_the_admin_accepts_a_good_name(self, superuser_client: Any) -> None:
        response = superuser_client.post(
            "/admin/users/user/add/",
            {"username": "good.name", "password1": PASSWORD, "password2": PASSWORD, "usable_password": "true"},
        )

        assert response.status_code == 302
        assert User.objects.filter(username="good.name").exists()

    def test_the_admin_refuses_a_rename_to_a_formula(self, superuser_client: Any, user_factory: Any) -> None:
        user = user_factory(username="renamed")
        page = superuser_client.get(f"/admin/users/user/{user.pk}/change/")
        form = {
            key: value
            for key, value in page.context["adminform"].form.initial.items()
            if value is not None and not isinstance(value, list)
        }

        response = superuser_client.post(
            f"/admin/users/user/{user.pk}/change/",
            {**form, "username": "@SUM", "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"},
        )

        assert response.status_code == 200
        user.refresh_from_db()
        assert user.username == "renamed"

    @pytest.mark.parametrize("name", FORMULAS)
    def test_the_model_refuses_it(self, name: str) -> None:
        with pytest.raises(ValidationError) as caught:
            User(username=name, password="x").full_clean()

        assert "username" in caught.value.message_dict

    def test_an_import_skips_it_even_when_such_an_account_exists(self, alice: Any) -> None:
        # An account made before the rule: an import names it the same way sign-up would refuse it.
        User.objects.bulk_create([User(username="+1+2")])

        assert transfer._skip_reason(alice, "+1+2") == (transfer.SKIP_INVALID, None)
        assert not Follow.objects.filter(follower=alice).exists()


class TestExportEscapes:
    def test_a_name_made_before_the_rule_is_written_as_text(self, alice: Any, run_commits: Any) -> None:
        # Rows written past validation (bulk_create, as an old admin could): whatever their origin, escaped.
        odd = User.objects.bulk_create([User(username=name) for name in FORMULAS])
        Follow.objects.bulk_create([Follow(follower=alice, followee=user) for user in odd])

        body = signed_in(alice).get("/api/follows/export.csv").content.decode()

        assert body.splitlines()[1:] == ["'+1+2,true,false,", "'-1+2,true,false,", "'@SUM,true,false,", "'=1+2,true,false,"]

    @pytest.mark.parametrize(
        ("cell", "written"),
        [
            ("=A1", "'=A1"),
            ("+1", "'+1"),
            ("-1", "'-1"),
            ("@x", "'@x"),
            ("\tx", "'\tx"),
            ("\rx", "'\rx"),
            ("bob", "bob"),
            ("a-b", "a-b"),
            ("", ""),
        ],
    )
    def test_spreadsheet_safe(self, cell: str, written: str) -> None:
        assert transfer.spreadsheet_safe(cell) == written
