"""The import services: store an uploaded or local file and queue its ``import_csv`` job.

``create_import`` is what the upload form, ``manage.py importfile`` and the mail
intake call; the names it gives a file (``kind_for``, ``display_filename``) live
beside it. The operator's filename is data, never a path: the file is stored
under a generated name (``import_upload_path``) and the original name is kept,
cleaned up, for display only.
"""

from __future__ import annotations

import unicodedata
import uuid
from pathlib import PurePosixPath

from django.db import transaction

from seoinsight import storage
from seoinsight.models import SiteTarget

from .handlers import enqueue_import
from .models import Import, ImportKind, ImportOrigin

# What import_csv reads, by extension: a .zip is a Search Console bundle of CSVs.
KIND_BY_EXTENSION = {
    ".csv": ImportKind.CSV,
    ".tsv": ImportKind.CSV,
    ".txt": ImportKind.CSV,
    ".zip": ImportKind.ZIP,
    ".xlsx": ImportKind.XLSX,
}
ACCEPTED = ", ".join(KIND_BY_EXTENSION)
# What the upload page and ``importfile`` say when the disk under MEDIA_ROOT is full.
OUT_OF_SPACE = "the server is out of disk space; nothing was imported"


def kind_for(filename: str) -> ImportKind | None:
    """The import kind for a filename, or None when the extension is not one we read."""
    return KIND_BY_EXTENSION.get(PurePosixPath(filename.lower()).suffix)


def display_filename(name: str, max_length: int = 255) -> str:
    """The last path component, without control characters, cut to fit (keeping the extension).

    ``C:\\exports\\Pages.csv`` (an old browser's full path) becomes ``Pages.csv``.
    """
    name = unicodedata.normalize("NFC", name).replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C").strip()
    if len(name) > max_length:
        suffix = PurePosixPath(name).suffix[:16]
        name = name[: max_length - len(suffix) - 1] + "…" + suffix
    return name or "upload"


def create_import(*, site_target: SiteTarget, content, filename: str, size: int, period_start=None,
                  period_end=None, created_by=None, origin: str = ImportOrigin.UPLOAD, sheet: str = "",
                  date_order: str = "", reimport_of: Import | None = None) -> Import:
    """Store the file and create the Import with its ``import_csv`` job, both or neither.

    ``content`` is a Django ``File`` (an upload, or an opened local file); ``reimport_of``, the import whose
    stored file this is again (``reimport``).
    """
    shown = display_filename(filename)
    imp = Import(
        org_id=site_target.site.org_id, site_target=site_target, kind=kind_for(shown) or ImportKind.CSV,
        origin=origin, uid=uuid.uuid4().hex, original_filename=shown, size=size,
        period_start=period_start, period_end=period_end, created_by=created_by, sheet=sheet,
        date_order=date_order, reimport_of=reimport_of,
    )
    # Storage is not transactional: the file is written first, whole or not at all
    # (temporary name, fsync, rename), and removed again if the rows are not
    # committed, so no Import ever points at a missing or partial file. A full
    # disk raises storage.OutOfSpace and leaves nothing behind (OUT_OF_SPACE).
    imp.file.name = imp.file.field.generate_filename(imp, imp.uid)
    path = imp.file.storage.path(imp.file.name)
    if hasattr(content, "temporary_file_path"):  # a large upload, already spooled whole to disk
        imp.size = storage.move_atomic(content.temporary_file_path(), path)
        imp.sha256 = storage.file_sha256(path)
    else:
        imp.size, imp.sha256 = storage.write_atomic(path, content.chunks())
    try:
        with transaction.atomic():
            imp.save()
            enqueue_import(imp)
    except BaseException:
        imp.file.delete(save=False)
        raise
    return imp
