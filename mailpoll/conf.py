"""Mail intake settings (all from the environment through seoinsight.settings).

MAILPOLL_INTERVAL         seconds between poll cycles of `pollmail` (default 120)
MAILPOLL_MAX_MESSAGE_BYTES  a message larger than this becomes a rejected Request (25 MB); no IMAP literal
                          larger than this is read
MAILPOLL_FETCH_BATCH      messages per IMAP FETCH (default 25)
MAILPOLL_FETCH_MAX_BYTES  ...and at most this many bytes of them (50 MB): a batch of big messages is split
MAILPOLL_STUCK_AFTER      seconds before an attachment stuck in `processing` is released (900)
MAILPOLL_CLAIM_LIMIT      mailboxes claimed per cycle by one poller (10, seed 000)
MAILPOLL_CONCURRENCY      mailboxes one poller polls at once, each on its own connections (4)
MAILPOLL_POLL_DEADLINE    seconds one mailbox's poll may take in all; then its connection is cut (300)
MAILPOLL_SOCKET_TIMEOUT   seconds one IMAP connect, read or write may wait (60)
MAILPOLL_BACKOFF_MAX      longest wait, in seconds, before a failing mailbox is tried again (3600)
"""

from django.conf import settings

DEFAULTS = {
    "MAILPOLL_INTERVAL": 120.0,
    "MAILPOLL_MAX_MESSAGE_BYTES": 25 * 1024 * 1024,
    "MAILPOLL_FETCH_BATCH": 25,
    "MAILPOLL_FETCH_MAX_BYTES": 50 * 1024 * 1024,
    "MAILPOLL_STUCK_AFTER": 900.0,
    "MAILPOLL_CLAIM_LIMIT": 10,
    "MAILPOLL_CONCURRENCY": 4,
    "MAILPOLL_POLL_DEADLINE": 300.0,
    "MAILPOLL_SOCKET_TIMEOUT": 60.0,
    "MAILPOLL_BACKOFF_MAX": 3600.0,
}


def get(name: str):
    return getattr(settings, name, DEFAULTS[name])
