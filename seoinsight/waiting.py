"""What waits for a person: each app registers its queues, and the admin's index shows them first.

A queue is a label, the admin list that holds it, and a count for one HTTP
request: the count is the app's to scope (its admin's own queryset), so a user
sees only their orgs' waiting rows, and nothing of a list they may not view.

A listing is a queue whose rows are each worth a line on the index (every site
with its newest data): its callable answers the lines, late ones first, and how
many are late, which is its count.

``admin_count`` is the usual count: the rows of a model's admin list, scoped by that admin to the user's
orgs, that one filter of the list keeps: the link to ``?<that filter>`` lands on exactly those rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import admin
from django.db.models import Q
from django.http import HttpRequest


@dataclass(frozen=True)
class Line:
    label: str  # "acme.example"
    url: str  # its page
    note: str  # "newest data 2026-11-20, 14 days ago"
    late: bool  # waits for a person


@dataclass(frozen=True)
class Listed:
    """A listing's answer for one request: ``late`` lines in all, the first of them first in ``lines``."""

    heading: str
    lines: tuple[Line, ...]
    late: int
    more: int = 0  # lines left out of ``lines``


@dataclass(frozen=True)
class Shown:
    """A queue as one request sees it; ``listed`` only for a listing."""

    label: str
    url: str
    count: int
    listed: Listed | None = None


@dataclass(frozen=True)
class Queue:
    label: str  # "documents waiting for a site"
    url: Callable[[], str]  # the admin list that shows them (resolved when shown)
    count: Callable[[HttpRequest], int | None]  # None: this user may not see the list

    def show(self, request: HttpRequest) -> Shown | None:
        count = self.count(request)
        return None if count is None else Shown(self.label, self.url(), count)


@dataclass(frozen=True)
class Listing:
    label: str  # "sites whose data is stale"
    url: Callable[[], str]
    lines: Callable[[HttpRequest], Listed | None]  # None: this user may not see the list

    def show(self, request: HttpRequest) -> Shown | None:
        listed = self.lines(request)
        return None if listed is None else Shown(self.label, self.url(), listed.late, listed)


_queues: list[Queue | Listing] = []


def register(label: str, url: Callable[[], str], count: Callable[[HttpRequest], int | None]) -> None:
    _queues.append(Queue(label, url, count))


def register_listing(label: str, url: Callable[[], str], lines: Callable[[HttpRequest], Listed | None]) -> None:
    _queues.append(Listing(label, url, lines))


def for_request(request: HttpRequest) -> list[Shown]:
    """Each queue this user may see, in the order the apps registered them."""
    return [shown for shown in (queue.show(request) for queue in _queues) if shown is not None]


def admin_count(request: HttpRequest, model, *conditions: Q, **lookups) -> int | None:
    """How many rows of ``model``'s admin list (scoped to the user's orgs) match; None if they may not view it.

    One COUNT, on the admin's own ``scope`` when it has one (no list annotations), else its queryset.
    """
    model_admin = admin.site._registry.get(model)
    if model_admin is None or not model_admin.has_view_permission(request):
        return None
    scope = getattr(model_admin, "scope", None)
    rows = scope(request, model._default_manager.all()) if scope else model_admin.get_queryset(request)
    return rows.filter(*conditions, **lookups).count()
