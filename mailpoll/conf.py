"""Mail intake settings, each declared once; read them with ``get(name)`` (see seoinsight.conf)."""

from seoinsight.conf import Declarations, Setting

SETTINGS = Declarations(
    Setting("MAILPOLL_INTERVAL", float, 120.0, "seconds between poll cycles of `pollmail`"),
    Setting("MAILPOLL_MAX_MESSAGE_BYTES", int, 25 * 1024 * 1024,
            "a message larger than this becomes a rejected Request; no IMAP literal larger than this is read"),
    Setting("MAILPOLL_FETCH_BATCH", int, 25, "messages per IMAP FETCH"),
    Setting("MAILPOLL_FETCH_MAX_BYTES", int, 50 * 1024 * 1024,
            "...and at most this many bytes of them: a batch of big messages is split"),
    Setting("MAILPOLL_STUCK_AFTER", float, 900.0,
            "seconds before an attachment stuck in `processing` is released"),
    Setting("MAILPOLL_CLAIM_LIMIT", int, 10, "mailboxes claimed per cycle by one poller (seed 000)"),
    Setting("MAILPOLL_CONCURRENCY", int, 4, "mailboxes one poller polls at once, each on its own connections"),
    Setting("MAILPOLL_POLL_DEADLINE", float, 300.0,
            "seconds one mailbox's poll may take in all; then its connection is cut"),
    Setting("MAILPOLL_SOCKET_TIMEOUT", float, 60.0, "seconds one IMAP connect, read or write may wait"),
    Setting("MAILPOLL_BACKOFF_MAX", float, 3600.0,
            "longest wait, in seconds, before a failing mailbox is tried again"),
)

get = SETTINGS.get
# Read by help texts that show the default.
DEFAULTS = SETTINGS.defaults()
