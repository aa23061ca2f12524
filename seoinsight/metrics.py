"""``/metrics``: Prometheus text, computed from the database at each scrape, for operators only.

Protected by a bearer token, ``METRICS_TOKEN`` (compared in constant time).
Without one set, ``/metrics`` answers 404 to everyone: a fresh deployment
exposes nothing until its operator chooses a token. A wrong or missing token
is a 401. The metrics are operator-level: job types, statuses, process kinds,
mailbox ids — never an org's name, address or data.

Each family comes from the source that owns its tables, named by dotted path
like INSTALLED_APPS (the core knows no app; these strings are its wiring).
A source that fails (the database is down) is left out of the scrape and
``seoinsight_metrics_source_up{source}`` says 0, so the rest still answer.
"""

from __future__ import annotations

import hmac
import logging

from django.conf import settings
from django.http import HttpResponse, HttpResponseNotFound
from django.utils.module_loading import import_string
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

log = logging.getLogger(__name__)

SOURCES = (
    "jobs.metrics.collect",
    "mailpoll.metrics.collect",
    "outbox.metrics.collect",
)


class DatabaseCollector:
    """A prometheus_client collector that asks every source at collect time."""

    def __init__(self, sources=SOURCES):
        self.sources = sources

    def collect(self):
        up = GaugeMetricFamily("seoinsight_metrics_source_up", "1 when the source's families were read.",
                               labels=["source"])
        for path in self.sources:
            try:
                families = list(import_string(path)())
            except Exception as exc:
                log.warning("metrics: source %s failed (%s)", path, type(exc).__name__)
                up.add_metric([path], 0)
                continue
            up.add_metric([path], 1)
            yield from families
        yield up


def authorized(header: str, token: str) -> bool:
    """Does an Authorization header carry this bearer token? (constant-time; an empty token never matches)

    >>> authorized("Bearer s3cret", "s3cret"), authorized("Bearer s3cre", "s3cret"), authorized("", "")
    (True, False, False)
    """
    scheme, _, given = header.partition(" ")
    if not token or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


@never_cache
@require_safe
def metrics(request):
    token = getattr(settings, "METRICS_TOKEN", "")
    if not token:
        return HttpResponseNotFound("not found\n", content_type="text/plain")
    if not authorized(request.headers.get("Authorization", ""), token):
        response = HttpResponse("a bearer token is required\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
