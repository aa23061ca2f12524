"""How a figure is written for a reader: counts, CTR, positions and signed changes. Pure.

Shared by the site page, the portfolio and the admin's metric lists, so a figure reads the same everywhere.
"""

from __future__ import annotations

DASH = "—"


def number(value: float | None) -> str:
    """A count with thousands separators.

    >>> number(1234567), number(None)
    ('1,234,567', '—')
    """
    return DASH if value is None else f"{value:,.0f}"


def percent(ratio: float | None) -> str:
    """CTR as shown: a percentage with 2 decimals.

    >>> percent(0.0034999999999999996), percent(None)
    ('0.35%', '—')
    """
    return DASH if ratio is None else f"{ratio * 100:.2f}%"


def position(value: float | None) -> str:
    """A position with 1 decimal.

    >>> position(3.14159), position(None)
    ('3.1', '—')
    """
    return DASH if value is None else f"{value:.1f}"


def signed_percent(ratio: float | None) -> str:
    """A relative change: ``+25.0%``, ``−100.0%``; a dash when there was nothing before.

    >>> signed_percent(0.25), signed_percent(-1.0), signed_percent(0.0), signed_percent(None)
    ('+25.0%', '−100.0%', '0.0%', '—')
    """
    if ratio is None:
        return DASH
    return signed(ratio * 100, ".1f") + "%"


def signed(value: float, spec: str) -> str:
    text = format(abs(value), spec)
    if float(text) == 0:
        return text
    return ("+" if value > 0 else "−") + text
