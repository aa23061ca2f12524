import io
import os
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command

from seoinsight.models import ApiToken, Membership, Org
from tests.factories import OrgFactory
from tests.support.processes import ROOT, database_url

pytestmark = pytest.mark.django_db


def test_createapitoken_prints_a_token_that_authenticates_and_stores_only_its_hash():
    org = OrgFactory(id="acme")
    out = io.StringIO()
    call_command("createapitoken", "acme", "ci", stdout=out, stderr=io.StringIO())
    raw = out.getvalue().strip()
    token = ApiToken.objects.authenticate(raw)
    assert token is not None and token.org == org and token.name == "ci"
    assert raw not in token.token_hash


def test_createapitoken_refuses_unknown_org_and_duplicate_name():
    OrgFactory(id="acme")
    with pytest.raises(CommandError, match="no org 'nope'"):
        call_command("createapitoken", "nope", "ci", stdout=io.StringIO())
    call_command("createapitoken", "acme", "ci", stdout=io.StringIO(), stderr=io.StringIO())
    with pytest.raises(CommandError, match="already has a token named 'ci'"):
        call_command("createapitoken", "acme", "ci", stdout=io.StringIO(), stderr=io.StringIO())


def test_seeddemo_is_idempotent(settings, tmp_path):
    settings.BASE_DIR = tmp_path
    first, second = io.StringIO(), io.StringIO()
    call_command("seeddemo", stdout=first)
    call_command("seeddemo", stdout=second)
    assert first.getvalue() == second.getvalue()
    assert first.getvalue().startswith("Demo login: admin / ")
    assert Org.objects.filter(id="demo").count() == 1
    assert Membership.objects.filter(org_id="demo", user__username="admin").count() == 1
    password = first.getvalue().split(" / ")[1].strip()
    from django.contrib.auth import authenticate

    assert authenticate(username="admin", password=password) is not None


def check_deploy(**environment) -> subprocess.CompletedProcess:
    """``manage.py check --deploy --fail-level WARNING`` with the production profile plus ``environment``."""
    env = dict(os.environ)
    env.update(
        DEBUG="0",
        SECRET_KEY="x" * 20 + "production-secret-key-with-enough-entropy-0123456789",
        ALLOWED_HOSTS="seo.example.com",
        DATABASE_URL=database_url(),
        **environment,
    )
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )


def test_production_profile_passes_check_deploy():
    result = check_deploy(SECRETS_KEYS=Fernet.generate_key().decode())
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_deploy_warns_when_secrets_use_the_key_derived_from_secret_key():
    result = check_deploy()
    assert result.returncode != 0
    assert "seoinsight.W001" in result.stderr and "derived from SECRET_KEY" in result.stderr


def test_a_secrets_key_that_is_not_a_fernet_key_is_an_error():
    result = check_deploy(SECRETS_KEYS="not-a-key")
    assert result.returncode != 0
    assert "seoinsight.E002" in result.stderr and "SECRETS_KEYS entry 1" in result.stderr


def test_production_profile_refuses_to_start_without_a_secret_key():
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env.update(DEBUG="0", ALLOWED_HOSTS="seo.example.com", DATABASE_URL=database_url())
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr
