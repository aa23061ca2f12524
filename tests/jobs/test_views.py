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
                         "finished_at", "stalled"}
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


def test_a_failed_job_shows_its_error_but_never_its_traceback(client):
    from jobs.models import JobStatus
    from jobs.queue import claim, finish_failed

    client.force_login(UserFactory(org=OrgFactory(id="acme")))
    job = enqueue("noop", org_id="acme")
    assert finish_failed(claim(), "ValueError: bad file",
                         traceback='Traceback (most recent call last):\n  File "/srv/app/secret.py"')

    body = client.get(f"/jobs/{job.id}").json()

    assert (body["status"], body["error"], body["report"]) == (JobStatus.FAILED, "ValueError: bad file", None)
    assert "Traceback" not in str(body) and "secret.py" not in str(body)


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_other_methods_get_a_405_in_json(client, job, method):
    client.force_login(UserFactory(org=OrgFactory(id="acme")))

    response = getattr(client, method)(f"/jobs/{job.id}")

    assert response.status_code == 405
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": f"method {method.upper()} not allowed"}
    assert response["Allow"] == "GET, HEAD"


@pytest.mark.parametrize("path", ["/jobs/", "/jobs/{id}/", "/jobs/{id}/extra"])
def test_other_paths_under_jobs_get_a_404_in_json(client, job, path):
    client.force_login(UserFactory(org=OrgFactory(id="acme")))

    response = client.get(path.format(id=job.id))

    assert response.status_code == 404
    assert response.json() == {"error": "job not found"}


def test_a_database_error_is_a_503_in_json(client, job):
    from django.db import OperationalError, connection

    client.force_login(UserFactory(org=OrgFactory(id="acme")))

    def database_gone(execute, sql, params, many, context):
        if 'FROM "jobs"' in sql:
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(database_gone):
        response = client.get(f"/jobs/{job.id}")

    assert response.status_code == 503
    assert response.json() == {"error": "the database is unavailable; try again shortly"}
