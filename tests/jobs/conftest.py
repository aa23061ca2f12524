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
