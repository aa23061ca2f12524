"""The Imports pages: upload + list + event log, and one import's detail (and its re-import, a POST to it).

Every query is filtered on the caller's org (``seoinsight.auth``); another
org's import or target is the same 404 as an unknown one. Live progress is drawn by
``imports/progress.js``, which polls ``GET /jobs/<id>``.
"""

from __future__ import annotations

import errno
from functools import wraps

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.files import File
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from jobs import liveness, operator_actions
from jobs.models import Job, JobStatus
from seoinsight import query_params, storage
from seoinsight.auth import NotAuthenticated, current_org_id
from seoinsight.models import Org, SiteTarget

from . import column_mapping, replacements
from .forms import ColumnMappingForm, ImportUploadForm, inspect_file, sentence
from .ingest import OUTSIDE
from .models import Import, ImportKind, ImportStatus
from .outcomes import (SHOWN_LABELS, WARNING_OUTCOMES, outcome_reason, shown_status, skipped_hosts, skipped_urls,
                       top_hosts)
from .reimport import NotReimported, reimport, suggest
from .reports import notes, operator_error, period_read, report_of, what_was_read
from .services import OUT_OF_SPACE

COUNT_FIELDS = ("read", "inserted", "updated", "skipped", "errors")
IMPORTS_PER_PAGE = 25
EVENTS_SHOWN = 20


def member_required(view):
    """Logged-in members only: anonymous callers go to the login page; the view gets ``org``."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        try:
            org_id = current_org_id(request)
        except NotAuthenticated:
            return redirect_to_login(request.get_full_path())
        if org_id is None:
            return render(request, "imports/no_org.html", status=403)
        return view(request, *args, org=Org.objects.get(pk=org_id), **kwargs)

    return wrapper


class ImportRow:
    """An Import as the pages show it: counts so far, whether a progress bar is live, and whether its job
    shows a sign of life (``stalled``: what the page says instead, judged by ``clock``)."""

    def __init__(self, imp: Import, clock: liveness.Clock | None = None):
        self.imp = imp
        job = imp.job
        self.stalled = liveness.stalled(job, clock) if clock is not None and job is not None else None
        self.live = job is not None and job.status in (JobStatus.QUEUED, JobStatus.RUNNING)
        self.job_url = reverse("jobs:detail", args=[job.pk]) if job is not None else ""
        self.progress = job.progress if job is not None and isinstance(job.progress, dict) else {}
        self.report = report_of(job)
        self.counts = {name: self.report.get(name, getattr(imp, name)) for name in COUNT_FIELDS}
        # The job is the fresher source until the import has its final state (the
        # job may be claimed before the handler marks the import running).
        finished = imp.status in (ImportStatus.DONE, ImportStatus.FAILED)
        self.status = imp.status if finished or job is None else job.status
        # What the badge says: a done import that brought in little or nothing shows that, not "Done".
        self.shown_status = shown_status(self.status, imp.outcome)
        self.error = operator_error(imp.error or (job.error if job is not None else "") or "")
        self.outcome_reason = outcome_reason(self.shown_status, read=imp.read, skipped=imp.skipped,
                                             errors=imp.errors, skipped_reasons=self.report.get("skipped_reasons"))

    @property
    def what_was_read(self) -> list[str]:
        return what_was_read(self.report)

    @property
    def notes(self) -> list[tuple[str, int]]:
        return notes(self.report)

    @property
    def percent(self) -> int | None:
        done, total = self.progress.get("done"), self.progress.get("total")
        if not isinstance(done, int) or not isinstance(total, int) or total <= 0:
            return None
        return max(0, min(100, round(100 * done / total)))

    @property
    def status_label(self) -> str:
        return SHOWN_LABELS[self.shown_status]

    @property
    def format_label(self) -> str:
        """The file's format, and what it turned out to be when that says more ("ZIP · Search Console export")."""
        label = self.imp.get_kind_display()
        source = self.report.get("source")
        if self.imp.kind != ImportKind.API and isinstance(source, dict) and source.get("format") == "searchconsole":
            label += " · Search Console export"
        return label

    @property
    def period(self) -> tuple[str, str, str] | None:
        """(first day, last day, where it comes from): the file's own period, else the one given with the import."""
        read = period_read(self.report)
        if read is not None:
            return read[0], read[1], f"read from {read[2]}" if read[2] else ""
        if self.imp.period_start is not None:
            given = "pulled" if self.imp.kind == ImportKind.API else "given with the import"
            return self.imp.period_start.isoformat(), self.imp.period_end.isoformat(), given
        return None

    @property
    def skipped_hosts(self) -> list[tuple[str, int]]:
        return top_hosts(skipped_hosts(self.report))

    @property
    def skipped_on_other_hosts(self) -> int:
        """Rows outside the target on hosts beyond those listed."""
        reasons = self.report.get("skipped_reasons")
        outside = reasons.get(OUTSIDE) if isinstance(reasons, dict) else None
        return max(0, outside - sum(count for _, count in self.skipped_hosts)) if isinstance(outside, int) else 0

    @property
    def skipped_urls(self) -> list[str]:
        return skipped_urls(self.report)

    @property
    def count_items(self) -> list[tuple[str, int]]:
        return list(self.counts.items())

    @property
    def skipped_reasons(self) -> list[tuple[str, int]]:
        reasons = self.report.get("skipped_reasons") or {}
        return sorted(reasons.items(), key=lambda item: (-item[1], item[0])) if isinstance(reasons, dict) else []

    @property
    def error_samples(self) -> list[dict]:
        samples = self.report.get("error_samples") or []
        return [s for s in samples if isinstance(s, dict)] if isinstance(samples, list) else []


def reconcile_events(org_id: str) -> list[dict]:
    """The org's ``map_reconcile`` jobs, newest first, with the target each one was for."""
    jobs = list(Job.objects.for_org(org_id).filter(type="map_reconcile").order_by("-created_at")[:EVENTS_SHOWN])
    target_ids = {(job.payload or {}).get("site_target_id") for job in jobs}
    targets = SiteTarget.objects.filter(site__org_id=org_id, pk__in=[t for t in target_ids if t is not None])
    by_id = {t.pk: t for t in targets.select_related("site")}
    return [
        {
            "job": job,
            "target": by_id.get((job.payload or {}).get("site_target_id")),
            "report": job.report if job.status == JobStatus.DONE and isinstance(job.report, dict) else {},
        }
        for job in jobs
    ]


@require_http_methods(["GET", "POST"])
@member_required
def index(request, org):
    status = 200
    if request.method == "POST":
        try:
            form = ImportUploadForm(request.POST, request.FILES, org_id=org.pk)
            if storage.upload_hit_full_disk(request):
                raise storage.OutOfSpace(errno.ENOSPC, "out of disk space spooling the upload")
            if form.is_valid():
                imp = form.save(created_by=request.user)
                messages.success(request, f"“{imp.original_filename}” is queued; its progress shows below.")
                if form.mapped_by is not None:
                    messages.info(request, mapped_by_message(form.mapped_by))
                if form.date_warning:
                    messages.warning(request, form.date_warning)
                if form.unchecked:
                    messages.warning(request, form.unchecked)
                return redirect("imports:index")
            if form.unmapped and set(form.errors) == {"file"}:
                return redirect("imports:map_columns", hold_for_mapping(request, org, form))
        except OSError as exc:
            # The disk under MEDIA_ROOT (or the upload spool's) is full: nothing of this upload
            # was kept, so the page says so instead of a bare 500, and the next upload works
            # once there is room.
            if not storage.is_out_of_space(exc):
                raise
            messages.error(request, sentence(OUT_OF_SPACE))
            form, status = ImportUploadForm(org_id=org.pk), 507
    else:
        form = ImportUploadForm(org_id=org.pk)
    imports = Import.objects.for_org(org.pk).select_related("site_target__site", "job")
    params = query_params.Params(request.GET)
    page = Paginator(imports, IMPORTS_PER_PAGE).get_page(params.page())
    clock = liveness.read_clock()
    for problem in params.problems:  # said on this very page: the list shows page 1 in its place
        messages.warning(request, str(problem))
    return render(request, "imports/index.html", {
        "org": org,
        "form": form,
        "has_targets": form.fields["site_target"].queryset.exists(),
        "page": page,
        "rows": [ImportRow(imp, clock) for imp in page],
        "events": reconcile_events(org.pk),
    }, status=status)


def mapped_by_message(saved) -> str:
    return f"Columns mapped by the org's saved mapping of {saved.created_at:%Y-%m-%d}: {saved}."


# The session key of the uploads waiting for their column mapping: sha256 -> what the form was given.
PENDING = "imports_pending_mappings"


def pending_name(org_id: str, sha256: str) -> str:
    return f"imports/pending/{org_id}/{sha256[:2]}/{sha256}"


def hold_for_mapping(request, org, form) -> str:
    """Keep a file refused for its columns, by hash, with the form's choices; returns the hash.

    The mapping page imports this stored file: the operator does not upload it again.
    """
    upload = form.files["file"]  # refused, so no longer in cleaned_data
    upload.seek(0)
    _, sha256 = storage.save_content(f"imports/pending/{org.pk}", upload.read())
    cleaned = form.cleaned_data
    pending = request.session.get(PENDING, {})
    pending[sha256] = {
        "filename": upload.name, "site_target": cleaned["site_target"].pk,
        "period_start": cleaned["period_start"].isoformat() if cleaned.get("period_start") else "",
        "period_end": cleaned["period_end"].isoformat() if cleaned.get("period_end") else "",
        "sheet": cleaned.get("sheet", ""), "date_order": cleaned.get("date_order", ""),
    }
    request.session[PENDING] = pending
    return sha256


@require_http_methods(["GET", "POST"])
@member_required
def map_columns(request, sha256, org):
    """Map the columns of a file refused for them, remember the mapping for the org, then import the stored file."""
    held = request.session.get(PENDING, {}).get(sha256)
    path = storage.media_path(pending_name(org.pk, sha256))
    if held is None or not path.is_file():
        raise Http404("No file waits for its columns here.")
    target = get_object_or_404(SiteTarget.objects.filter(site__org_id=org.pk), pk=held["site_target"])
    headers, samples = column_mapping.preview(
        lambda: inspect_file(path, held["filename"], sheet=held["sheet"], date_order=held["date_order"]))
    form = ColumnMappingForm(request.POST or None, headers=headers)
    if request.method == "POST" and form.is_valid():
        column_mapping.save(org_id=org.pk, headers=headers, mapping=form.mapping(), user=request.user)
        upload = ImportUploadForm(
            {key: held[key] for key in ("period_start", "period_end", "sheet", "date_order")}
            | {"site_target": target.pk},
            {"file": File(path.open("rb"), name=held["filename"])}, org_id=org.pk,
        )
        try:
            if upload.is_valid():
                imp = upload.save(created_by=request.user)
                messages.success(request, f"“{imp.original_filename}” is queued; its progress shows below.")
                messages.info(request, mapped_by_message(upload.mapped_by))
                path.unlink(missing_ok=True)
                del request.session[PENDING][sha256]
                request.session.modified = True
                return redirect("imports:index")
        finally:
            upload.files["file"].close()
        for error in upload.errors.values():
            form.add_error(None, error)
    return render(request, "imports/map_columns.html", {
        "org": org, "form": form, "filename": held["filename"], "target": target,
        "headers": headers, "samples": samples,
    })


@require_http_methods(["GET", "POST"])
@member_required
def detail(request, pk, org):
    """One import's page; a POST imports its file again into the target it names (*Import it into …*)."""
    imports = Import.objects.for_org(org.pk).select_related("site_target__site", "job", "created_by",
                                                            "reimport_of")
    imp = get_object_or_404(imports, pk=pk)
    if request.method == "POST":
        target_id = request.POST.get("site_target", "")
        target = get_object_or_404(SiteTarget.objects.filter(site__org_id=org.pk).select_related("site"),
                                   pk=int(target_id) if target_id.isdigit() else None)
        try:
            again = reimport(imp, target, user=request.user)
        except NotReimported as exc:
            messages.error(request, str(exc))
            return redirect("imports:detail", imp.pk)
        messages.success(request, f"“{again.original_filename}” is queued again, for {target.site} · {target}.")
        return redirect("imports:detail", again.pk)
    row = ImportRow(imp, liveness.read_clock())
    offer = suggest(imp, row.report) if row.shown_status in WARNING_OUTCOMES else None
    return render(request, "imports/detail.html", {
        "org": org, "row": row, "imp": imp, "suggestion": offer,
        "reimports": imp.reimports.select_related("site_target__site").order_by("created_at"),
        **replacements.of(imp, org.pk),
    })


@require_http_methods(["POST"])
@member_required
def retry(request, pk, org):
    """*Retry*: a failed import of the caller's org runs again, the same Import and its job (no new import).

    The admin's requeue with a fresh budget (``jobs.operator_actions``), fenced the same way: judged under
    the job's lock, so an import that moved meanwhile, or whose file another live import holds, is left
    alone with the reason; the job's ``on_requeue`` puts the Import back to queued.
    """
    imp = get_object_or_404(Import.objects.for_org(org.pk).only("pk", "status", "job_id", "original_filename"),
                            pk=pk)
    if imp.status != ImportStatus.FAILED or imp.job_id is None:
        messages.error(request, "Only a failed import can be retried: this one is "
                                f"{imp.get_status_display().lower()}.")
        return redirect("imports:detail", imp.pk)
    result = operator_actions.requeue([imp.job_id], fresh_budget=True)
    if imp.job_id in result.requeued:
        messages.success(request, f"“{imp.original_filename}” is queued again; its progress shows below.")
    else:
        why = result.refused.get(imp.job_id, "it moved meanwhile")
        messages.error(request, f"Not retried: {why}.")
    return redirect("imports:detail", imp.pk)
