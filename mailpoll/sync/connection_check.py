"""The admin's *Test connection*: connect, log in and look at each folder, within a short deadline.

It goes through the provider a poll would use (``providers.for_mailbox``: IMAP with a password or XOAUTH2,
Gmail, Graph), with the same tokens, and selects each configured folder read-only
(``check_folder``): nothing is fetched, stored or changed, no cursor moves, and the mailbox's health is left
alone. A watcher shuts the connection down at the deadline, as a poll's does (``mailbox_poll.Watch``).

The outcome is a headline in plain words (``providers.diagnosis``) and details: what each folder holds, and
the raw text of what went wrong, with any URL cut to its origin and the mailbox's own secrets masked. Only the
headline is logged.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from seoinsight.crypto import SecretUnreadable
from seoinsight.outbound import scrub

from .mailbox_poll import Watch
from ..models import Mailbox
from ..providers import FolderError, for_mailbox
from ..providers.diagnosis import TIMED_OUT, chain, headline, success

log = logging.getLogger("mailpoll.poller")

# Seconds the whole test may take: an operator is waiting for the page.
DEADLINE = 15.0
MASK = "•••"


@dataclass(frozen=True)
class Outcome:
    ok: bool
    headline: str
    details: list[str] = field(default_factory=list)


def check(mailbox: Mailbox, *, deadline: float = DEADLINE) -> Outcome:
    """Test ``mailbox``'s connection and folders now; never raises for what the server or the network does."""
    counts: list[tuple[str, int | None]] = []
    problems: list[str] = []
    details: list[str] = []
    watch = None
    try:
        provider = for_mailbox(mailbox)
        watch = Watch(provider, deadline, threading.Event())
        with watch, provider:
            for folder in mailbox.folder_list:
                try:
                    count = provider.check_folder(folder)
                except FolderError as exc:
                    problems.append(headline(exc, folder=folder))
                    details.append(f"{folder}: {_raw(exc, mailbox)}")
                else:
                    counts.append((folder, count))
                    details.append(f"{folder}: {'found' if count is None else f'{count} messages'}")
    except Exception as exc:
        shown = headline(exc)
        if watch is not None and watch.cause == Watch.DEADLINE:
            shown = f"{TIMED_OUT}: no answer within {deadline:g} s"
        outcome = Outcome(False, shown, [*details, _raw(exc, mailbox)])
    else:
        outcome = Outcome(not problems, problems[0] if problems else success(counts), details)
    log.info("mailbox=%s connection test: %s", mailbox.pk, outcome.headline)
    return outcome


def _raw(exc: BaseException, mailbox: Mailbox) -> str:
    """What the exception and the ones under it said, one after the other: for the details, never the headline."""
    text = " ← ".join(f"{type(error).__name__}: {error}" for error in chain(exc, suppressed=False))
    for read in (mailbox.get_secret, mailbox.get_app_secret):
        try:
            secret = read()
        except SecretUnreadable:
            continue  # nothing could read it, so no error can show it
        if secret:
            text = text.replace(secret, MASK)
    return scrub(text)
