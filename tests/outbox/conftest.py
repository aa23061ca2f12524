import pytest

from outbox import entries
from tests.factories import OrgFactory
from tests.support.dovecot import dovecot  # noqa: F401  (session fixture: one real Dovecot per run)
from tests.support.fake_downstream import FakeDownstream
from tests.support.fixtures import media  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def own_media(media):  # noqa: F811  (the shared fixture, imported above)
    return media


@pytest.fixture
def downstream(settings):
    """A FakeDownstream the outbox is pointed at: short timeout, short retry delays, senders that do not linger."""
    fake = FakeDownstream()
    settings.DOWNSTREAM_URL = fake.url
    settings.DOWNSTREAM_TIMEOUT = 0.5
    settings.OUTBOX_RETRY_BASE_SECONDS = 0.2
    settings.OUTBOX_RETRY_MAX_SECONDS = 1.0
    settings.OUTBOX_SENDER_SECONDS = 0
    yield fake
    fake.close()


@pytest.fixture
def org(db):
    return OrgFactory()


@pytest.fixture
def held(org):
    """Hold n documents without files (``held(n)``); returns their document_refs."""

    def add(n: int, prefix: str = "test:doc") -> list[str]:
        refs = [f"{prefix}:{i}" for i in range(n)]
        for ref in refs:
            assert entries.add(org_id=org.pk, document_ref=ref, source="test", document={"ref": ref, "text": ref})
        return refs

    return add
