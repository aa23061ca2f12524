"""deliver_outbox: a sender of held documents, run by the job workers (``outbox.sender.run``).

Queued (``outbox.wake``) by every accepted document (in its transaction), by a
sender that ends with work due, by mail intake's gate when the outbox is full,
by the admin's "Retry now", and by every worker's periodic duty when an entry
is due or its lease expired and no sender is queued or running
(``outbox.watch``); several may run at once (up to OUTBOX_SENDERS), never two on
one entry (its lease). A sender killed with its worker is not a failure: the
sweep puts its job back in the queue (or folds it into the sender queued
meanwhile), and the entries it held are protected by their leases, not by the
job; only SENDER_RUNS deaths in a row fail it. It stops claiming when its
worker is stopping (``job.stop_requested``). Its job belongs to the system org
and its report is counts only: it serves every org.
"""

from __future__ import annotations

from jobs.registry import register

from . import sender
from .wake import JOB_TYPE


# A sender that dies this many times in a row is worth an operator's look (something kills its worker).
SENDER_RUNS = 3


@register(JOB_TYPE, max_attempts=SENDER_RUNS)
def deliver_outbox(job):
    return sender.run(stop=getattr(job, "stop_requested", None))
