"""System checks for the outbox settings.

outbox.E001  an OUTBOX_* / DOWNSTREAM_* environment text is not of the setting's type
outbox.E002  a count or duration among them is not above zero
outbox.E003  DOWNSTREAM_URL is not an http(s) URL
outbox.E004  DOWNSTREAM_TOKEN is set and DOWNSTREAM_URL is plain http to a host other than 127.0.0.1 / localhost
outbox.W002  DOWNSTREAM_URL is plain http to a host other than 127.0.0.1 / localhost (documents in clear text)
outbox.W001  OUTBOX_LEASE_SECONDS is not longer than DOWNSTREAM_TIMEOUT (a slow try would be sent twice)
"""

from __future__ import annotations

import urllib.parse

from django.core import checks

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
        parts = urllib.parse.urlsplit(url)
        local = parts.hostname in ("127.0.0.1", "localhost")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            errors.append(checks.Error(f"DOWNSTREAM_URL is {url!r}; it must be an http(s) URL.",
                                       hint="Each accepted document is POSTed to it.", id="outbox.E003"))
        elif parts.scheme == "http" and not local and str(conf.get("DOWNSTREAM_TOKEN")).strip():
            errors.append(checks.Error(
                f"DOWNSTREAM_TOKEN is set and DOWNSTREAM_URL {url!r} is plain http: the token would cross the "
                "network in clear.", hint="Use https (http is expected only on 127.0.0.1 / localhost).",
                id="outbox.E004"))
        elif parts.scheme == "http" and not local:
            errors.append(checks.Warning(
                f"DOWNSTREAM_URL {url!r} is plain http: documents and their files cross the network in clear.",
                hint="Use https (http is expected only on 127.0.0.1 / localhost).", id="outbox.W002"))
    if float(conf.get("OUTBOX_LEASE_SECONDS")) <= float(conf.get("DOWNSTREAM_TIMEOUT")):
        errors.append(checks.Warning(
            "OUTBOX_LEASE_SECONDS is not longer than DOWNSTREAM_TIMEOUT: a try still waiting for its answer "
            "could be claimed and sent again by another sender.",
            hint="Make the lease comfortably longer than the timeout (the defaults: 300 s and 30 s).",
            id="outbox.W001"))
    return errors
