"""httplib2 for the clients that carry a credential (Gmail, Search Console): bounded answers, no redirect.

httplib2 reads a body whole before googleapiclient sees it, so ``BoundedHttp`` bounds the read itself: in chunks,
to the bound ``limited(n)`` sets (Content-Length trusted neither way, a compressed answer once decompressed), else
``BodyTooLarge`` with the bytes read; a 3xx is ``RedirectRefused`` naming where it pointed, and nothing goes there.
"""

from __future__ import annotations

import contextlib
import contextvars
import http.client
import urllib.parse

import httplib2
from httplib2.decode import DecodeLimitError, DecodeRatioError

from seoinsight.outbound import BodyTooLarge, RedirectRefused, where

# What an answer read outside any ``limited`` block may take: a small API answer.
DEFAULT_BYTES = 4 * 1024 * 1024
# An OAuth token endpoint's answer: a token, its lifetime, an error code.
TOKEN_BYTES = 64 * 1024
CHUNK = 256 * 1024

answer_limit: contextvars.ContextVar[int] = contextvars.ContextVar("bounded_http_answer_limit", default=DEFAULT_BYTES)


@contextlib.contextmanager
def limited(limit: int):
    """Answers read inside the block may take at most ``limit`` bytes each."""
    token = answer_limit.set(limit)
    try:
        yield
    finally:
        answer_limit.reset(token)


class _BoundedResponse(http.client.HTTPResponse):
    """http.client's response whose whole-body ``read()`` stops past ``answer_limit``."""

    owner_connection: http.client.HTTPConnection | None = None

    def read(self, amt=None):
        if amt is not None:
            return super().read(amt)
        limit = answer_limit.get()
        chunks, read = [], 0
        while True:
            chunk = super().read(min(CHUNK, limit + 1 - read))
            if not chunk:
                break
            read += len(chunk)
            if read > limit:
                chunks.clear()
                # The rest is never read: the connection goes, or its next answer would be this one's tail.
                if self.owner_connection is not None:
                    self.owner_connection.close()
                self.close()
                raise BodyTooLarge("the answer", limit=limit, read=read)
            chunks.append(chunk)
        if self.length:
            # Closed before its announced length: http.client's own read() says so, its read(amt) does not.
            raise http.client.IncompleteRead(b"", self.length)
        return b"".join(chunks)


class _BoundedConnection:
    """Mixed into httplib2's connection classes: answers are ``_BoundedResponse``s."""

    response_class = _BoundedResponse

    def getresponse(self):
        response = super().getresponse()
        response.owner_connection = self
        return response


def bounded_connection_types() -> dict[str, type]:
    return {scheme: type(f"Bounded{base.__name__}", (_BoundedConnection, base), {})
            for scheme, base in httplib2.SCHEME_TO_CONNECTION.items()}


_CONNECTION_TYPES = bounded_connection_types()


class BoundedHttp(httplib2.Http):
    """An ``httplib2.Http`` whose answers are bounded by ``answer_limit`` and whose 3xx answers are refused."""

    def __init__(self, **options):
        super().__init__(**options)
        self.follow_redirects = False
        self._connection_types = dict(_CONNECTION_TYPES)

    def request(self, uri, method="GET", body=None, headers=None, redirections=0, connection_type=None):
        limit = answer_limit.get()
        self.limit_kwargs = {**self.limit_kwargs, "hard_limit": limit}
        scheme = urllib.parse.urlsplit(uri).scheme.lower()
        try:
            response, content = super().request(uri, method, body, headers, 0,
                                                connection_type or self._connection_types.get(scheme))
        except (DecodeLimitError, DecodeRatioError):
            raise BodyTooLarge("the answer, decompressed,", limit=limit, read=limit + 1) from None
        if 300 <= response.status < 400:
            location = response.get("location", "")
            target = where(urllib.parse.urljoin(uri, location)) if location else "nowhere"
            raise RedirectRefused(f"{where(uri)} answered HTTP {response.status}, a redirect to {target}, which is "
                                  "not followed: a credential goes only to the host it was set up for")
        return response, content
