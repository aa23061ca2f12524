"""Refuse a query string no page can follow, before any view or admin list reads it.

A NUL in a parameter reaches PostgreSQL as text it refuses (a 500 from any filter that passes it on,
Django's own admin filters included); a query string of tens of kilobytes is no one's address. Pages
then validate their own parameters (``query_params``); this is the floor under all of them.
"""

from __future__ import annotations

import logging
import urllib.parse

from django.http import HttpResponse

log = logging.getLogger(__name__)

# Browsers and proxies cut addresses near 8 KB; the admin's longest filtered list stays far below.
MAX_QUERY_BYTES = 8 * 1024


def problem(query_string: str) -> str:
    """Why no page follows ``query_string`` (as sent, percent-encoded), or "".

    >>> problem("page=2&q=shoes"), problem("type=a%00b"), problem("q=" + "x" * 9000)[:33]
    ('', 'The address holds a NUL character, which no page takes.', 'The address is 9,002 bytes long; ')
    """
    if len(query_string) > MAX_QUERY_BYTES:
        return (f"The address is {len(query_string):,} bytes long; a page takes at most {MAX_QUERY_BYTES:,} "
                "after the “?”.")
    if "\x00" in urllib.parse.unquote_plus(query_string, errors="replace"):
        return "The address holds a NUL character, which no page takes."
    return ""


class QueryGuardMiddleware:
    """A 400 in plain words for a query string ``problem`` refuses; every other request passes untouched."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        refused = problem(request.META.get("QUERY_STRING", ""))
        if refused:
            log.warning("request refused before any view: %s %s: %s", request.method, request.path, refused)
            return HttpResponse(refused + " Nothing was done.\n", status=400, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
