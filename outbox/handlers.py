"""deliver_outbox: a sender of held documents, run by the job workers (``outbox.sender.run``).

Queued by every accepted document (in its transaction), by mailpoll's capacity
gate when a poll finds the outbox full, and by the admin's "retry now"; several
may run at once (up to OUTBOX_SENDERS), never two on one entry (its lease).
"""

from __future__ import annotations

from jobs.registry import register

from . import sender
from .wake import JOB_TYPE


@register(JOB_TYPE, max_attempts=1)
def deliver_outbox(job):
    return sender.run()
