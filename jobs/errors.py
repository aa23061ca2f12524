"""What a handler raises to steer its run, and what the queue raises into it.

Plain exceptions with no Django import, so ``jobs`` can offer them at the top of the package
(``jobs.Retry``) to modules that load before the apps are ready.
"""

from __future__ import annotations


# The ``error`` of a run that was cancelled, or ran past its type's timeout (a timeout may say more
# after it): what the admin's facts and the task backend read.
CANCELLED = "cancelled"
TIMED_OUT = "timed out"


class Retry(Exception):
    """Raised by a handler: this attempt did not fail for good, run the job again later.

    ``after`` (seconds) is when; None lets the type's backoff decide. The run counts against
    ``max_attempts``: once they are spent the job fails with this exception's message.
    """

    def __init__(self, message: str = "retry requested", *, after: float | None = None):
        if after is not None and not after >= 0:
            raise ValueError(f"Retry(after=...) must be a non-negative number of seconds, not {after!r}")
        super().__init__(message)
        self.after = after


class JobCancelled(Exception):
    """Raised into a handler (at its next heartbeat or ``report_progress``) whose job was cancelled."""


class JobTimedOut(Exception):
    """Raised into a handler (at its next ``report_progress``) that ran past its type's ``timeout``."""
