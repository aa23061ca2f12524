"""Queue a sender: a ``deliver_outbox`` job, at most one waiting at a time (its dedup key).

A sender serves every org, so its job is the system org's (``jobs.system``):
what it does and reports may concern several orgs' documents, and no org's
staff or token reaches it.

Who wakes one: every accepted document (in its transaction), a sender that
ends with work left, the admin's "Retry now", mail intake's gate when the
outbox is full, and every worker's periodic duty (``outbox.watch``) when an
entry is due or its lease expired and no sender is queued or running — the
one that does not depend on anything else happening.
"""

from __future__ import annotations

from jobs.queue import enqueue
from jobs.system import SYSTEM_ORG

JOB_TYPE = "deliver_outbox"
DEDUP_KEY = "deliver_outbox"


def wake(org_id=None) -> None:
    """Make sure a sender will run; call in the transaction that made work (it is queued only if that commits).

    The key is held only while the job waits (dedup scope "queue"): a wake
    during a run queues the next sender, so no wake-up is lost. ``org_id``, the
    org whose document asked, is accepted for callers' convenience and not
    recorded: the job is the system org's whichever org asked.
    """
    enqueue(JOB_TYPE, org_id=SYSTEM_ORG, dedup_key=DEDUP_KEY)
