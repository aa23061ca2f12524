"""The admin's *Test connection*: connect, log in and look at each folder, within a short deadline.

It goes through the provider a poll would use (``providers.for_mailbox``: IMAP with a password or XOAUTH2,
Gmail, Graph), with the same tokens, and selects each configured folder read-only
(``check_folder``): nothing is fetched, stored or changed, no cursor moves, and the mailbox's health is left
alone. A watcher shuts the connection down at the deadline, as a poll's does (``mailbox_poll.Watch``).
An IMAP mailbox connects only where ``providers.destination`` allows (mail ports, public addresses).

The outcome is a headline in plain words (``providers.diagnosis``) and details: what each folder holds, and
the kinds of error that failed it. What a server answered is never shown beyond that classified reason: a
button that printed it would read the banner of whatever listens at the host and port typed in.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from .mailbox_poll import Watch
from ..models import Mailbox
from ..providers import FolderError, for_mailbox
from ..providers.destination import DestinationRefused
from seoinsight.exc_chain import chain

from ..providers.diagnosis import TIMED_OUT, headline, success
from ..providers.transport import NotImapServer

log = logging.getLogger("mailpoll.poller")

# Seconds the whole test may take: an operator is waiting for the page.
DEADLINE = 15.0
NOT_IMAP = "not an IMAP server"


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
                    details.append(f"{folder}: {problems[-1]} ({_kinds(exc)})")
                else:
                    counts.append((folder, count))
                    details.append(f"{folder}: {'found' if count is None else f'{count} messages'}")
    except Exception as exc:
        shown = _headline(exc)
        if watch is not None and watch.cause == Watch.DEADLINE:
            shown = f"{TIMED_OUT}: no answer within {deadline:g} s"
        outcome = Outcome(False, shown, [*details, f"failed with {_kinds(exc)}"])
    else:
        outcome = Outcome(not problems, problems[0] if problems else success(counts), details)
    log.info("mailbox=%s connection test: %s", mailbox.pk, outcome.headline)
    return outcome


def _headline(exc: BaseException) -> str:
    """``diagnosis.headline``, but for the refusals of ``transport`` and ``destination``, said in our own words."""
    for error in chain(exc):
        if isinstance(error, DestinationRefused):
            return str(error)  # the rule that refused, written here: nothing of a server's
        if isinstance(error, NotImapServer):
            return NOT_IMAP
    return headline(exc)


def _kinds(exc: BaseException) -> str:
    """The types of the exception and the ones under it, outermost first: never their texts, which may
    quote the server (or a secret)."""
    return " ← ".join(type(error).__name__ for error in chain(exc, suppressed=False))
