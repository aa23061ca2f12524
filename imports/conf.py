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
    # Off unless set: a periodic type registered in every process would be enqueued by the test suite's workers too
    # (tests/jobs/test_schedules.py keeps the pytest process free of them).
    Setting("IMPORT_SCHEDULED_PULLS_EVERY", int, 0,
            "seconds between the workers' runs of the job that queues the due scheduled Search Console pulls "
            "(each target's schedule); 0: scheduled pulls off"),
    Setting("IMPORT_STALE_AFTER_DAYS", int, 7,
            "a site whose newest data is older than this many days is listed first on the admin's index"),
)

get = SETTINGS.get
