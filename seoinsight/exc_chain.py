"""Walking an exception's chain (``__cause__``, else ``__context__``): each exception once, even when it loops.

A chain can loop back on itself (an exception raised again while handling its own wrapper); every walk
of one goes through ``chain`` so that none of them spins forever in a worker or a poller.
"""

from __future__ import annotations

from collections.abc import Iterator


def chain(exc: BaseException | None, *, suppressed: bool = True) -> Iterator[BaseException]:
    """``exc`` and what it wraps, outermost first (``__cause__``, else ``__context__``), each once.

    Without ``suppressed``, a context its wrapper hid (``raise … from None``) is left out, as a traceback
    leaves it out.

    >>> outer = ValueError("outer"); inner = KeyError("inner")
    >>> outer.__context__, inner.__context__ = inner, outer  # a loop
    >>> [str(e) for e in chain(outer)]
    ['outer', "'inner'"]
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        hidden = exc.__suppress_context__ and not suppressed
        exc = exc.__cause__ or (None if hidden else exc.__context__)
