import logging
import uuid
from functools import wraps

from django.db import InterfaceError, OperationalError
from django.http import JsonResponse

from seoinsight.auth import json_org_required

from . import liveness
from .models import Job

log = logging.getLogger(__name__)

ALLOWED_METHODS = ("GET", "HEAD")


def json_errors(view):
    """Every answer of the endpoint is JSON, errors included: 405, and a 503 / 500 instead of an HTML page."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method not in ALLOWED_METHODS:
            response = JsonResponse({"error": f"method {request.method} not allowed"}, status=405)
            response["Allow"] = ", ".join(ALLOWED_METHODS)
            return response
        try:
            return view(request, *args, **kwargs)
        except (OperationalError, InterfaceError):
            log.exception("GET %s: database error", request.path)
            return JsonResponse({"error": "the database is unavailable; try again shortly"}, status=503)
        except Exception:
            log.exception("GET %s: server error", request.path)
            return JsonResponse({"error": "server error"}, status=500)

    return wrapper


@json_errors
@json_org_required
def job_detail(request, job_id, org_id):
    """``GET /jobs/<uuid>``: the job's state, for pages and clients that poll it.

    Only the caller's org is visible; anything else is the same 404 as an unknown
    id. ``error`` says why a job failed; its traceback stays with staff. ``stalled`` says when a live job
    shows no sign of life (``jobs.liveness``), else null.
    """
    try:
        job_id = uuid.UUID(job_id)
    except ValueError:
        return not_found(request)
    job = Job.objects.for_org(org_id).filter(pk=job_id).first() if org_id else None
    if job is None:
        return not_found(request)
    # The clock is read for a live job only: a finished one is polled no more, but clients may still ask.
    stalled = liveness.stalled(job, liveness.read_clock()) if job.status in liveness.LIVE else None
    return JsonResponse(job.as_api_dict() | {"stalled": stalled})


@json_errors
def not_found(request, *args, **kwargs):
    """Any other path under ``/jobs/`` (no id, a trailing slash): the same JSON 404."""
    return JsonResponse({"error": "job not found"}, status=404)
