"""System checks for the outbox settings.

outbox.E001  an OUTBOX_* / DOWNSTREAM_* environment text is not of the setting's type
outbox.E002  a count or duration among them is not above zero
outbox.E003  DOWNSTREAM_URL is not an http(s) URL that the client and the checks read alike
outbox.E004  DOWNSTREAM_TOKEN is set and DOWNSTREAM_URL is plain http to a host other than 127.0.0.1 / localhost
outbox.W002  DOWNSTREAM_URL is plain http to a host other than 127.0.0.1 / localhost (documents in clear text)
outbox.W001  OUTBOX_LEASE_SECONDS is not longer than DOWNSTREAM_TIMEOUT (a slow try would be sent twice)
"""

from __future__ import annotations

from django.core import checks

from seoinsight.outbound import EndpointError, endpoint, where

from . import conf


@checks.register()
def check_values(app_configs=None, **kwargs):
    return conf.SETTINGS.environment_errors("outbox.E001") or conf.SETTINGS.not_positive_errors(
        conf.POSITIVE, "outbox.E002")


@checks.register()
def check_downstream(app_configs=None, **kwargs):
    if conf.SETTINGS.unparsable():
        return []
    errors = []
    url = str(conf.get("DOWNSTREAM_URL")).strip()
    if url:
        errors += downstream_url_messages(url, token=bool(str(conf.get("DOWNSTREAM_TOKEN")).strip()))
    if float(conf.get("OUTBOX_LEASE_SECONDS")) <= float(conf.get("DOWNSTREAM_TIMEOUT")):
        errors.append(checks.Warning(
            "OUTBOX_LEASE_SECONDS is not longer than DOWNSTREAM_TIMEOUT: a try still waiting for its answer "
            "could be claimed and sent again by another sender.",
            hint="Make the lease comfortably longer than the timeout (the defaults: 300 s and 30 s).",
            id="outbox.W001"))
    return errors


def downstream_url_messages(url: str, *, token: bool) -> list:
    """outbox.E003 / E004 / W002 for ``url``, parsed once the way the sender's client reads it
    (``seoinsight.outbound.endpoint``): a URL another parser would read differently is no URL here. The
    messages name the URL's origin only: a key in its path or query is not printed by ``check``.

    >>> [m.id for m in downstream_url_messages("http://127.0.0.2:99\\\\@127.0.0.1/in", token=True)]
    ['outbox.E003']
    >>> [m.id for m in downstream_url_messages("http://cms.internal/in", token=False)]
    ['outbox.W002']
    """
    try:
        parsed = endpoint(url)
    except EndpointError as exc:
        return [checks.Error(f"DOWNSTREAM_URL ({where(url)}) must be an http(s) URL that every parser reads alike: {exc}.",
                             hint="Each accepted document is POSTed to it.", id="outbox.E003")]
    if parsed.scheme != "http" or parsed.loopback:
        return []
    if token:
        return [checks.Error(
            f"DOWNSTREAM_TOKEN is set and DOWNSTREAM_URL ({where(url)}) is plain http: the token would cross the "
            "network in clear.", hint="Use https (http is expected only on 127.0.0.1 / localhost).",
            id="outbox.E004")]
    return [checks.Warning(
        f"DOWNSTREAM_URL ({where(url)}) is plain http: documents and their files cross the network in clear.",
        hint="Use https (http is expected only on 127.0.0.1 / localhost).", id="outbox.W002")]
