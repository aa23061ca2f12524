import pytest

from jobs import registry
from tests.support import handlers, stoppable_types as stoppable


@pytest.fixture
def test_types():
    """The test job types of tests/support/handlers.py, none guarded, registered for this test only."""
    with registry.registered(*handlers.TYPES):
        yield


@pytest.fixture
def guarded_type(test_types):
    """Also ``test_guarded`` (one_running_per="site_id"): this test's claims take the guarded path."""
    with registry.registered(handlers.GUARDED):
        yield


@pytest.fixture
def stoppable_types():
    """The types only a cancel or a timeout ends (tests/support/stoppable_types.py), for this test only."""
    with registry.registered(*stoppable.TYPES):
        yield


@pytest.fixture
def temporary_type():
    """``register(name, handler, **options)`` for the test; the types are unregistered at teardown."""
    names = []

    def register(name, handler, **options):
        registry.register(name, handler, **options)
        names.append(name)

    yield register
    for name in names:
        registry.unregister(name)
