import pytest

from jobs import registry


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


@pytest.fixture
def no_guarded_types():
    """The registry without its one guarded type (test_guarded): claims take the unguarded path."""
    guarded = registry.get("test_guarded")
    registry.unregister("test_guarded")
    assert not any(t.one_running_per for t in registry.all_types().values())
    yield
    registry.register(guarded.name, guarded.handler, one_running_per=guarded.one_running_per)
