"""The project's one CSV writer for what users download: no text cell is read by a spreadsheet as a formula.

Imported texts (a search query, a URL) are the users' or a third party's: a cell starting with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return would run as a formula in Excel or LibreOffice (OWASP's CSV injection).
Such a text gets a leading ``'``; numbers the code writes (``int``, ``float``, ``Decimal``, negatives too) and
dates stay as they are. Every export goes through ``writer``; tests/test_csv_writers.py keeps it the only one.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import Any

from django.http import HttpResponse

# OWASP's list: what makes a spreadsheet read a cell as a formula (tab and CR: some read past them).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def cell(value: Any) -> Any:
    """``value`` as written: a text a spreadsheet would run gets a leading ``'``; anything else unchanged.

    >>> cell("=HYPERLINK(\\"http://x\\")"), cell("-2+3"), cell("seo"), cell(-2.5), cell(None)
    ('\\'=HYPERLINK("http://x")', "'-2+3", 'seo', -2.5, None)
    """
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


class Writer:
    """``csv.writer`` with every cell passed through ``cell``."""

    def __init__(self, file):
        self._out = csv.writer(file)

    def writerow(self, row: Iterable[Any]) -> None:
        self._out.writerow([cell(value) for value in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def writer(file) -> Writer:
    """A CSV writer onto ``file`` (anything with ``write``: a response, a StringIO)."""
    return Writer(file)


def download(filename: str) -> tuple[HttpResponse, Writer]:
    """A UTF-8 CSV response that the browser saves as ``filename``, and the writer onto it."""
    response = HttpResponse(content_type="text/csv; charset=utf-8",
                            headers={"Content-Disposition": f'attachment; filename="{filename}"'})
    return response, writer(response)
