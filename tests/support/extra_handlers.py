"""A deployment's own handler module, loaded only through JOBS_HANDLER_MODULES."""

from jobs.registry import register


@register("test_extra")
def extra(job):
    return {"extra": True}
