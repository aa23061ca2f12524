"""What a connection test found, in plain words: an exception becomes one short headline (pure).

The headline is what an operator reads first: "host not found", "wrong user or password", "folder INBOX
missing". The exceptions' own texts (``gaierror``, ``b'[AUTHENTICATIONFAILED] …'``) are the details, shown
apart. A provider wraps what went wrong underneath (``ProviderError(...) from exc``), so the whole chain is
looked at: the types first, from the outside in; then the words of errors whose cause was cut on purpose
(the Gmail and Graph sources keep URLs and tokens out of their messages); else a headline that says where to
look.
"""

from __future__ import annotations

import re
import socket
import ssl

from imapclient.exceptions import LoginError

from seoinsight.crypto import SecretUnreadable
from seoinsight.exc_chain import chain

from ..oauth.apps import NotConfigured, NotConnected, NotGranted
from ..oauth.tokens import NeedsReauthorization, TokenRefreshError
from .base import FolderError, PollInterrupted
from .changes import Throttled

HOST_NOT_FOUND = "host not found"
REFUSED = "connection refused"
TIMED_OUT = "timed out"
RESET = "connection closed by the server"
UNREACHABLE = "the server could not be reached"
WRONG_HOST = "certificate not valid for this host"
UNTRUSTED = "certificate not trusted (self-signed or unknown issuer)"
EXPIRED = "certificate expired"
BAD_CERTIFICATE = "certificate not valid"
NO_TLS = "TLS failed: check the port and the security setting"
WRONG_LOGIN = "wrong user or password"
LOGIN_REFUSED = "login refused by the server"
TOKEN_REFUSED = "the server refused the OAuth token"
NO_XOAUTH2 = "the server does not take OAuth tokens"
NOT_CONNECTED = "not connected: use Connect"
NEEDS_REAUTH = "needs re-authorization: use Connect again"
NOT_GRANTED = "this org has no grant of the deployment's identity for this address"
NOT_CONFIGURED = "the OAuth app is not configured"
SECRET_UNREADABLE = "the stored secret cannot be read: type it again"
TOKEN_FAILED = "the token could not be refreshed"
CREDENTIALS_REFUSED = "the provider refused the app's credentials"
ACCESS_DENIED = "access denied to this mailbox"
THROTTLED = "the provider is throttling: try again later"
FAILED = "the test failed: see the details"

# OpenSSL's verify codes (X509_V_ERR_*) of a certificate the client refused.
CERTIFICATE_CODES = {62: WRONG_HOST, 10: EXPIRED, 18: UNTRUSTED, 19: UNTRUSTED, 20: UNTRUSTED, 21: UNTRUSTED}
# What a server says when it refuses a user name and password (RFC 5530's codes, and common wordings).
WRONG_LOGIN_WORDS = re.compile(r"AUTHENTICATIONFAILED|AUTHORIZATIONFAILED|invalid credentials|authentication "
                               r"failed|LOGIN failed|incorrect (user|password)", re.IGNORECASE)
# A folder the server does not have, as IMAP (RFC 5530), Gmail and Graph say it.
MISSING_FOLDER_WORDS = re.compile(r"NONEXISTENT|doesn't exist|does not exist|no such|not found|has no label|"
                                  r"ErrorItemNotFound|ErrorInvalidIdMalformed", re.IGNORECASE)
# What an error of each type means, the first type that matches (a subclass before its base class).
TYPE_RULES = (
    (socket.gaierror, HOST_NOT_FOUND),
    (ConnectionRefusedError, REFUSED),
    (ssl.SSLError, NO_TLS),
    ((TimeoutError, PollInterrupted), TIMED_OUT),
    ((ConnectionResetError, ConnectionAbortedError, BrokenPipeError), RESET),
    (NeedsReauthorization, NEEDS_REAUTH),
    (NotConnected, NOT_CONNECTED),
    (NotGranted, NOT_GRANTED),
    (NotConfigured, NOT_CONFIGURED),
    (TokenRefreshError, TOKEN_FAILED),
    (SecretUnreadable, SECRET_UNREADABLE),
    (Throttled, THROTTLED),
)
# The words of errors whose cause was cut on purpose, lowered: the first that the chain's texts hold wins.
TEXT_RULES = (
    ("certificate verify failed", BAD_CERTIFICATE),
    ("could not be reached: connection refused", REFUSED),
    ("could not be reached: host not found", HOST_NOT_FOUND),
    ("could not be reached: timed out", TIMED_OUT),
    ("could not be reached", UNREACHABLE),
    ("xoauth2 was refused", TOKEN_REFUSED),
    ("does not offer xoauth2", NO_XOAUTH2),
    ("google refused service account", CREDENTIALS_REFUSED),
    ("invalid_client", CREDENTIALS_REFUSED),
    ("erroraccessdenied", ACCESS_DENIED),
    ("http 403", ACCESS_DENIED),
    ("answered 403", ACCESS_DENIED),
)


def headline(exc: BaseException, *, folder: str | None = None) -> str:
    """The plain words for ``exc``; ``folder``: the folder being looked at, when it was one.

    >>> headline(socket.gaierror(-2, "Name or service not known"))
    'host not found'
    >>> headline(FolderError("select failed: Mailbox doesn't exist: Orders"), folder="Orders")
    'folder Orders missing'
    """
    # The outermost error that says something: a token refresh that failed on a refused connection is about the
    # token, a poll cut at its deadline about the time, whatever the socket said when it was shut.
    shown = next((shown for shown in (_by_type(error, folder) for error in chain(exc)) if shown), "")
    if shown:
        return shown
    text = " ".join(str(error) for error in chain(exc)).lower()
    return next((shown for words, shown in TEXT_RULES if words in text), FAILED)


def _by_type(error: BaseException, folder: str | None) -> str:
    if isinstance(error, ssl.SSLCertVerificationError):
        return CERTIFICATE_CODES.get(error.verify_code, BAD_CERTIFICATE)
    if isinstance(error, LoginError):
        return WRONG_LOGIN if WRONG_LOGIN_WORDS.search(str(error)) else LOGIN_REFUSED
    if isinstance(error, FolderError) and folder is not None:
        missing = MISSING_FOLDER_WORDS.search(str(error))
        return f"folder {folder} missing" if missing else f"folder {folder} refused by the server"
    return next((shown for kind, shown in TYPE_RULES if isinstance(error, kind)), "")


def success(counts: list[tuple[str, int | None]]) -> str:
    """The headline of a test that reached every folder: how many, and what the first one holds.

    >>> success([("INBOX", 12), ("Orders", 3), ("Sent", 0)])
    'OK: 3 folders, INBOX has 12 messages'
    >>> success([("INBOX", 1)]), success([("inbox", None)])
    ('OK: 1 folder, INBOX has 1 message', 'OK: 1 folder, inbox found')
    """
    first, count = counts[0]
    holds = "found" if count is None else f"has {count} message{'' if count == 1 else 's'}"
    return f"OK: {len(counts)} folder{'' if len(counts) == 1 else 's'}, {first} {holds}"


def recorded(exc: BaseException, raw: str, *, note: str = "") -> str:
    """A failed poll's ``last_error``: the headline *Test connection* gives (and ``note``), then ``raw`` below it.

    >>> recorded(ConnectionRefusedError(111, "Connection refused"), "h:993: ConnectionRefusedError: [Errno 111]")
    'connection refused\\nh:993: ConnectionRefusedError: [Errno 111]'

    Without a headline of its own (FAILED) the raw text is the whole record, as before.
    """
    shown = headline(exc)
    if shown == FAILED:
        return raw + note
    return f"{shown}{note}\n{raw}"


def split_recorded(last_error: str) -> tuple[str, str]:
    """(headline, details) of a recorded error; one line, or one recorded before headlines, is all headline."""
    first, _, rest = last_error.partition("\n")
    return first, rest
