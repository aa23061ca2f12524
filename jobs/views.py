import uuid

from django.http import JsonResponse
from django.views.decorators.http import require_GET

from seoinsight.auth import json_org_required

from .models import Job


@require_GET
@json_org_required
def job_detail(request, job_id, org_id):
    """``GET /jobs/<uuid>``: the job's state, for pages and clients that poll it.

    Only the caller's org is visible; anything else is the same 404 as an unknown id.
    """
    try:
        job_id = uuid.UUID(job_id)
    except ValueError:
        return JsonResponse({"error": "job not found"}, status=404)
    job = Job.objects.for_org(org_id).filter(pk=job_id).first() if org_id else None
    if job is None:
        return JsonResponse({"error": "job not found"}, status=404)
    return JsonResponse(job.as_api_dict())
