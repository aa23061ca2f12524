"""The text helpers of mail parsing over hostile input: file names, charsets, HTML. Pure, no database."""

from __future__ import annotations

import unicodedata

import pytest

from mailpoll.message.text import decode_bytes, html_to_text, safe_filename
from tests.support.guards import finishes_within

# --- safe_filename ----------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("report.pdf", "report.pdf"),
    ("../../etc/passwd", "passwd"),
    ("C:\\evil\\a.pdf", "a.pdf"),
    ("C:a.pdf", "a.pdf"),
    ("/abs/dir/data.xlsx", "data.xlsx"),
    ("\x00a.pdf", "a.pdf"),
    ("a\x07b\x1b.csv", "ab.csv"),
    (".htaccess", "htaccess"),
    ("...pdf", "pdf"),
    ("..", "attachment"),
    ("", "attachment"),
    ("  \t ", "attachment"),
    ("/", "attachment"),
    ("invoice\u202efdp.exe", "invoicefdp.exe"),  # RTL override: would display as "invoiceexe.pdf"
    ("\u200bzero\u200dwidth\u2066.pdf", "zerowidth.pdf"),
    ("report \t  final\n.csv", "report final.csv"),
    ("rapport:2025?*.csv", "rapport_2025__.csv"),
    ("trailing dots... ", "trailing dots"),
    ("CON", "_CON"),
    ("nul.txt", "_nul.txt"),
    ("com1.csv", "_com1.csv"),
    ("console.csv", "console.csv"),
    ("e\u0301te\u0301.csv", "été.csv"),  # NFC
    ("résumé \udce9.csv", "résumé \ufffd.csv"),  # lone surrogate from undecodable bytes
    ("a" * 500 + ".pdf", "a" * 146 + ".pdf"),
    ("a" * 500, "a" * 150),
    ("x." + "b" * 40, "x." + "b" * 40),  # not an extension: too long to be one, capped as a stem
])
def test_safe_filename(name, expected):
    assert safe_filename(name) == expected


def test_safe_filename_caps_utf8_bytes_and_keeps_the_extension():
    name = safe_filename("é" * 200 + ".xlsx")
    assert name.endswith(".xlsx") and len(name.encode()) <= 240


def test_safe_filename_default():
    assert safe_filename("../", default="message.txt") == "message.txt"


@pytest.mark.parametrize("name", [
    "../../etc/passwd", "..\\..\\windows\\system32", "\x00", ".", "..\x00/..", "a/\u202e/..",
    "\\\\server\\share\\x",
    "x" * 5000, "." * 300, "\r\n", "%2e%2e%2fetc", "ﾠ", "\U000e0041tag.pdf",
])
def test_safe_filename_invariants(name):
    safe = safe_filename(name)
    assert safe and len(safe) <= 150 and len(safe.encode()) <= 240
    assert "/" not in safe and "\\" not in safe and not safe.startswith(".")
    assert not any(unicodedata.category(char) in ("Cc", "Cf", "Cs") for char in safe)


# --- charsets ---------------------------------------------------------------------------

@pytest.mark.parametrize("data, charset, expected, lied", [
    ("été".encode(), "utf-8", "été", False),
    ("été".encode("cp1252"), "utf-8", "été", True),
    ("l’été €".encode("cp1252"), "iso-8859-1", "l’été €", False),  # read as Windows-1252, like browsers
    ("été".encode(), "iso-8859-1", "été", True),  # UTF-8 declared Latin-1
    ("été".encode(), "us-ascii", "été", True),
    ("Отчёт".encode("koi8-r"), "KOI8-R", "Отчёт", False),
    (b"plain", "x-foo", "plain", True),
    (b"plain", "zlib", "plain", True),  # a codec, but not a text one
    (b"plain", "utf-8\x00", "plain", False),  # control characters are dropped from the label
    ("été".encode("utf-16"), "utf-16", "été", False),
    ("été".encode("cp1252"), None, "été", False),
    ("été".encode(), "unknown-8bit", "été", False),
])
def test_decode_bytes(data, charset, expected, lied):
    text, defects = decode_bytes(data, charset)
    assert (text, bool(defects)) == (expected, lied)


# --- HTML -------------------------------------------------------------------------------

@pytest.mark.parametrize("html, expected", [
    ("<p>a</p><p>b</p>", "a\n\nb"),
    ("<head><title>x</title><body>kept", "kept"),  # unclosed head ends at <body>
    ("<table><tr><td>1</td><td>2</td></tr></table>", "1 2"),
    ("a&nbsp;&amp;&#233;", "a &é"),
    ("<style>p{}</style><script>if (a<b) x()</script>text", "text"),
    ("1 < 2 and <a <b", "1 < 2 and <a <b"),
])
def test_html_to_text(html, expected):
    assert html_to_text(html) == expected


def test_html_that_stalls_html_parser_is_defused():
    html = "<a " * 200_000  # quadratic in html.parser: about 16 s for 10,000 of these unescaped
    with finishes_within(60, "html_to_text of 200,000 unclosed tags"):
        assert html_to_text(html) == html.strip()
