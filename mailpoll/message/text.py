"""Text from mail, made safe: charsets decoded, control characters removed, HTML to text, file names.

Pure helpers of message parsing (``mailpoll.message.parse`` and its ``headers``, ``mime``, ``leaves``); nothing here
raises on hostile input.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from html.parser import HTMLParser

FILENAME_MAX_CHARS = 150
FILENAME_MAX_BYTES = 240  # UTF-8, under the usual 255-byte file system limit
_CHARSET_SUPERSETS = {"iso8859-1": "cp1252", "gb2312": "gb18030"}  # as browsers read them
_SINGLE_BYTE_WESTERN = frozenset({"iso8859-1", "iso8859-15", "cp1252"})
_UNDECLARED = ("unknown-8bit", "x-unknown", "unknown", "default")
_WINDOWS_DEVICES = frozenset(
    ["con", "prn", "aux", "nul"] + [f"com{n}" for n in range(10)] + [f"lpt{n}" for n in range(10)]
)
_PATH_UNSAFE = re.compile(r'[<>:"|?*]')
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ufeff]")  # Unicode Cc but tab and newline; BOMs
_UNCLOSED_TAG = re.compile(r"<(?![^<>]{0,2000}>)")
_SURROGATES = re.compile("[\ud800-\udfff]")
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,16}$")


def decode_bytes(data: bytes, charset: str | None) -> tuple[str, list[str]]:
    """Text from bytes in their declared charset; undeclared, unknown or lying: UTF-8, else Windows-1252.

    Returns (text, defects). Never raises.
    """
    defects = []
    label = clean_line(charset or "", 60).lower()
    if label and label not in _UNDECLARED:
        codec = _text_codec(label)
        if codec is None:
            defects.append(f"unknown charset {label!r}")
        elif codec in _SINGLE_BYTE_WESTERN and not data.isascii() and _is_utf8(data):
            # Any bytes are valid Latin-1; valid multi-byte UTF-8 by chance is not. A common lie.
            defects.append(f"text not in its declared charset {label!r}")
        else:
            for name in (_CHARSET_SUPERSETS.get(codec), codec):
                if name:
                    try:
                        return data.decode(name), defects
                    except UnicodeError:
                        pass
            defects.append(f"text not in its declared charset {label!r}")
    try:
        return data.decode("utf-8"), defects
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace"), defects


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _text_codec(label: str) -> str | None:
    if not re.fullmatch(r"[a-z0-9_.:-]{1,40}", label):
        return None
    try:
        name = codecs.lookup(label).name
        b"a".decode(name)  # LookupError for bytes-to-bytes codecs: "zlib", "base64"…
    except LookupError:
        return None
    except UnicodeError:
        pass  # a text codec that rejects this one byte (UTF-16…)
    return name


def clean_line(text: str, cap: int, *, keep_format: bool = False) -> str:
    """One line: control characters and lone surrogates out, whitespace collapsed, capped.

    Format characters (bidi overrides, zero-width) go too unless ``keep_format``.
    """
    text = str(text)[: 4 * cap]
    if text.isascii() and text.isprintable():  # the common case: nothing to remove but repeated spaces
        return re.sub(r" {2,}", " ", text).strip()[:cap].strip()
    out = []
    for char in text:
        category = unicodedata.category(char)
        if char.isspace():
            out.append(" ")
        elif category == "Cs":
            out.append("\ufffd")
        elif category == "Cc" or (category == "Cf" and not keep_format):
            continue
        else:
            out.append(char)
    return re.sub(r" {2,}", " ", "".join(out)).strip()[:cap].strip()


def clean_text(text: str, cap: int) -> str:
    """A body: newlines normalized, controls (but tab and newline) and surrogates out, blank runs cut."""
    text = text[: 2 * cap].replace("\r\n", "\n").replace("\r", "\n")
    text = _SURROGATES.sub("\ufffd", _CONTROLS.sub("", text))
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()[:cap]


class _HTMLText(HTMLParser):
    """The visible text of an HTML body: scripts, styles and the head skipped, blocks on their own lines."""

    SKIP = frozenset({"script", "style", "head", "title", "noscript", "template"})
    BLOCK = frozenset({
        "p", "div", "br", "tr", "li", "ul", "ol", "table", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote",
        "pre", "hr", "section", "article", "header", "footer", "dt", "dd", "address",
    })

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag, attrs):
        if tag == "body":
            self.skipping = 0  # an unclosed <head> ends here, as in a browser
        elif tag in self.SKIP:
            self.skipping += 1
        elif tag in self.BLOCK:
            self.chunks.append("\n")
        elif tag in ("td", "th"):
            self.chunks.append(" ")

    def handle_endtag(self, tag):
        if tag in self.SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in self.BLOCK:
            self.chunks.append("\n")

    def handle_data(self, data):
        if not self.skipping:
            self.chunks.append(data)


def html_to_text(html: str) -> str:
    parser = _HTMLText()
    # html.parser rescans to the end of the input for every '<' that opens no complete tag
    # (quadratic: 10 KB of "<a " takes 16 s); such a '<' is text anyway, so escape it first.
    parser.feed(_UNCLOSED_TAG.sub("&lt;", html))
    parser.close()
    lines = (re.sub(r"\s+", " ", line).strip() for line in "".join(parser.chunks).split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def safe_filename(name: str, default: str = "attachment") -> str:
    """A file name fit for display and downloads: no path, controls, bidi tricks or device names.

    Keeps the extension when capping the length; never empty. Stored files are
    named by their hash anyway: this name is never a path on our disk.
    """
    name = unicodedata.normalize("NFC", str(name)).replace("\\", "/").rsplit("/", 1)[-1]
    name = clean_line(name, 10 * FILENAME_MAX_CHARS)
    name = _PATH_UNSAFE.sub("_", re.sub(r"^[A-Za-z]:(?=.)", "", name))
    name = name.strip(" .")  # leading dots hide files; trailing ones vanish on Windows
    if name.split(".", 1)[0].strip().lower() in _WINDOWS_DEVICES:
        name = "_" + name
    match = _EXTENSION.search(name)
    extension = match.group(0) if match and match.start() > 0 else ""
    stem = name[: len(name) - len(extension)][: FILENAME_MAX_CHARS - len(extension)]
    while len((stem + extension).encode("utf-8")) > FILENAME_MAX_BYTES:
        stem = stem[:-1]
    name = (stem.rstrip(" .") + extension) if stem.rstrip(" .") else ""
    return name or default
