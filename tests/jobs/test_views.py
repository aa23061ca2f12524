"""GET /jobs/<uuid>: the caller's org only; JSON in every case."""

import uuid

import pytest

from jobs.queue import enqueue
from tests.factories import OrgFactory, UserFactory, api_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def job():
    OrgFactory(id="acme")
    return enqueue("noop", org_id="acme", payload={"sleep": 0})


def test_member_of_the_jobs_org_sees_it(client, job):
    client.force_login(UserFactory(org=OrgFactory(id="acme")))
    response = client.get(f"/jobs/{job.id}")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"id", "type", "status", "progress", "report", "error", "created_at", "started_at",
                         "finished_at"}
    assert (body["id"], body["type"], body["status"]) == (str(job.id), "noop", "queued")


def test_member_of_another_org_gets_404(client, job):
    client.force_login(UserFactory(org=OrgFactory(id="rival")))
    response = client.get(f"/jobs/{job.id}")
    assert response.status_code == 404
    assert response.json() == {"error": "job not found"}


def test_user_without_any_org_gets_404(client, job):
    client.force_login(UserFactory())
    assert client.get(f"/jobs/{job.id}").status_code == 404


def test_anonymous_gets_401_json(client, job):
    response = client.get(f"/jobs/{job.id}")
    assert response.status_code == 401
    assert "authentication required" in response.json()["error"]


def test_bearer_token_of_the_org_sees_it(client, job):
    _, raw = api_token(OrgFactory(id="acme"))
    response = client.get(f"/jobs/{job.id}", headers={"Authorization": f"Bearer {raw}"})
    assert response.status_code == 200
    assert response.json()["id"] == str(job.id)


def test_bearer_token_of_another_org_gets_404(client, job):
    _, raw = api_token(OrgFactory(id="rival"))
    response = client.get(f"/jobs/{job.id}", headers={"Authorization": f"Bearer {raw}"})
    assert response.status_code == 404


@pytest.mark.parametrize("header", ["Bearer sik_not-a-real-token", "Bearer ", "Basic dXNlcjpwdw==", "Bearer nope"])
def test_bad_credentials_get_401_json(client, job, header):
    response = client.get(f"/jobs/{job.id}", headers={"Authorization": header})
    assert response.status_code == 401
    assert response.json()["error"]


def test_unknown_and_malformed_ids_get_404_json(client, job):
    client.force_login(UserFactory(org=OrgFactory(id="acme")))
    for path in (f"/jobs/{uuid.uuid4()}", "/jobs/not-a-uuid"):
        response = client.get(path)
        assert response.status_code == 404
        assert response.json() == {"error": "job not found"}


def test_a_user_in_several_orgs_sees_the_org_chosen_in_the_session(client, job):
    from seoinsight.auth import SESSION_ORG_KEY
    from seoinsight.models import Membership

    user = UserFactory(org=OrgFactory(id="aaa"))
    Membership.objects.create(user=user, org=OrgFactory(id="acme"))
    client.force_login(user)
    assert client.get(f"/jobs/{job.id}").status_code == 404  # defaults to the first org, "aaa"
    session = client.session
    session[SESSION_ORG_KEY] = "acme"
    session.save()
    assert client.get(f"/jobs/{job.id}").status_code == 200
