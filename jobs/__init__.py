"""The job queue. Handlers and callers reach its public verbs here: ``jobs.Retry``, ``jobs.cancel`` …

The exceptions load at once (``jobs.errors`` imports nothing of Django); the verbs that need the
models are looked up on first use, so importing ``jobs`` before the apps are ready is safe.
"""

from .errors import JobCancelled, JobTimedOut, Retry

__all__ = ["JobCancelled", "JobTimedOut", "Retry", "cancel"]


def __getattr__(name):
    if name == "cancel":
        # Not a module named cancel: importing it would bind jobs.cancel to the module, not the verb.
        from .cancellation import cancel

        return cancel
    raise AttributeError(f"module 'jobs' has no attribute {name!r}")
