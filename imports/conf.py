"""Import settings, each declared once; read them with ``get(name)`` (see seoinsight.conf)."""

from seoinsight.conf import Declarations, Setting

SETTINGS = Declarations(
    Setting("IMPORT_MAX_UPLOAD_BYTES", int, 200 * 1024 * 1024,
            "uploads larger than this are refused with a message naming the limit"),
    # Per zip member (a bundle's CSV, a workbook's sheet): far above a real export
    # (Search Console stops at 1,000 rows), far below a zip bomb.
    Setting("IMPORT_MAX_UNZIPPED_BYTES", int, 1024 * 1024 * 1024,
            "a zip member (bundle CSV, workbook part) that would inflate past this is refused"),
    Setting("IMPORT_BATCH_SIZE", int, 5000,
            "rows per transaction (and per progress checkpoint) of an import",
            old_names=("IMPORTS_BATCH_SIZE",)),
    Setting("IMPORT_DATE_ORDER", str, "dmy",
            "how a/b/yyyy dates are read when all of a file's fit both orders and the import chose none: "
            "dmy (day first) or mdy (month first)"),
)

get = SETTINGS.get
