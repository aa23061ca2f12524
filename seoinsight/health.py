"""``/health/live`` and ``/health/ready``: may a load balancer or an orchestrator send this replica work?

``live``: the process answers (no database, nothing else): restart it when it
does not. ``ready``: the database answers, every migration is applied, and the
checks of ``READY_CHECKS`` find nothing wrong — at least one ``runjobs`` and one
``pollmail`` seen recently (the process list), the downstream outbox below its
capacity when it is on (``outbox.capacity``). Either answers JSON, 200 or 503, with no authentication,
so it says nothing an anonymous caller may not know: check names and fixed
reasons, never an exception's text (a DSN, a host, a user), never an org.

``signals`` are reported beside the checks, in the same form, but never make
the answer 503: what they show is not this replica's to fix, and taking every
web replica out of rotation would not fix it either. ``outbox_overdue``: held
documents due for longer than OUTBOX_OVERDUE_SECONDS with no sender taking them
(no worker running, all of them busy, a stall) — for the operator's monitoring
to alert on (``seoinsight_outbox_overdue`` in /metrics too), while intake and
the web keep working.

The checks of the apps above the core are named by dotted path, like
INSTALLED_APPS: the core knows no app; the strings are its wiring. Each is a
callable returning the list of what is wrong (empty when ready), or, with a
reason after it, a predicate that is true when the replica is not ready.
"""

from __future__ import annotations

import logging

from django.db import DEFAULT_DB_ALIAS, DatabaseError, InterfaceError, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse
from django.utils.module_loading import import_string
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

log = logging.getLogger(__name__)

READY_CHECKS = (
    ("processes", "jobs.processes.readiness"),
    # Full, intake has stopped (outbox.capacity): this replica takes nothing new until the outbox drains.
    ("outbox", "outbox.capacity.is_full", "the downstream outbox is full: intake waits until it drains"),
)
# Reported, never 503 (see above).
READY_SIGNALS = (
    ("outbox_overdue", "outbox.watch.readiness"),
)

_migrated = False


def database() -> list[str]:
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT 1")
    except (DatabaseError, InterfaceError) as exc:
        log.warning("health: database unreachable (%s)", type(exc).__name__)
        connections[DEFAULT_DB_ALIAS].close()
        return ["the database is unreachable"]
    return []


def migrations() -> list[str]:
    """Unapplied migrations; once none are, this process does not ask again (new migrations come with new code)."""
    global _migrated
    if _migrated:
        return []
    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if pending:
        return [f"{len(pending)} migration(s) not applied (run manage.py migrate)"]
    _migrated = True
    return []


def _problems(path: str, reason: list[str]) -> list[str]:
    found = import_string(path)()
    if reason:
        return list(reason) if found else []
    return list(found)


def _read(kind: str, entries) -> dict[str, list[str]]:
    """Each entry's problems; one whose query fails says so (a check or signal never raises)."""
    found = {}
    for name, path, *reason in entries:
        try:
            found[name] = _problems(path, reason)
        except (DatabaseError, InterfaceError) as exc:
            log.warning("health: %s %s failed (%s)", kind, name, type(exc).__name__)
            found[name] = [f"the {name} {kind} could not read the database"]
    return found


def ready_report() -> tuple[bool, dict]:
    """(ready, the JSON body): each check's problems; the app checks only once the database is usable."""
    checks: dict[str, list[str]] = {"database": database()}
    if not checks["database"]:
        checks["migrations"] = migrations()
    if not any(checks.values()):
        checks.update(_read("check", READY_CHECKS))
    ready = not any(checks.values())
    usable = not (checks["database"] or checks.get("migrations"))
    signals = _read("signal", READY_SIGNALS) if usable else {}
    return ready, {
        "status": "ready" if ready else "not ready",
        "checks": {name: {"ok": not problems, "problems": problems} for name, problems in checks.items()},
        "signals": {name: {"ok": not problems, "problems": problems} for name, problems in signals.items()},
    }


@never_cache
@require_safe
def live(request):
    return JsonResponse({"status": "live"})


@never_cache
@require_safe
def ready(request):
    is_ready, body = ready_report()
    return JsonResponse(body, status=200 if is_ready else 503)
