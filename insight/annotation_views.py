"""Notes on a site's timeline from its page: add one (``annotation-add``), delete one, and what the page shows.

Both POSTs reach only the caller's org's sites (another org's site or note is the same 404 as an unknown one)
and go back to the site page with its period. A note that cannot be saved comes back to the form with its
words kept and the reasons in plain words (held in the session for the one page that shows them).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from imports.views import member_required
from seoinsight import query_params
from seoinsight.models import Site
from seoinsight.periods import Period

from . import annotations
from .alerts.open import open_by_site
from .models import Alert, AlertKind, Annotation
from .sitepage import display

logger = logging.getLogger(__name__)

# The site page's own parameters, carried back after a POST (the page bounds them again when it reads them).
KEPT = ("period", "from", "to", "target", "q", "sort", "url", "page")
FORM_KEY = "insight.annotation_form"


@require_POST
@member_required
def add(request, site_id, org):
    site = get_object_or_404(Site.objects.filter(org=org), pk=site_id)
    asked = annotations.checked(request.POST.get("day", ""), request.POST.get("text", ""), timezone.localdate())
    if asked.errors:
        request.session[FORM_KEY] = {"site": site.pk, "day": request.POST.get("day", "")[:40],
                                     "text": asked.text[:annotations.MAX_TEXT * 2], "errors": asked.errors}
        logger.info("annotation refused site=%s: %s", site.pk, " ".join(asked.errors))
        return _back(request, site)
    note = Annotation.objects.create(site=site, day=asked.day, text=asked.text, created_by=request.user)
    logger.info("annotation added site=%s annotation=%s day=%s user=%s", site.pk, note.pk, note.day, request.user.pk)
    shown = _shown(request.POST)
    outside = "" if shown is None or shown.start <= note.day <= shown.end else (
        f" It is outside the period shown ({shown}): choose a period that holds it to see it on the chart.")
    messages.success(request, f"Note added on {note.day}: “{note.text}”.{outside}")
    return _back(request, site)


@require_POST
@member_required
def delete(request, site_id, pk, org):
    site = get_object_or_404(Site.objects.filter(org=org), pk=site_id)
    note = get_object_or_404(Annotation.objects.filter(site=site), pk=pk)
    note.delete()
    logger.info("annotation deleted site=%s annotation=%s user=%s", site.pk, pk, request.user.pk)
    messages.success(request, f"Note of {note.day} deleted: “{note.text}”.")
    return _back(request, site)


def _shown(form) -> Period | None:
    """The period the page showed when the note was typed (the form's hidden fields); None if they are bad."""
    try:
        start, end = (query_params.day(form.get(name, ""), latest=dt.date.max) for name in ("shown_from", "shown_to"))
    except query_params.BadParameter:
        return None
    return Period(start, end) if start <= end else None


def _back(request, site: Site) -> HttpResponseRedirect:
    kept = {}
    for key in KEPT:
        value = request.GET.get(key, "")
        if value and len(value) <= query_params.MAX_TEXT:
            kept[key] = value
    query = f"?{urlencode(kept)}" if kept else ""
    return HttpResponseRedirect(f"{reverse('insight:site', args=[site.pk])}{query}#notes")


@dataclass
class Marks:
    """The notes and open alerts of the period shown on a site page, for its charts and the form under them."""

    period: Period
    notes: list[Annotation]
    alerts: list[Alert]

    def chart(self, url: str = "") -> dict:
        """The markers of the site's chart, or of a page's history (``url``): another page's drop is left off."""
        alerts = [a for a in self.alerts if not url or a.kind != AlertKind.PAGE_DROP or a.page_url == url]
        return display.marks(self.notes, alerts)


def for_site_page(request, site: Site, period: Period, query: str) -> tuple[Marks, dict]:
    """The period's notes and open alerts overlapping it, and the add form's state (a refused note comes back).

    ``query``: the page's own ``?…``, which the forms carry so the POST goes back to the same view."""
    notes = annotations.for_sites([site.pk], period.start, period.end)[site.pk]
    alerts = [a for a in open_by_site([site.pk])[site.pk] if a.period_start <= period.end and a.period_end >= period.start]
    alerts.sort(key=lambda a: (a.period_start, a.pk))
    form = {"day": "", "text": "", "errors": []}
    held = request.session.get(FORM_KEY)
    if held is not None and held.get("site") == site.pk:  # another site's refused note waits for its own page
        form = request.session.pop(FORM_KEY)
    return Marks(period, notes, alerts), {
        "note_form": form,
        "note_query": query,
        "note_limits": {"earliest": query_params.EARLIEST_DAY,
                        "latest": annotations.latest_day(timezone.localdate()),
                        "max_length": annotations.MAX_TEXT},
    }
