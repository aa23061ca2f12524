"""System checks for import settings that would otherwise fail only in a worker, mid-import.

imports.E001  IMPORT_DATE_ORDER is neither dmy nor mdy
imports.E002  MEDIA_ROOT, where uploads and mail attachments are stored, cannot be written
imports.E003  an import setting is not a positive number, or its environment text is not one
imports.W001  a setting is still set under its former name (IMPORTS_BATCH_SIZE)
"""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings
from django.core import checks

from . import conf
from .formats import DATE_ORDERS

POSITIVE = ("IMPORT_MAX_UPLOAD_BYTES", "IMPORT_MAX_UNZIPPED_BYTES", "IMPORT_BATCH_SIZE", "IMPORT_MAX_ZIP_MEMBERS",
            "IMPORT_MAX_ZIP_RATIO", "IMPORT_MAX_SHARED_STRINGS", "IMPORT_MAX_COLUMNS", "IMPORT_UPLOAD_CHECK_BYTES")


@checks.register()
def check_date_order(app_configs=None, **kwargs):
    return date_order_errors(conf.get("IMPORT_DATE_ORDER"))


def date_order_errors(value) -> list:
    if value not in DATE_ORDERS:
        return [
            checks.Error(
                f"IMPORT_DATE_ORDER is {value!r}; it must be one of {', '.join(DATE_ORDERS)}.",
                hint="dmy: 1/12/2026 is 1 December (day first); mdy: it is January 12 (month first).",
                id="imports.E001",
            )
        ]
    return []


@checks.register()
def check_media_root_writable(app_configs=None, **kwargs):
    """Every upload and mail attachment is written under MEDIA_ROOT: the first one would fail, in a request."""
    problem = unwritable(Path(settings.MEDIA_ROOT))
    if problem is None:
        return []
    return [
        checks.Error(
            f"MEDIA_ROOT ({settings.MEDIA_ROOT}) cannot be written: {problem}.",
            hint="Point MEDIA_ROOT at a directory this process may write (it is created if missing).",
            id="imports.E002",
        )
    ]


def unwritable(path: Path) -> str | None:
    """Why files could not be written under ``path`` (which storage creates if missing), or None.

    Looks only: nothing is created, so ``check`` stays free of side effects.
    """
    existing = path
    while not existing.exists():
        if existing.is_symlink():
            return f"{existing} is a broken symbolic link"
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable by this process"
    return None


@checks.register()
def check_values(app_configs=None, **kwargs):
    """A limit of zero refuses every file; a batch size under one writes a row per transaction."""
    return conf.SETTINGS.environment_errors("imports.E003") or conf.SETTINGS.not_positive_errors(
        POSITIVE, "imports.E003")


@checks.register()
def check_former_names(app_configs=None, **kwargs):
    return conf.SETTINGS.former_name_warnings("imports.W001")
