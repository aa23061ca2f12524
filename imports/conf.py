"""Import settings, each declared once; read them with ``get(name)`` (see seoinsight.conf)."""

from seoinsight.conf import Declarations, Setting

SETTINGS = Declarations(
    Setting("IMPORT_MAX_UPLOAD_BYTES", int, 200 * 1024 * 1024,
            "uploads larger than this are refused with a message naming the limit"),
    # Per zip member (a bundle's CSV, a workbook's sheet) and for all of a zip's members together: far
    # above a real export (Search Console stops at 1,000 rows), far below a zip bomb.
    Setting("IMPORT_MAX_UNZIPPED_BYTES", int, 1024 * 1024 * 1024,
            "a zip member (bundle CSV, workbook part), or all of a zip's members together, that would inflate "
            "past this is refused"),
    # What a zip (a workbook, a Search Console bundle) may be, checked from its directory before anything
    # is inflated. An export holds a few files (a workbook, a part or three per sheet) and compresses
    # 5 to 20 times; a zip bomb holds thousands, or compresses hundreds of times.
    Setting("IMPORT_MAX_ZIP_MEMBERS", int, 1000,
            "a zip (Search Console bundle, Excel workbook) holding more files than this is refused, "
            "before its directory is read"),
    Setting("IMPORT_MAX_ZIP_RATIO", int, 100,
            "a zip whose members together unpack to more than this many times its size is refused "
            "(unless they unpack to 1 MB or less)"),
    # openpyxl holds a workbook's shared strings (its distinct texts) in memory before reading a sheet:
    # a 1,048,576-row sheet (Excel's most) of distinct URLs and keywords stays under it.
    Setting("IMPORT_MAX_SHARED_STRINGS", int, 2_500_000,
            "a workbook holding more distinct texts (shared strings) than this is refused, counted as they are read"),
    Setting("IMPORT_MAX_COLUMNS", int, 500,
            "a file whose header row has more columns than this is refused (exports have tens)"),
    # The upload's check is a look, not a read: past this, the upload is queued and its job reads it whole.
    Setting("IMPORT_UPLOAD_CHECK_BYTES", int, 16 * 1024 * 1024,
            "bytes (inflated, for a zip) the upload form reads to check a file; a file it cannot check within "
            "them is queued, and its import says what is wrong"),
    Setting("IMPORT_BATCH_SIZE", int, 5000,
            "rows per transaction (and per progress checkpoint) of an import",
            old_names=("IMPORTS_BATCH_SIZE",)),
    Setting("IMPORT_DATE_ORDER", str, "dmy",
            "how a/b/yyyy dates are read when all of a file's fit both orders and the import chose none: "
            "dmy (day first) or mdy (month first)"),
    # Off unless set: a periodic type registered in every process would be enqueued by the test suite's workers too
    # (tests/jobs/test_schedules.py keeps the pytest process free of them).
    Setting("IMPORT_SCHEDULED_PULLS_EVERY", int, 0,
            "seconds between the workers' runs of the job that queues the due scheduled Search Console pulls "
            "(each target's schedule); 0: scheduled pulls off"),
    Setting("IMPORT_STALE_AFTER_DAYS", int, 7,
            "a site whose newest data is older than this many days is listed first on the admin's index"),
)

get = SETTINGS.get
