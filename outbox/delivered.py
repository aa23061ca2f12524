"""What follows once the downstream has a document, said by the app that owns the document.

An entry's ``document_ref`` is ``"<kind>:<id>"`` (``mailpoll.attachment:42``).
The app that holds documents of a kind registers a function for it with
``@on_delivered(kind)``; the sender calls it with the id in the transaction that
deletes the acknowledged entry, so the document moves on (its state, what was
waiting for the acknowledgement) if and only if the entry is gone. This is how
"nothing advances on a held document" is kept without the outbox knowing the
apps above it.

A function that raises rolls the deletion back: the entry stays, the try is
counted as failed with the reason, and it is sent again later (the downstream
dedupes by its Idempotency-Key). A function must therefore record a problem it
can name on its document rather than raise it.
"""

from __future__ import annotations

from collections.abc import Callable

_FOLLOW_UPS: dict[str, Callable[[str], None]] = {}


def on_delivered(kind: str):
    """Register ``func(document_id: str)`` for documents whose ``document_ref`` starts with ``kind:``."""
    def register(func):
        _FOLLOW_UPS[kind] = func
        return func
    return register


def follow_up(document_ref: str) -> None:
    """Run what the document's kind registered; a kind nobody registered needs nothing more."""
    kind, _, document_id = document_ref.partition(":")
    func = _FOLLOW_UPS.get(kind)
    if func is not None:
        func(document_id)
