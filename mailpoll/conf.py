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
    Setting("MAILPOLL_CLAIM_LIMIT", int, 10,
            "mailboxes one poller claims at the start of a cycle, then as many as it has threads free"),
    Setting("MAILPOLL_CONCURRENCY", int, 4, "mailboxes one poller polls at once, each on its own connections"),
    Setting("MAILPOLL_POLL_DEADLINE", float, 300.0,
            "seconds one mailbox's poll may take in all; then its connection is cut"),
    Setting("MAILPOLL_SOCKET_TIMEOUT", float, 60.0, "seconds one IMAP or API connect, read or write may wait"),
    Setting("MAILPOLL_BACKOFF_MAX", float, 3600.0,
            "longest wait, in seconds, before a failing mailbox is tried again"),
    # Live mailboxes: IMAP IDLE inside pollmail (mailpoll.live, issue 12).
    Setting("MAILPOLL_LIVE_RECONCILE", float, 5.0,
            "seconds between the live supervisor's looks at the table (live mailboxes switched, added, removed)"),
    Setting("MAILPOLL_LIVE_REIDLE", float, 1500.0,
            "seconds one IDLE lasts before it is re-issued (RFC 2177: under 29 minutes; capped there)"),
    Setting("MAILPOLL_LIVE_MAX_SILENCE", float, 300.0,
            "seconds without a word from the server before a NOOP and a cursor check of the watched folder"),
    Setting("MAILPOLL_LIVE_BACKOFF", float, 1.0, "first wait, in seconds, before a live connection is retried"),
    Setting("MAILPOLL_LIVE_BACKOFF_MAX", float, 300.0, "longest wait before a live connection is retried"),
    # API mailboxes and OAuth (issue 11). Every endpoint is a setting, so a secret is only ever sent to a host
    # configured here; each must be https (http only on 127.0.0.1 / localhost: mailpoll.E003).
    Setting("MAILPOLL_GMAIL_API_URL", str, "https://gmail.googleapis.com/", "the Gmail API's base URL"),
    Setting("MAILPOLL_GOOGLE_AUTH_URL", str, "https://accounts.google.com/o/oauth2/v2/auth",
            "Google's OAuth authorization endpoint (the admin's Connect button)"),
    Setting("MAILPOLL_GOOGLE_TOKEN_URL", str, "https://oauth2.googleapis.com/token",
            "Google's OAuth token endpoint (refreshes, code exchange, service-account assertions)"),
    Setting("MAILPOLL_GOOGLE_CLIENT_ID", str, "", "the Google OAuth client of user-consent mailboxes"),
    Setting("MAILPOLL_GOOGLE_CLIENT_SECRET", str, "", "...its secret"),
    Setting("MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE", str, "",
            "path of a Workspace service account's JSON key (domain-wide delegation), for service Gmail mailboxes"),
    Setting("MAILPOLL_GRAPH_API_URL", str, "https://graph.microsoft.com/v1.0", "Microsoft Graph's base URL"),
    Setting("MAILPOLL_MICROSOFT_AUTHORITY", str, "https://login.microsoftonline.com",
            "Microsoft's identity platform (authorize and token endpoints under /<tenant>/oauth2/v2.0/)"),
    Setting("MAILPOLL_MICROSOFT_TENANT", str, "organizations", "the tenant of Microsoft mailboxes that name none"),
    Setting("MAILPOLL_MICROSOFT_CLIENT_ID", str, "", "the Microsoft app (client) id"),
    Setting("MAILPOLL_MICROSOFT_CLIENT_SECRET", str, "", "...its client secret"),
    Setting("MAILPOLL_API_CA_BUNDLE", str, "",
            "a CA bundle to verify the API and token endpoints with instead of the system's (a private endpoint)"),
    # Where an org's IMAP mailbox may make the server connect (mailpoll.providers.destination, issue 35).
    Setting("MAILPOLL_ALLOW_PRIVATE_HOSTS", bool, False,
            "IMAP mailboxes may reach loopback, private, link-local and reserved addresses (an on-premise mail "
            "server; tests): mailpoll.W006 says when it is on"),
    Setting("MAILPOLL_EXTRA_PORTS", str, "",
            "ports an IMAP mailbox may use besides 993 and 143, comma-separated; * for any port (mailpoll.W007)"),
)

# The settings above that are endpoints: https, or http on the loopback only.
URL_SETTINGS = ("MAILPOLL_GMAIL_API_URL", "MAILPOLL_GOOGLE_AUTH_URL", "MAILPOLL_GOOGLE_TOKEN_URL",
                "MAILPOLL_GRAPH_API_URL", "MAILPOLL_MICROSOFT_AUTHORITY")

get = SETTINGS.get
# Read by help texts that show the default.
DEFAULTS = SETTINGS.defaults()
