"""What waits for a person: each app registers its queues, and the admin's index shows them first.

A queue is a label, the admin list that holds it, and a count for one HTTP
request: the count is the app's to scope (its admin's own queryset), so a user
sees only their orgs' waiting rows, and nothing of a list they may not view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest


@dataclass(frozen=True)
class Queue:
    label: str  # "documents waiting for a site"
    url: Callable[[], str]  # the admin list that shows them (resolved when shown)
    count: Callable[[HttpRequest], int | None]  # None: this user may not see the list


_queues: list[Queue] = []


def register(label: str, url: Callable[[], str], count: Callable[[HttpRequest], int | None]) -> None:
    _queues.append(Queue(label, url, count))


def for_request(request: HttpRequest) -> list[tuple[str, str, int]]:
    """(label, url, count) of each queue this user may see, in the order the apps registered them."""
    shown = []
    for queue in _queues:
        count = queue.count(request)
        if count is not None:
            shown.append((queue.label, queue.url(), count))
    return shown
