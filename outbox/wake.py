"""Queue a sender: a ``deliver_outbox`` job, at most one waiting at a time (its dedup key)."""

from __future__ import annotations

from jobs.queue import enqueue

JOB_TYPE = "deliver_outbox"
DEDUP_KEY = "deliver_outbox"


def wake(org_id) -> None:
    """Make sure a sender will run; call in the transaction that made work (it is queued only if that commits).

    The key is held only while the job waits (dedup scope "queue"): a wake
    during a run queues the next sender, so no wake-up is lost. The job serves
    every org; ``org_id`` is the org whose document asked for it.
    """
    enqueue(JOB_TYPE, org_id=str(org_id), dedup_key=DEDUP_KEY)
