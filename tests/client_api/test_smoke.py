import pytest

pytestmark = pytest.mark.django_db


def test_instance(client):
    response = client.get("/api/v1/instance")
    assert response.status_code == 200, response.content
    assert response.json()["version"].startswith("4.3.0 (compatible; followfeed")


def test_verify_and_follow_and_timeline(api_alice, api_bob, bob, run_commits):
    me = api_alice.get("/api/v1/accounts/verify_credentials")
    assert me.status_code == 200, me.content
    rel = run_commits(lambda: api_alice.post(f"/api/v1/accounts/{bob.pk}/follow"))
    assert rel.status_code == 200, rel.content
    assert rel.json()["following"] is True
    posted = run_commits(lambda: api_bob.post("/api/v1/statuses", {"status": "Hello"}))
    assert posted.status_code == 200, posted.content
    tl = api_alice.get("/api/v1/timelines/home")
    assert tl.status_code == 200, tl.content
    assert [s["id"] for s in tl.json()] == [posted.json()["id"]]
