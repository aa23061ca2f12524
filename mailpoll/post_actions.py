"""Every move of ``PostAction.status``, in one place (as ``mailpoll.attachments`` is for documents).

A post-action (mark read, move, add a label) is what the source mailbox's server is asked to do to a
message once its documents are stored. Its row is inserted in the transaction that stores the message
(``mailpoll.sync.store``), so it exists exactly when there is something safe to act on.

- ``claim``: pending and due → pending, leased (``next_try_at`` pushed past the attempt), counted and marked
  (``claimed_at``, before anything is done at the server; ``record`` clears it)
- ``record``: pending → done | gone, or → pending again later (an error), or → failed once out of attempts
- ``try_again``: failed | pending → pending, due now, attempts from 0 (the admin's Try again)

No transition leads out of ``done`` or ``gone``. Each is one statement conditional on the state it
leaves. The claim's lease keeps two pollers from acting on one message at once, and a poller that dies
mid-way leaves its rows due again when the lease ends. Applying one twice is harmless anyway: marking
read is idempotent, and a message already moved is simply ``gone`` from the folder — unless the claim
that moved it was our own and never recorded (``claimed_at`` still set): then that move is ``done``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection
from django.db.models import Q
from django.utils import timezone

from seoinsight.backoff import doubling

from .models import MailRule, PostAction, PostActionKind, PostActionStatus

log = logging.getLogger(__name__)

MARK_READ, MOVE, LABEL = PostActionKind.MARK_READ, PostActionKind.MOVE, PostActionKind.LABEL
# A post-action's outcome at the server: applied; the message is no longer where it was stored from (nothing to
# do, ever); or an error, tried again later.
DONE, GONE, ERROR = "done", "gone", "error"

MAX_ATTEMPTS = 8  # then failed, for an operator: about a day of tries with the delays below
FIRST_DELAY = 300.0  # seconds before the first retry, doubling after each failure
MAX_DELAY = 6 * 3600.0
LEASE = timedelta(minutes=10)  # longer than applying a poll's due post-actions takes
CLAIM_LIMIT = 500  # per mailbox and poll: the rest wait for the next poll


@dataclass(frozen=True)
class PostActionItem:
    """One message's post-action, as a provider applies it."""

    id: int  # the PostAction row
    ref: int | str  # an IMAP UID, or an API provider's message id
    uidvalidity: int | None  # IMAP: the folder's UIDVALIDITY when the message was stored (its UID names it only then)
    action: str  # MARK_READ | MOVE | LABEL
    destination: str = ""  # the folder (MOVE) or label (LABEL), by name
    # An earlier claim of it was never recorded: that poller stopped (killed) after claiming, maybe after acting.
    unrecorded: bool = False


@dataclass(frozen=True)
class PostActionResult:
    outcome: str  # DONE | GONE | ERROR
    detail: str = ""  # why (GONE, ERROR); safe to show, no secrets


def after_error(attempts: int, max_attempts: int = MAX_ATTEMPTS) -> tuple[str, float]:
    """What an error makes of a post-action tried ``attempts`` times: (status, seconds until the next try).

    >>> after_error(1), after_error(2), after_error(7)
    (('pending', 300.0), ('pending', 600.0), ('pending', 19200.0))
    >>> after_error(8), after_error(9)
    (('failed', 0.0), ('failed', 0.0))
    """
    if attempts >= max_attempts:
        return PostActionStatus.FAILED.value, 0.0
    return PostActionStatus.PENDING.value, doubling(attempts, FIRST_DELAY, MAX_DELAY)


def setting_problem(action: str, destination: str, providers: set[str], read_folders: set[str]) -> tuple[str, str]:
    """What is wrong with a post-action as typed: (the field to blame, why), or ("", "").

    ``providers`` and ``read_folders``: of every mailbox it may apply to (a rule's may be several).

    >>> setting_problem("move", "", {"imap"}, {"INBOX"})
    ('post_action_folder', 'Moving needs the folder to move to.')
    >>> setting_problem("mark_read", "Done", {"imap"}, {"INBOX"})
    ('post_action_folder', 'Only moving or labelling names a folder or label: clear it.')
    >>> setting_problem("label", "seo", {"imap", "gmail"}, set())[1]
    "Labels are Gmail's, and this applies to IMAP mailboxes too: move or mark read instead."
    >>> setting_problem("move", "INBOX", {"imap"}, {"INBOX"})[1]
    'INBOX is read for new mail: a message moved there would be read again. Choose another folder.'
    >>> setting_problem("move", "Processed", {"graph"}, {"INBOX"}), setting_problem("", "", {"imap"}, set())
    (('', ''), ('', ''))
    """
    if action in (MOVE, LABEL) and not destination:
        return "post_action_folder", ("Moving needs the folder to move to." if action == MOVE
                                      else "Labelling needs the label to add.")
    if action not in (MOVE, LABEL):
        return ("post_action_folder", "Only moving or labelling names a folder or label: clear it.") if destination \
            else ("", "")
    others = sorted(providers - {"gmail"})
    if action == LABEL and others:
        names = ", ".join({"imap": "IMAP", "graph": "Microsoft Graph"}.get(p, p) for p in others)
        return "post_action", f"Labels are Gmail's, and this applies to {names} mailboxes too: move or mark read instead."
    if action == MOVE and destination in read_folders:
        return "post_action_folder", (f"{destination} is read for new mail: a message moved there would be read "
                                      "again. Choose another folder.")
    return "", ""


def changes_source(mailbox) -> bool:
    """Whether post-actions may change this mailbox's messages: its own is set, or an enabled rule of its org
    that may apply to it names one (its grant must then allow changes)."""
    if mailbox.post_action:
        return True
    rules = MailRule.objects.filter(org_id=mailbox.org_id, enabled=True, post_action__in=PostActionKind.values)
    return rules.filter(Q(mailboxes__isnull=True) | Q(mailboxes=mailbox.pk)).exists()


# One statement: the due rows of a mailbox, locked past a concurrent claimer (SKIP LOCKED), leased and counted.
# The claim is written down (claimed_at) before anything is done at the server; the previous claim's mark,
# still there, says that claim's poller stopped before recording what it did.
CLAIM = """
WITH due AS MATERIALIZED (
    SELECT id, claimed_at FROM mailpoll_postaction
    WHERE mailbox_id = %(mailbox_id)s AND status = 'pending' AND next_try_at <= %(now)s
    ORDER BY next_try_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE mailpoll_postaction AS p
SET next_try_at = %(lease_until)s, attempts = p.attempts + 1, claimed_at = %(now)s
FROM due
WHERE p.id = due.id
RETURNING p.id, p.folder, p.uid, p.uidvalidity, p.provider_ref, p.action, p.destination, p.attempts,
          due.claimed_at IS NOT NULL
"""


def claim(mailbox_id: int, limit: int = CLAIM_LIMIT) -> dict[str, list[tuple[PostActionItem, int]]]:
    """pending and due → leased: by folder, each item with its attempt number (this one included)."""
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(CLAIM, {"mailbox_id": mailbox_id, "now": now, "lease_until": now + LEASE, "limit": limit})
        rows = cursor.fetchall()
    by_folder: dict[str, list[tuple[PostActionItem, int]]] = {}
    for pk, folder, uid, uidvalidity, provider_ref, action, destination, attempts, unrecorded in sorted(rows):
        item = PostActionItem(pk, uid if uid is not None else provider_ref, uidvalidity, action, destination,
                              unrecorded)
        by_folder.setdefault(folder, []).append((item, attempts))
    return by_folder


def own_move(item: PostActionItem, result: PostActionResult) -> bool:
    """Whether a message found gone was moved by our own earlier claim, which never recorded it.

    A move's claim is written before the move and cleared by its record, so a poller killed between the
    two leaves the mark: the message missing from its folder is where that move put it, not a third party's.

    >>> moved = PostActionItem(1, 7, 1, MOVE, "Done", unrecorded=True)
    >>> own_move(moved, PostActionResult(GONE)), own_move(PostActionItem(1, 7, 1, MOVE, "Done"), PostActionResult(GONE))
    (True, False)
    >>> own_move(PostActionItem(1, 7, 1, MARK_READ, unrecorded=True), PostActionResult(GONE))
    False
    """
    return result.outcome == GONE and item.action == MOVE and item.unrecorded


def record(mailbox_id: int, item: PostActionItem, attempts: int, result: PostActionResult) -> bool:
    """pending → done | gone | pending later | failed, by the server's answer; False if it was no longer pending."""
    now = timezone.now()
    pending = PostAction.objects.filter(pk=item.id, status=PostActionStatus.PENDING)
    if own_move(item, result):
        log.info("mailbox=%s post-action %s: message %s already moved to %s by an earlier try whose poller stopped "
                 "before recording it", mailbox_id, item.id, item.ref, item.destination)
        result = PostActionResult(DONE)
    if result.outcome == DONE:
        return bool(pending.update(status=PostActionStatus.DONE, finished_at=now, last_error="", claimed_at=None))
    if result.outcome == GONE:
        # Not a failure: whoever moved or deleted the message acted on it first; nothing will ever be left to do.
        log.info("mailbox=%s post-action %s: message %s gone: %s", mailbox_id, item.id, item.ref, result.detail)
        return bool(pending.update(status=PostActionStatus.GONE, finished_at=now, last_error=result.detail[:2000],
                                   claimed_at=None))
    status, delay = after_error(attempts)
    error = (result.detail or "failed")[:2000]
    log.warning("mailbox=%s post-action %s (%s) on message %s failed, attempt %s: %s%s", mailbox_id, item.id,
                item.action, item.ref, attempts, error, "; giving up" if status == PostActionStatus.FAILED else "")
    if status == PostActionStatus.FAILED:
        return bool(pending.update(status=status, finished_at=now, last_error=error, claimed_at=None))
    # The mark of an unrecorded earlier claim stays: that claim may still have moved the message.
    unmark = {} if item.unrecorded else {"claimed_at": None}
    return bool(pending.update(next_try_at=now + timedelta(seconds=delay), last_error=error, **unmark))


def try_again(ids, *, by: str) -> int:
    """failed | pending → pending, due at the mailbox's next poll, attempts from 0 (an operator's Try again)."""
    moved = PostAction.objects.filter(
        pk__in=list(ids), status__in=(PostActionStatus.FAILED, PostActionStatus.PENDING),
    ).update(status=PostActionStatus.PENDING, next_try_at=timezone.now(), attempts=0, finished_at=None,
             claimed_at=None)
    if moved:
        log.info("%s post-action(s) to be tried again at the next poll, by %s", moved, by)
    return moved
