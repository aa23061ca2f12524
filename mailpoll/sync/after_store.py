"""A poll's last step: the mailbox's due post-actions, applied on the poll's own session.

It runs after every folder was read, so it never delays intake, and it never
touches a cursor: a message's post-action was inserted with the message
(``mailpoll.sync.store``), and the cursor had moved over it by then. Nothing it
meets fails the poll: a refusal, a lost connection, even the database going
away is recorded on the post-actions (retried later, ``mailpoll.post_actions``)
or logged, and the mailbox's poll outcome stays what reading it made it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .. import post_actions
from ..post_actions import ERROR, PostActionResult
from ..providers import FolderError, ProviderError
from .folder_sync import reset_connection_if_broken

log = logging.getLogger("mailpoll.poller")


@dataclass
class Applied:
    """What one poll's post-actions came to (logged with the poll)."""

    done: int = 0
    gone: int = 0
    errors: int = 0


def apply_due(provider, mailbox) -> Applied:
    """Claim the mailbox's due post-actions, apply them folder by folder, record each outcome."""
    applied = Applied()
    try:
        claimed = post_actions.claim(mailbox.pk)
    except Exception:
        reset_connection_if_broken()
        log.exception("mailbox=%s post-actions could not be read; they wait for the next poll", mailbox.pk)
        return applied
    lost = ""  # the session ended: every folder left gets this error, not a command
    for folder, claimed_items in claimed.items():
        items = [item for item, _ in claimed_items]
        if lost:
            results = {}
        else:
            try:
                results = provider.apply_post_actions(folder, items)
            except FolderError as exc:
                results = {item.id: PostActionResult(ERROR, str(exc)) for item in items}
                lost = str(exc) if exc.session_lost else ""
            except ProviderError as exc:
                results, lost = {}, str(exc)
            except Exception as exc:
                # A bug or a library's surprise: named by its type, and the session is not trusted further.
                log.exception("mailbox=%s folder=%s post-actions failed", mailbox.pk, folder)
                results, lost = {}, f"{type(exc).__name__}: {exc}"
        for item, attempts in claimed_items:
            result = results.get(item.id) or PostActionResult(ERROR, lost or "the server said nothing about it")
            try:
                post_actions.record(mailbox.pk, item, attempts, result)
            except Exception:
                reset_connection_if_broken()
                # Leased: due again when the lease ends, as if this poll had not reached it.
                log.exception("mailbox=%s post-action %s: its outcome (%s) could not be recorded", mailbox.pk,
                              item.id, result.outcome)
                continue
            applied.done += result.outcome == post_actions.DONE
            applied.gone += result.outcome == post_actions.GONE
            applied.errors += result.outcome == ERROR
    if claimed:
        log.info("mailbox=%s post-actions done=%s gone=%s errors=%s", mailbox.pk, applied.done, applied.gone,
                 applied.errors)
    return applied
