"""A done import's file imported again into another target: what its page offers, and the one click that does it.

The offer rests on the rows the import skipped as outside its target: the site of the org most of their hosts
are on (``seoinsight.sites.site_for_urls``) and that site's targets covering their URLs. The re-import goes
through the upload form with a copy of the stored file, as if the operator had uploaded it again into that
target: the same checks, then ``services.create_import`` (the new Import and its job, or neither), the new
Import pointing back at this one (``reimport_of``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

from django.core.files.uploadedfile import TemporaryUploadedFile
from django.db import IntegrityError

from seoinsight import storage
from seoinsight.models import Site, SiteTarget
from seoinsight.sites import site_for_urls

from .forms import ImportUploadForm
from .models import Import, ImportStatus
from .outcomes import skipped_hosts, skipped_urls, weighted_hosts
from .urlnorm import InvalidUrl, in_scope, normalize_url


@dataclass(frozen=True)
class Suggestion:
    """The site a file's skipped rows look like they are for, and its targets that take them."""

    site: Site
    targets: list[SiteTarget] = field(default_factory=list)


class NotReimported(Exception):
    """The file could not be imported again; the message is for the operator."""


def suggest(imp: Import, report: dict) -> Suggestion | None:
    """Where the rows ``imp`` skipped as outside its target look like they belong, from its ``report``; or None."""
    hosts = skipped_hosts(report)
    if not hosts:
        return None
    site = site_for_urls(imp.org_id, weighted_hosts(hosts))
    if site is None:
        return None
    urls = []
    for url in skipped_urls(report):
        try:
            urls.append(normalize_url(url))
        except InvalidUrl:
            continue
    targets = [target for target in site.targets.order_by("url_prefix", "search_console_property", "pk")
               if target.pk != imp.site_target_id and any(_covers(target, url) for url in urls)]
    return Suggestion(site, targets)


def _covers(target: SiteTarget, url: str) -> bool:
    try:
        return in_scope(url, url_prefix=target.url_prefix, search_console_property=target.search_console_property)
    except InvalidUrl:  # a target whose prefix cannot be read takes nothing
        return False


def reimport(imp: Import, target: SiteTarget, *, user) -> Import:
    """Import ``imp``'s stored file again into ``target`` (a target of ``imp``'s org); the new Import.

    Raises ``NotReimported`` when ``imp`` is not done, ``target`` is its own, the stored file is gone or
    damaged, or the upload form refuses the file for ``target``.
    """
    if imp.status != ImportStatus.DONE:
        raise NotReimported("Only a finished import can be imported again.")
    if target.pk == imp.site_target_id:
        raise NotReimported("The file was imported into this target already: choose another one.")
    if not imp.file.name:
        raise NotReimported("This import has no stored file to import again.")
    if imp.reimports.filter(site_target=target).exists():
        raise _imported_already(imp, target)
    # A copy spooled to disk like a large upload: the form reads it by path, create_import moves it into
    # place, and the stored original is never touched.
    copy = TemporaryUploadedFile(imp.original_filename or "upload", "application/octet-stream", imp.size, None)
    try:
        try:
            with open(storage.media_path(imp.file.name), "rb") as stored:
                shutil.copyfileobj(stored, copy)
        except FileNotFoundError:
            raise NotReimported("The stored file is missing: upload the file again.") from None
        copy.flush()
        if not storage.is_intact(copy.temporary_file_path(), imp.size, imp.sha256 or None):
            raise NotReimported("The stored file is damaged: upload the file again.")
        copy.seek(0)
        form = ImportUploadForm(
            {"site_target": target.pk, "period_start": imp.period_start or "", "period_end": imp.period_end or "",
             "sheet": imp.sheet, "date_order": imp.date_order},
            {"file": copy}, org_id=imp.org_id,
        )
        if not form.is_valid():
            raise NotReimported(" ".join(message for errors in form.errors.values() for message in errors))
        try:
            return form.save(created_by=user, origin=imp.origin, reimport_of=imp)
        except IntegrityError:  # a second click won the race (import_reimport_once_per_target); nothing is kept
            raise _imported_already(imp, target) from None
    finally:
        copy.close()  # removes the copy, unless create_import moved it into place


def _imported_already(imp: Import, target: SiteTarget) -> NotReimported:
    again = imp.reimports.filter(site_target=target).first()
    which = f" (import {again.pk})" if again is not None else ""
    return NotReimported(f"This file was imported into {target.site} · {target} already{which}.")
