"""Refuse an oversized upload before anything reads its body."""

from __future__ import annotations

import logging

from django.http import HttpResponse
from django.template.defaultfilters import filesizeformat

from . import conf

log = logging.getLogger(__name__)

# Room for the form's other fields and the multipart part headers around the file.
MULTIPART_OVERHEAD = 64 * 1024


class UploadSizeLimitMiddleware:
    """A multipart POST longer than ``IMPORT_MAX_UPLOAD_BYTES`` (plus the form around it) gets a 413.

    Django spools an upload to a temporary file as soon as ``request.POST`` is
    read, and the CSRF check reads it before any view runs. Looking at
    ``Content-Length`` first (WSGI never reads past it) means a 5 GB upload is
    refused at once instead of being written to disk and refused afterwards.
    Uploads just over the limit still reach the form, whose message names the
    file's exact size.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method == "POST" and request.content_type == "multipart/form-data":
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0  # Django reads no body at all then
            limit = conf.get("IMPORT_MAX_UPLOAD_BYTES")
            if length > limit + MULTIPART_OVERHEAD:
                log.warning("upload refused before reading: %s bytes to %s, over the %s-byte limit",
                            length, request.path, limit)
                message = (f"This upload is {filesizeformat(length)}; the largest file accepted is "
                           f"{filesizeformat(limit)}. Split the export by period, or ask an administrator "
                           "to raise the limit.\n")
                return HttpResponse(message, status=413, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
