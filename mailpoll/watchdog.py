"""Releases attachments stuck in ``processing`` (their worker died) — run at the end of every poll cycle.

Once an hour it also deletes what writers killed mid-file left under ``mail/``
(``.partial-*`` files a day old): never read, only taking space.
"""

from __future__ import annotations

import logging
import time

from django.db import transaction

from seoinsight import storage

from . import conf
from .handlers import enqueue_processing
from .models import Attachment, AttachmentStatus

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
PARTIAL_MAX_AGE = 24 * 3600  # a write in progress is never that old
PARTIAL_SWEEP_EVERY = 3600  # listing every stored file's directory is not free
_next_partial_sweep = 0.0  # monotonic time; per process


def run_once() -> dict:
    """Stuck attachments go back to ``pending`` with a new job, or ``failed`` once out of attempts."""
    global _next_partial_sweep
    if time.monotonic() >= _next_partial_sweep:
        _next_partial_sweep = time.monotonic() + PARTIAL_SWEEP_EVERY
        removed = storage.remove_stale_partials("mail", PARTIAL_MAX_AGE)
        if removed:
            log.warning("removed %s partial file(s) left by writers killed mid-file", removed)
    released = failed = 0
    with transaction.atomic():
        stuck = list(
            Attachment.objects.stuck(conf.get("MAILPOLL_STUCK_AFTER"))
            .select_for_update(skip_locked=True)
            .select_related("request")
        )
        for attachment in stuck:
            if attachment.attempts >= MAX_ATTEMPTS:
                attachment.status = AttachmentStatus.FAILED
                attachment.error = f"stuck in processing {attachment.attempts} times; given up"
                attachment.save(update_fields=["status", "error"])
                failed += 1
                log.error("attachment=%s failed: stuck %s times", attachment.pk, attachment.attempts)
                continue
            attachment.status = AttachmentStatus.PENDING
            attachment.processing_started_at = None
            attachment.save(update_fields=["status", "processing_started_at"])
            enqueue_processing(attachment.request.org_id, [attachment.pk])
            released += 1
            log.warning("attachment=%s released from processing (attempt %s)", attachment.pk, attachment.attempts)
    return {"released": released, "failed": failed}
