"""Export files generated in tmp_path, the way the tools write them: no binary fixtures."""

from __future__ import annotations

import codecs
import csv
import io
import zipfile
from pathlib import Path

from openpyxl import Workbook

ENCODINGS = {
    # name -> (codec, BOM)
    "utf-8": ("utf-8", b""),
    "utf-8-bom": ("utf-8", codecs.BOM_UTF8),
    "utf-16": ("utf-16-le", codecs.BOM_UTF16_LE),
    "utf-16-be": ("utf-16-be", codecs.BOM_UTF16_BE),
    "utf-16-le-nobom": ("utf-16-le", b""),
    "cp1252": ("cp1252", b""),
}

HEADERS = {
    "en": ["Top pages", "Clicks", "Impressions", "CTR", "Position"],
    "fr": ["Pages les plus populaires", "Clics", "Impressions", "CTR", "Position"],
}


def csv_text(rows: list[list], *, delimiter: str = ",", newline: str = "\r\n") -> str:
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=delimiter, lineterminator=newline).writerows(rows)
    return buffer.getvalue()


def write_csv(
    directory: Path, name: str, rows: list[list], *, encoding: str = "utf-8", delimiter: str = ",",
    newline: str = "\r\n",
) -> Path:
    codec, bom = ENCODINGS[encoding]
    path = directory / name
    path.write_bytes(bom + csv_text(rows, delimiter=delimiter, newline=newline).encode(codec))
    return path


def write_bytes(directory: Path, name: str, data: bytes) -> Path:
    path = directory / name
    path.write_bytes(data)
    return path


def write_xlsx(directory: Path, name: str, sheets: dict[str, list[list]]) -> Path:
    workbook = Workbook()
    workbook.remove(workbook.active)
    for title, rows in sheets.items():
        sheet = workbook.create_sheet(title)
        for row in rows:
            sheet.append(row)
    path = directory / name
    workbook.save(path)
    return path


def write_zip(directory: Path, name: str, members: dict[str, str | bytes]) -> Path:
    path = directory / name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member, content in members.items():
            archive.writestr(member, content)
    return path


def search_console_tables(lang: str = "en", *, date_filter: str = "Last 3 months") -> dict[str, list[list]]:
    """The tables of a Search Console performance export, as (sheet or file) name -> rows."""
    en = lang == "en"
    pages = [
        HEADERS[lang],
        ["https://example.com/", 120, 3400, "3.53%" if en else "3,53 %", 4.2],
        ["https://example.com/blog/é", 7, 90, "7.78%" if en else "7,78 %", 11.5],
    ]
    return {
        ("Queries" if en else "Requêtes"): [
            ["Top queries" if en else "Requêtes les plus fréquentes", "Clicks"],
            ["seo", 3],
        ],
        "Pages": pages,
        ("Countries" if en else "Pays"): [["Country" if en else "Pays", "Clicks"], ["France", 3]],
        "Dates": [
            ["Date", "Clicks" if en else "Clics", "Impressions"],
            ["2024-03-31", 1, 2],
            ["2024-01-01", 2, 3],
        ],
        ("Filters" if en else "Filtres"): [
            ["Filter" if en else "Filtre", "Value" if en else "Valeur"],
            ["Search type" if en else "Type de recherche", "Web"],
            ["Date", date_filter],
        ],
    }


def write_search_console_xlsx(directory: Path, name: str = "export.xlsx", **kwargs) -> Path:
    return write_xlsx(directory, name, search_console_tables(**kwargs))


def write_search_console_zip(directory: Path, name: str = "export.zip", **kwargs) -> Path:
    return write_tables_zip(directory, name, search_console_tables(**kwargs))


def write_tables_zip(directory: Path, name: str, tables: dict[str, list[list]]) -> Path:
    """A zip of one CSV per table, as Search Console's CSV export writes it."""
    return write_zip(directory, name, {f"{table}.csv": csv_text(rows) for table, rows in tables.items()})


def write_compound_file(directory: Path, name: str, streams: list[str]) -> Path:
    """An OLE2 compound file (the Office 97-2003 container) whose directory names ``streams``, all empty.

    What Excel writes for a password-protected workbook is such a file with an
    ``EncryptedPackage`` stream; an old .xls has a ``Workbook`` stream.
    """
    import struct

    free, end, fat_sector = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD
    entries = [("Root Entry", 5)] + [(stream, 2) for stream in streams]
    directory_sectors = -(-len(entries) // 4)  # four 128-byte entries per 512-byte sector
    fat = [fat_sector] + [2 + n for n in range(directory_sectors - 1)] + [end]
    fat += [free] * (128 - len(fat))
    header = bytearray(512)
    header[0:8] = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
    struct.pack_into("<HHHH", header, 0x18, 0x3E, 3, 0xFFFE, 9)  # minor, major version, byte order, 512 B
    struct.pack_into("<H", header, 0x20, 6)  # mini sectors of 64 bytes
    struct.pack_into("<IIIIIIII", header, 0x2C, 1, 1, 0, 4096, end, 0, end, 0)
    struct.pack_into("<109I", header, 0x4C, 0, *([free] * 108))
    body = bytearray(struct.pack("<128I", *fat))
    for index in range(directory_sectors * 4):
        entry = bytearray(128)
        if index < len(entries):
            title, kind = entries[index]
            encoded = title.encode("utf-16-le") + b"\x00\x00"
            entry[: len(encoded)] = encoded
            struct.pack_into("<HBB", entry, 64, len(encoded), kind, 1)
            # Siblings and child: a flat list under the root, good enough for a directory scan.
            struct.pack_into("<III", entry, 68, free, index + 1 if 0 < index < len(entries) - 1 else free,
                             1 if index == 0 and len(entries) > 1 else free)
            struct.pack_into("<I", entry, 116, end)
        body += entry
    path = directory / name
    path.write_bytes(bytes(header) + bytes(body))
    return path


def write_shared_strings_bomb(directory: Path, name: str, rows: list[list], *, filler: int,
                              text: str = "a") -> Path:
    """A real workbook of ``rows`` with a shared-strings table of ``filler`` copies of ``text``.

    ``<si><t>a</t></si>`` repeated deflates about 500 to 1: what an XLSX bomb is made of.
    (openpyxl writes its own strings inline, so the sheet still reads as ``rows``.)
    """
    plain = write_xlsx(directory, f"plain-{name}", {"Data": rows})
    path = directory / name
    override = ('<Override PartName="/xl/sharedStrings.xml" ContentType="application/'
                'vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml" /></Types>')
    with zipfile.ZipFile(plain) as source, zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "[Content_Types].xml":
                data = data.replace(b"</Types>", override.encode())
            out.writestr(info.filename, data)
        with out.open("xl/sharedStrings.xml", "w", force_zip64=True) as member:
            member.write(b'<?xml version="1.0" encoding="UTF-8"?>\n<sst xmlns="http://schemas.openxmlformats.org'
                         b'/spreadsheetml/2006/main">')
            chunk = f"<si><t>{text}</t></si>".encode() * 10_000
            for _ in range(filler // 10_000):
                member.write(chunk)
            member.write(b"</sst>")
    plain.unlink()
    return path


def write_many_members_zip(directory: Path, name: str, members: int) -> Path:
    """A Search Console bundle (Pages.csv first) followed by ``members`` empty files."""
    path = directory / name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("Pages.csv", csv_text(search_console_tables()["Pages"]))
        for number in range(members):
            archive.writestr(f"f{number}", b"")
    return path


def write_wide_row_xlsx(directory: Path, name: str, rows: list[list], *, cells: int) -> Path:
    """A real workbook of ``rows`` with one more row of ``cells`` numbers (a row no spreadsheet writes)."""
    plain = write_xlsx(directory, f"plain-{name}", {"Data": rows})
    path = directory / name
    wide = f'<row r="{len(rows) + 1}">'.encode() + b'<c t="n"><v>1</v></c>' * cells + b"</row>"
    with zipfile.ZipFile(plain) as source, zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "xl/worksheets/sheet1.xml":
                data = data.replace(b"</sheetData>", wide + b"</sheetData>")
            out.writestr(info.filename, data)
    plain.unlink()
    return path
