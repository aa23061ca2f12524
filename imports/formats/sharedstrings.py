"""A workbook's shared strings (its table of distinct texts), read one at a time and counted.

openpyxl holds the whole table in memory before any sheet can be read, so its size is the cost of
opening a workbook at all: past IMPORT_MAX_SHARED_STRINGS strings the workbook is refused.
"""

from __future__ import annotations

from typing import BinaryIO

from openpyxl.cell.text import Text
from openpyxl.xml.constants import SHEET_MAIN_NS
from openpyxl.xml.functions import iterparse

from .rows import UnreadableFile

_STRING = f"{{{SHEET_MAIN_NS}}}si"
# Excel holds at most this many characters in a cell.
MAX_STRING_CHARS = 32_767


def read_shared_strings(source: BinaryIO, max_strings: int) -> list[str]:
    """The table's texts, in order, as openpyxl reads them; ``UnreadableFile`` past ``max_strings``."""
    strings: list[str] = []
    root = None
    for event, node in iterparse(source, events=("start", "end")):
        if root is None:
            root = node
        if event != "end" or node.tag != _STRING:
            continue
        if len(strings) >= max_strings:
            raise UnreadableFile(f"the workbook holds more than {max_strings:,} distinct texts (shared strings), "
                                 "the most an import reads")
        text = Text.from_tree(node).content.replace("x005F_", "")
        if len(text) > MAX_STRING_CHARS:
            raise UnreadableFile(f"the workbook holds a text of {len(text):,} characters, more than Excel can "
                                 "hold in a cell: it was not written by a spreadsheet")
        strings.append(text)
        # The strings read are kept above; their elements need not be (iterparse would keep them all).
        root.clear()
    return strings
