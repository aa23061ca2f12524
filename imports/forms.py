"""The upload form: it validates an upload, and hands a valid one to ``services.create_import``.

Also what ``manage.py importfile`` checks before it queues a file, with the
form's own messages (``inspect_file``, ``date_warning``, ``PERIOD_NEEDED``).
"""

from __future__ import annotations

import io

from django import forms
from django.template.defaultfilters import filesizeformat

from seoinsight.models import SiteTarget

from . import column_mapping, conf
from .formats import DATE_ORDERS, NoSuchSheet, RowSource, UnreadableFile, look, open_source
from .formats.ziparchive import size_text
from .formats.headers import MAPPABLE, mapping_problem
from .models import DateOrder, Import
from .services import ACCEPTED, KIND_BY_EXTENSION, create_import, display_filename, kind_for


def max_upload_bytes() -> int:
    return conf.get("IMPORT_MAX_UPLOAD_BYTES")


# Said before anything is queued, by the form and by ``importfile``, each adding how to give it.
PERIOD_NEEDED = ("the file has no Date column and does not say which period its figures cover "
                 "(a Search Console “Pages” table, say)")


def inspect_file(path, filename: str, *, sheet: str = "", date_order: str = "", org_id: str | None = None) -> RowSource:
    """Open the file as the worker will (header, sheet, period), before it is queued.

    Reads what identifies the file (its first bytes and header row, a
    workbook's sheets, a Search Console export's Filters), never its rows: a
    file that cannot be an import is refused here with the worker's own
    message (``UnreadableFile``), so the user can fix it in one step. ``path``
    is a path or an opener (``upload_opener``); with ``org_id``, the org's saved column mappings apply.
    """
    if org_id is not None:
        with column_mapping.applied(org_id):
            return inspect_file(path, filename, sheet=sheet, date_order=date_order)
    return open_source(path, filename, sheet=sheet or None, date_order=date_order or None,
                       default_date_order=conf.get("IMPORT_DATE_ORDER"),
                       max_unzipped_bytes=conf.get("IMPORT_MAX_UNZIPPED_BYTES"))


def upload_opener(upload):
    """An opener over an uploaded file: its temporary file, or its bytes (a small upload, held in memory).

    The bytes are taken once: each opening is a view of them, not another copy.
    """
    if hasattr(upload, "temporary_file_path"):
        path = upload.temporary_file_path()
        return lambda: open(path, "rb")
    upload.seek(0)
    data = upload.read()
    return lambda: io.BytesIO(data)


def unchecked_notice(filename: str, looked_at: int) -> str:
    """What the upload says of a file it could not check within its look (IMPORT_UPLOAD_CHECK_BYTES)."""
    return (f"“{filename}” is too large to check at upload (its first {size_text(looked_at)} were read): "
            "it is queued, and its import says what is wrong with it, if anything.")


# Rows whose dates the upload looks at to warn about an order it cannot settle.
DATE_ROWS_AT_UPLOAD = 2000


def date_warning(source: RowSource, filename: str, *, choose: str = "choose the order under “Dates like "
                 "1/12/2026” and upload it again") -> str:
    """A warning when the first rows' dates fit both orders and the import chose none, else ""."""
    order = source.date_order_of_first_rows(DATE_ROWS_AT_UPLOAD)
    if order is None or order.decided_by != "default" or not order.example:
        return ""
    read = DATE_ORDERS[order.order]
    return (f"Every date at the top of “{filename}” (such as {order.example}) fits both day first and month "
            f"first: unless a date further down settles it, it is read {read}. If that is wrong, {choose}.")


def sentence(message: str) -> str:
    """A format's message as a sentence of its own: capital first, full stop last."""
    message = message[:1].upper() + message[1:]
    return message if message.endswith((".", "?", "!", "…")) else message + "."


class TargetChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, target):
        label = str(target)
        return label if target.site.domain in label else f"{target.site.domain} — {label}"


class ImportUploadForm(forms.Form):
    file = forms.FileField(
        label="Export file",
        help_text=f"A Search Console or rank-tracker export: {ACCEPTED}.",
        widget=forms.ClearableFileInput(attrs={"accept": ",".join(KIND_BY_EXTENSION)}),
    )
    site_target = TargetChoiceField(
        queryset=SiteTarget.objects.none(),
        label="Site target",
        empty_label="Choose a target…",
        help_text="Rows whose URL is outside this target are skipped and counted.",
    )
    period_start = forms.DateField(
        label="From", required=False, widget=forms.DateInput(attrs={"type": "date"}),
    )
    period_end = forms.DateField(
        label="To", required=False, widget=forms.DateInput(attrs={"type": "date"}),
    )
    sheet = forms.CharField(
        label="Sheet", required=False, max_length=100,
        help_text="Excel only: the sheet to read. Empty: the first sheet with a URL column.",
    )
    date_order = forms.ChoiceField(
        label="Dates like 1/12/2026", required=False,
        choices=[("", "Detect from the file"), *DateOrder.choices],
        help_text="Detected when a date such as 13/1 or 1/13 settles it; choose when every date fits both.",
    )

    def __init__(self, *args, org_id: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.date_warning = ""  # set by clean(): shown beside the "queued" message
        self.unchecked = ""  # set by clean(): the file is queued unchecked (unchecked_notice), shown the same way
        self.org_id = org_id
        # Set by clean(): the file's columns are unknown (a mapping can read it), or a saved mapping read them.
        self.unmapped = False
        self.mapped_by: column_mapping.ColumnMapping | None = None
        targets = SiteTarget.objects.filter(site__org_id=org_id).select_related("site").order_by(
            "site__domain", "url_prefix", "search_console_property"
        )
        self.fields["site_target"].queryset = targets
        if len(targets) == 1:
            self.fields["site_target"].initial = targets[0].pk
        self.fields["file"].help_text += (f" Up to {filesizeformat(max_upload_bytes())}, "
                                          f"at most {conf.get('IMPORT_MAX_COLUMNS'):,} columns.")

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if kind_for(upload.name) is None:
            raise forms.ValidationError(
                "“%(name)s” is not a file we can import: use one of %(accepted)s.",
                code="extension", params={"name": display_filename(upload.name), "accepted": ACCEPTED},
            )
        limit = max_upload_bytes()
        if upload.size > limit:
            raise forms.ValidationError(
                "This file is %(size)s; the largest file accepted is %(limit)s. "
                "Split the export by period, or ask an administrator to raise the limit.",
                code="too_large", params={"size": filesizeformat(upload.size), "limit": filesizeformat(limit)},
            )
        return upload

    def clean(self):
        cleaned = super().clean()
        start, end = cleaned.get("period_start"), cleaned.get("period_end")
        if bool(start) != bool(end):
            self.add_error("period_end" if start else "period_start", "Give both dates of the period, or neither.")
        elif start and end < start:
            self.add_error("period_end", "The period ends before it starts.")
        if "file" in cleaned:
            self._inspect(cleaned)
        return cleaned

    def _inspect(self, cleaned) -> None:
        """Say now what the worker would refuse later: an unreadable file, a missing period or sheet."""
        upload, sheet = cleaned["file"], cleaned.get("sheet", "")
        # A look, not a read, inside the request: a file the look cannot settle is the job's to read whole.
        budget = conf.get("IMPORT_UPLOAD_CHECK_BYTES")
        try:
            with look.bounded(budget):
                source = inspect_file(upload_opener(upload), upload.name, sheet=sheet,
                                      date_order=cleaned.get("date_order", ""), org_id=self.org_id)
        except look.LookExhausted:
            self.unchecked = unchecked_notice(display_filename(upload.name), budget)
            return
        except NoSuchSheet as exc:
            self.add_error("sheet", sentence(str(exc)))
            return
        except UnreadableFile as exc:
            self.unmapped = column_mapping.is_unmapped(exc)
            self.add_error("file", sentence(str(exc)))
            return
        finally:
            upload.seek(0)  # stored next, from its start
        self.mapped_by = column_mapping.saved_for(self.org_id, source.headers)
        try:
            with look.bounded(budget):
                self.date_warning = date_warning(source, display_filename(upload.name))
        except look.LookExhausted:
            pass  # its first rows are past the look: no warning, the import's report says how dates were read
        if sheet and source.sheet is None:
            self.add_error("sheet", "Only an Excel workbook has sheets: leave this empty for this file.")
        if source.needs_period and not (cleaned.get("period_start") or cleaned.get("period_end")
                                        or self.has_error("period_start") or self.has_error("period_end")):
            self.add_error("period_start", sentence(PERIOD_NEEDED + ": give the period below"))

    def save(self, *, created_by=None, **more) -> Import:
        """The Import of the valid upload; ``more`` goes to ``create_import`` (a re-import's origin and source)."""
        upload = self.cleaned_data["file"]
        return create_import(
            site_target=self.cleaned_data["site_target"], content=upload, filename=upload.name, size=upload.size,
            period_start=self.cleaned_data.get("period_start"), period_end=self.cleaned_data.get("period_end"),
            created_by=created_by, sheet=self.cleaned_data.get("sheet", ""),
            date_order=self.cleaned_data.get("date_order", ""), **more,
        )


class ColumnMappingForm(forms.Form):
    """Which column holds which field, for a file whose headers are unknown: the URL at least, each column once."""

    def __init__(self, *args, headers: tuple[str, ...], **kwargs):
        super().__init__(*args, **kwargs)
        self.headers = headers
        named = [(header, header) for header in dict.fromkeys(h for h in headers if h)]
        for field in MAPPABLE:
            self.fields[field] = forms.ChoiceField(
                label="URL" if field == "url" else field.capitalize(), required=field == "url",
                choices=[("", "Choose a column…" if field == "url" else "(none: ignore)"), *named],
            )

    def clean(self):
        cleaned = super().clean()
        problem = mapping_problem(self.headers, self.mapping())
        if problem:
            raise forms.ValidationError(sentence(problem), code="mapping")
        return cleaned

    def mapping(self) -> dict[str, str]:
        return {field: self.cleaned_data[field] for field in MAPPABLE if self.cleaned_data.get(field)}
