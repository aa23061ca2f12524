import pytest

from jobs import registry


def test_modules_named_in_jobs_handler_modules_are_imported_at_startup(settings):
    settings.JOBS_HANDLER_MODULES = ["tests.support.extra_handlers"]
    registry.unregister("test_extra")
    registry.autodiscover()
    try:
        assert registry.get("test_extra").handler({}) == {"extra": True}
    finally:
        registry.unregister("test_extra")


def test_apps_register_their_own_types():
    assert registry.get("noop").max_attempts == 3


@pytest.mark.parametrize(
    "options, message",
    [({"dedup_scope": "forever"}, "dedup_scope"), ({"max_attempts": 0}, "max_attempts")],
)
def test_bad_options_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        registry.register("test_bad", lambda job: None, **options)
    with pytest.raises(registry.UnknownJobType):
        registry.get("test_bad")


def test_two_handlers_cannot_claim_one_type():
    def first(job):
        pass

    def second(job):
        pass

    registry.register("test_twice", first)
    try:
        with pytest.raises(ValueError, match="already registered"):
            registry.register("test_twice", second)
    finally:
        registry.unregister("test_twice")


def test_the_decorator_returns_the_handler_unchanged():
    def handler(job):
        return None

    try:
        assert registry.register("test_decorated", max_attempts=5)(handler) is handler
        assert registry.get("test_decorated").max_attempts == 5
    finally:
        registry.unregister("test_decorated")


def test_hooks_are_kept_and_must_be_callable():
    def revive(job):
        pass

    try:
        registry.register("test_hooks", lambda job: None, on_requeue=revive)
        assert registry.get("test_hooks").on_requeue is revive
        with pytest.raises(ValueError, match="on_requeue must be callable"):
            registry.register("test_hooks_bad", lambda job: None, on_requeue="revive")
        with pytest.raises(ValueError, match="on_fail must be callable"):
            registry.register("test_hooks_bad", lambda job: None, on_fail=42)
    finally:
        registry.unregister("test_hooks")
        registry.unregister("test_hooks_bad")


def test_registered_types_live_for_the_block_and_a_type_they_replaced_comes_back():
    noop = registry.get("noop")
    before = registry.generation()
    with registry.registered(registry.JobType("test_for_a_block", lambda job: None),
                             registry.JobType("noop", noop.handler, max_attempts=7)):
        assert registry.get("test_for_a_block").max_attempts == 3
        assert registry.get("noop").max_attempts == 7
        assert registry.generation() != before  # the claim's cached plan is rebuilt
    with pytest.raises(registry.UnknownJobType):
        registry.get("test_for_a_block")
    assert registry.get("noop") is noop


def test_a_job_type_is_checked_however_it_is_built():
    with pytest.raises(ValueError, match="max_attempts"):
        registry.JobType("test_bad", lambda job: None, max_attempts=0)
