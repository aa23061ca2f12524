"""The Search Console API client: the access token, ``searchanalytics.query``, retries.

What ``searchconsole_api`` (the ``import_api`` job) pulls pages through.

Transport, and why tests need no patching. Production and tests run the same code:

* The access token is fetched up front by the credentials themselves (``refresh``
  over a ``BoundedHttp``, its answer held to ``TOKEN_BYTES``) from the key's ``token_uri``. A revoked or wrong
  key fails there, with a message naming the service account. Tests give the fake
  key a ``token_uri`` on a loopback server (``tests/support/google.py``), so the
  real JWT signing and token exchange run. The client renews it the same way (near its
  expiry, or once after a 401), never ``AuthorizedHttp`` under a page's bound.
* API calls go through ``AuthorizedHttp(credentials, http=http_factory())``.
  ``http_factory`` is a module-level hook returning a fresh ``BoundedHttp``;
  tests point it at ``googleapiclient.http.HttpMockSequence``, the library's own
  mock transport, which records every request. ``api_endpoint`` (None: Google's,
  from the discovery document) lets network-fault tests send the real
  transport to a loopback server that drops, refuses, redirects or floods.
* ``build(..., static_discovery=True)`` reads the discovery document shipped with
  google-api-python-client, so nothing but the token and the queries touches the
  network.
* ``sleep`` (the pause between retries) is a module-level hook too.

Both go through ``seoinsight.bounded_http``: a credential follows no redirect (``RedirectRefused``) and an
answer is read to a bound (``answer_bytes`` of the page's rows; ``TOKEN_BYTES``) and no further
(``BodyTooLarge``). Either fails the pull at once with a SearchConsoleError saying so: not retried.

Errors: 429 and 5xx are retried up to ``MAX_ATTEMPTS`` times with exponential
backoff, honouring ``Retry-After``; so are failures of the connection itself
(refused, reset, dropped before the answer, timed out, host not found), of the
API and of the token endpoint alike, and the final error names the endpoint by its origin. No URL's path
or query (a key in it, or a server echoing the request) reaches a recorded error or a log line
(``seoinsight.outbound.where`` / ``scrub``).
401 (after one renewal), 403 and 404 mean the service account cannot see the property and fail at once;
any other 4xx is a bad query and fails at once.
"""

from __future__ import annotations

import http.client
import logging
import re
import ssl
import time
from datetime import date
import google_auth_httplib2
import httplib2
from google.auth.exceptions import GoogleAuthError, TransportError
from google.oauth2 import service_account
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError

from seoinsight.backoff import doubling
from seoinsight.bounded_http import TOKEN_BYTES, BoundedHttp, limited
from seoinsight.models import check_token_uri
from seoinsight.outbound import BodyTooLarge, RedirectRefused, scrub, where

log = logging.getLogger(__name__)

SCOPES = ["https://www.googleapis.com/auth/webmasters.readonly"]
MAX_ATTEMPTS = 5
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 60.0
RETRY_AFTER_MAX = 300.0  # a longer Retry-After is shortened: a worker is not parked for an hour
HTTP_TIMEOUT = 120  # seconds; a 25,000-row query can take a while
NO_ACCESS_STATUSES = {401, 403, 404}
API_MAX_ROWS = 25000  # rows per query, the API's maximum
# A page's answer may take ROW_BYTES per row asked for, plus ANSWER_OVERHEAD. Google's pretty-printed JSON
# takes about 300 bytes a row with a 100-character URL: room for URLs ten times as long (25,000 rows: 32 MB).
ROW_BYTES = 1280
ANSWER_OVERHEAD = 64 * 1024


def answer_bytes(row_limit: int) -> int:
    """The bytes the answer to a query for ``row_limit`` rows may take.

    >>> answer_bytes(25000), answer_bytes(2)
    (32065536, 68096)
    """
    return ANSWER_OVERHEAD + ROW_BYTES * row_limit


def default_http() -> httplib2.Http:
    return BoundedHttp(timeout=HTTP_TIMEOUT)


# Injection points (see the module docstring); tests replace them, nothing else should.
http_factory = default_http
sleep = time.sleep
api_endpoint: str | None = None

# Failures of the connection, not of the query: worth another try. httplib2
# raises the socket's and http.client's own errors (a refused connection is a
# bare ConnectionRefusedError); google-auth wraps some in TransportError.
NETWORK_ERRORS = (ConnectionError, TimeoutError, http.client.HTTPException, httplib2.ServerNotFoundError,
                  ssl.SSLEOFError, TransportError)


def network_failure(exc: BaseException) -> str | None:
    """What went wrong with the connection, for the operator, if ``exc`` is such a failure; else None.

    Looks through the wrappers (TransportError) at the error underneath.
    """
    seen, failure, walked = exc, None, set()
    while seen is not None and id(seen) not in walked:  # a chain may loop back on itself
        walked.add(id(seen))
        if isinstance(seen, NETWORK_ERRORS) and not isinstance(seen, TransportError):
            failure = seen
            break
        if isinstance(seen, TransportError) and seen.args and isinstance(seen.args[0], BaseException):
            seen = seen.args[0]
        else:
            seen = seen.__cause__ or seen.__context__
    if failure is None:
        return None
    if isinstance(failure, ConnectionRefusedError):
        summary = "connection refused"
    elif isinstance(failure, http.client.RemoteDisconnected):
        summary = "connection closed without an answer"
    elif isinstance(failure, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError, ssl.SSLEOFError)):
        summary = "connection reset"
    elif isinstance(failure, TimeoutError):
        summary = "timed out"
    elif isinstance(failure, httplib2.ServerNotFoundError):
        summary = "host not found"
    else:
        summary = "connection failed"
    detail = scrub(str(failure).strip())
    return f"{summary} ({type(failure).__name__}{': ' + detail[:200] if detail else ''})"


def endpoint_of(url: str) -> str:
    """The scheme, host and port of a URL, which is what an operator needs to check a network path: never
    its user name, password, path or query.

    >>> endpoint_of("https://robot:pw@searchconsole.googleapis.com/v1/?key=k")
    'https://searchconsole.googleapis.com'
    """
    return where(url)


class SearchConsoleError(Exception):
    """The pull cannot go on; the message is for the operator."""


class StatusRecordingRequest(google_auth_httplib2.Request):
    """google-auth's transport, remembering the HTTP status of the last response (its errors omit it)."""

    status: int | None = None

    def __call__(self, *args, **kwargs):
        response = super().__call__(*args, **kwargs)
        self.status = response.status
        return response


OAUTH_ERROR_CODE = re.compile(r"[a-z_]{1,40}")


def token_failure(exc: Exception, status: int | None) -> str:
    """What a tenant may read about a failed token exchange: the status and the OAuth error code.

    Never the body: with a token_uri of their choice it would be any server's answer. The code
    (``invalid_grant``...) is kept only when it looks like one of OAuth's (RFC 6749 §5.2).
    """
    if status is None:
        return f"the token endpoint could not be reached ({type(exc).__name__})"
    data = exc.args[1] if len(exc.args) > 1 else None
    code = data.get("error") if isinstance(data, dict) else None
    if isinstance(code, str) and OAUTH_ERROR_CODE.fullmatch(code):
        return f"the token endpoint answered HTTP {status} ({code})"
    return f"the token endpoint answered HTTP {status}"


def retry_delay(attempt: int, retry_after: str | None) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based).

    ``Retry-After`` in seconds wins, capped at RETRY_AFTER_MAX; otherwise (absent,
    or an HTTP date) the backoff doubles from BACKOFF_FIRST up to BACKOFF_MAX:

    >>> [retry_delay(n, None) for n in (1, 2, 3, 4, 8)]
    [1.0, 2.0, 4.0, 8.0, 60.0]
    >>> retry_delay(1, "7"), retry_delay(3, "0"), retry_delay(1, "3600")
    (7.0, 0.0, 300.0)
    >>> retry_delay(2, "Wed, 21 Oct 2026 07:28:00 GMT")
    2.0
    """
    if retry_after is not None:
        try:
            return min(max(float(retry_after), 0.0), RETRY_AFTER_MAX)
        except ValueError:
            pass
    return doubling(attempt, BACKOFF_FIRST, BACKOFF_MAX)


def retry_network(call, *, what: str, endpoint: str, job_id=None, max_attempts: int = MAX_ATTEMPTS):
    """``call()``, tried again after a failure of the connection (see NETWORK_ERRORS), up to ``max_attempts``.

    Any other error is the caller's. The last failure becomes a SearchConsoleError naming ``endpoint``.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return call()
        except NETWORK_ERRORS as exc:
            failure = network_failure(exc)
            if failure is None:
                raise
            wait_or_give_up(failure, attempt, max_attempts, what=what, endpoint=endpoint, job_id=job_id)


def wait_or_give_up(failure: str, attempt: int, max_attempts: int, *, what: str, endpoint: str, job_id) -> None:
    """After network failure number ``attempt``: pause before the next, or raise if it was the last."""
    if attempt >= max_attempts:
        raise SearchConsoleError(f"could not reach {what} at {endpoint} after {attempt} attempts: {failure}")
    delay = retry_delay(attempt, None)
    log.warning("job=%s %s at %s: %s, attempt %s/%s, retrying in %.1fs",
                job_id, what, endpoint, failure, attempt, max_attempts, delay)
    sleep(delay)


def access_token(credentials, request: StatusRecordingRequest, *, endpoint: str, job_id=None) -> None:
    """Refresh ``credentials`` (a service account's) over ``request``, its answer held to TOKEN_BYTES.

    The connection's failures are retried (``retry_network``); any other is a SearchConsoleError at once.
    """
    email = credentials.service_account_email
    request.status = None  # the last answer's, once there is one

    def refresh():
        with limited(TOKEN_BYTES):
            credentials.refresh(request)

    try:
        retry_network(refresh, what="Google's token endpoint", endpoint=endpoint, job_id=job_id)
    except (BodyTooLarge, RedirectRefused) as exc:
        failure = (f"the token endpoint at {exc}" if isinstance(exc, RedirectRefused) else
                   f"the token endpoint at {endpoint} answered more than {exc.limit:,} bytes, which is "
                   f"no token (read {exc.read:,} before stopping)")
        log.warning("job=%s token request for service account %s: %s", job_id, email, failure)
        raise SearchConsoleError(
            f"could not get a Search Console access token for service account {email}: {failure}"
        ) from None
    except (GoogleAuthError, TypeError, KeyError, ValueError) as exc:
        # Beyond its own errors, google-auth fails this way on an answer that is not a token (HTML, a list).
        # The answer itself is not logged: a server of the key's choosing may echo what it was sent.
        failure = token_failure(exc, request.status)
        log.warning("job=%s token endpoint refused service account %s: %s", job_id, email, failure)
        raise SearchConsoleError(
            f"could not get a Search Console access token for service account {email}: {failure}"
        ) from None


class SearchAnalytics:
    """``searchanalytics.query`` for one property, with bounded retries."""

    def __init__(self, service, site_url: str, account_email: str, *, max_attempts: int = MAX_ATTEMPTS,
                 job_id=None, renew=lambda force=False: None):
        self.service = service
        self.renew = renew  # a new access token when the one held is (nearly) expired, or at once with force
        self.site_url = site_url
        self.account_email = account_email
        self.max_attempts = max_attempts
        self.job_id = job_id  # for the logs

    @classmethod
    def connect(cls, site_url: str, account_info: dict, *, job_id=None) -> SearchAnalytics:
        try:
            # Checked again here, not only when the key was pasted: the allowed list may have shrunk since.
            check_token_uri(account_info.get("token_uri"))
        except ValueError as exc:
            raise SearchConsoleError(f"the stored service-account key is refused: {scrub(str(exc))}") from None
        try:
            credentials = service_account.Credentials.from_service_account_info(account_info, scopes=SCOPES)
        except ValueError as exc:  # a key that passed set_service_account but cannot sign (bad PEM)
            raise SearchConsoleError(f"the stored service-account key is not usable: {scrub(str(exc))}") from None
        email = credentials.service_account_email
        request = StatusRecordingRequest(default_http())
        token_endpoint = endpoint_of(str(account_info.get("token_uri", "")))

        def renew(force: bool = False) -> None:
            # Here rather than in AuthorizedHttp's own refresh (near the token's expiry, or after a 401): that
            # one would read the token to the page's bound and fail unclassified.
            if force or not credentials.valid:
                access_token(credentials, request, endpoint=token_endpoint, job_id=job_id)

        renew()
        http = google_auth_httplib2.AuthorizedHttp(credentials, http=http_factory(), max_refresh_attempts=0)
        options = {"api_endpoint": api_endpoint} if api_endpoint else None
        service = build("searchconsole", "v1", http=http, static_discovery=True, cache_discovery=False,
                        client_options=options)
        return cls(service, site_url, email, job_id=job_id, renew=renew)

    def query(self, body: dict) -> dict:
        attempt, renewed = 0, False
        while True:
            attempt += 1
            self.renew()
            request = self.service.searchanalytics().query(siteUrl=self.site_url, body=body)
            rows = int(body.get("rowLimit", API_MAX_ROWS))
            try:
                with limited(answer_bytes(rows)):
                    return request.execute()
            except BodyTooLarge as exc:
                raise SearchConsoleError(
                    f"the Search Console API at {endpoint_of(request.uri)} answered more than {exc.limit:,} bytes "
                    f"for a page of at most {rows:,} rows (read {exc.read:,} before stopping)"
                ) from None
            except RedirectRefused as exc:
                raise SearchConsoleError(f"the Search Console API at {exc}") from None
            except NETWORK_ERRORS as exc:
                failure = network_failure(exc)
                if failure is None:
                    raise
                wait_or_give_up(failure, attempt, self.max_attempts, what="the Search Console API",
                                endpoint=endpoint_of(request.uri), job_id=self.job_id)
            except HttpError as exc:
                # The API's own message, without the URLs it may quote (the request's, with its query).
                status, reason = exc.resp.status, scrub(str(exc.reason))
                if status == 401 and not renewed and attempt < self.max_attempts:
                    # A token refused before its time (revoked, clock skew): one new token, then it means no access.
                    self.renew(force=True)
                    renewed = True
                    continue
                if status in NO_ACCESS_STATUSES:
                    raise SearchConsoleError(
                        f"service account {self.account_email} has no access to Search Console property "
                        f"{self.site_url!r} (HTTP {status}: {reason}); add it as a user of the property"
                    ) from None
                if status != 429 and status < 500:
                    raise SearchConsoleError(
                        f"Search Console API rejected the query (HTTP {status}): {reason}"
                    ) from None
                if attempt == self.max_attempts:
                    raise SearchConsoleError(
                        f"Search Console API error {status} after {attempt} attempts: {reason}"
                    ) from None
                delay = retry_delay(attempt, exc.resp.get("retry-after"))
                log.warning("job=%s search console HTTP %s (%s), attempt %s/%s, retrying in %.1fs",
                            self.job_id, status, reason, attempt, self.max_attempts, delay)
                sleep(delay)

    def pages(self, start: date, end: date, *, by_date: bool, row_limit: int, start_row: int = 0):
        """Yield ``(start_row, rows)`` per page, ending after the first short page.

        The caller commits each page before asking for the next one.
        """
        while True:
            body = {
                "startDate": start.isoformat(),
                "endDate": end.isoformat(),
                "dimensions": ["page", "date"] if by_date else ["page"],
                "rowLimit": row_limit,
                "startRow": start_row,
                "dataState": "final",
            }
            rows = self.query(body).get("rows", [])
            yield start_row, rows
            if len(rows) < row_limit:
                return
            start_row += len(rows)
