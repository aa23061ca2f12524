"""Built-in job types."""

import time

from .registry import register


@register("noop")
def noop(job):
    """Does nothing, optionally for ``payload.sleep`` seconds: smoke tests and benchmarks."""
    seconds = float(job.payload.get("sleep") or 0)
    if seconds > 0:
        time.sleep(seconds)
    return {"slept": seconds}
