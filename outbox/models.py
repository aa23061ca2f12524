"""The outbox: accepted documents the downstream system has not acknowledged yet (docs/mail.md, "The downstream outbox").

A row exists exactly while its document is held: it is written in the
transaction that makes the document accepted and deleted once the downstream
answered 2xx, so the table is the held set and its row count the outbox depth.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from seoinsight.models import Org


class EntryState(models.TextChoices):
    # In by the accept (insert) or a sender's failed try; out when a sender claims it.
    WAITING = "waiting", "Waiting"
    # In by a sender's claim (or a re-claim of an expired lease); out by done (deleted), failed
    # (waiting again) or the lease expiring (another sender's claim).
    SENDING = "sending", "Sending"


class EntryQuerySet(models.QuerySet):
    def waiting(self):
        return self.filter(state=EntryState.WAITING)

    def sending(self):
        return self.filter(state=EntryState.SENDING)


class Entry(models.Model):
    # The Idempotency-Key the downstream dedupes on: the document's (outbox.entries.idempotency_key), the same
    # on every try and every send of the document; the default serves rows written other than by ``add``.
    key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="outbox_entries")
    # What was accepted, e.g. "mailpoll.attachment:42": one entry per document, ever (UNIQUE).
    document_ref = models.CharField(max_length=200, unique=True)
    source = models.CharField(max_length=20)
    # The JSON body, as it was when the document was accepted.
    document = models.JSONField()
    # The stored file sent along (seoinsight.storage name), checked against size and sha256; blank: none.
    file = models.CharField(max_length=300, blank=True)
    file_size = models.BigIntegerField(default=0)
    file_sha256 = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=10, choices=EntryState.choices, default=EntryState.WAITING)
    attempts = models.IntegerField(default=0)
    last_error = models.TextField(blank=True)
    # Its last try found the downstream unreachable (no answer, or 502 / 503 / 504), not refusing this document:
    # the downstream's next success makes it due at once (outbox.sql.RECOVERED) instead of after its backoff.
    unreachable = models.BooleanField(default=False, db_default=False)
    next_attempt_at = models.DateTimeField(db_default=models.functions.Now())
    claimed_by = models.CharField(max_length=200, blank=True)
    # A new token per claim: a sender whose lease expired and was re-claimed cannot fail its successor's try.
    claim_token = models.UUIDField(null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    last_tried_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=models.functions.Now())

    objects = EntryQuerySet.as_manager()

    class Meta:
        verbose_name = "outbox entry"
        verbose_name_plural = "outbox"
        constraints = [
            models.CheckConstraint(condition=Q(state__in=["waiting", "sending"]), name="outbox_state_valid"),
            # A claim is whole or absent: sending has its holder, token and lease; waiting has none of them.
            models.CheckConstraint(
                condition=(Q(state="sending", claim_token__isnull=False, lease_until__isnull=False)
                           & ~Q(claimed_by=""))
                | Q(state="waiting", claim_token__isnull=True, lease_until__isnull=True, claimed_by=""),
                name="outbox_claim_whole"),
            models.CheckConstraint(condition=Q(attempts__gte=0), name="outbox_attempts_not_negative"),
        ]
        indexes = [models.Index(fields=["next_attempt_at", "id"], name="outbox_due_idx")]

    def __str__(self):
        return f"{self.document_ref} ({self.state}, {self.attempts} tries)"
