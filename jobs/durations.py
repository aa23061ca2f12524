"""A duration for a person at a glance: two units at most ('1.2 s', '3 min 4 s', '2 h 5 min', '3 d 4 h')."""

from __future__ import annotations

from datetime import timedelta


def readable_duration(delta: timedelta) -> str:
    """Two units at most, for a glance: '1.2 s', '3 min 4 s', '2 h 5 min', '3 d 4 h'.

    >>> readable_duration(timedelta(seconds=74))
    '1 min 14 s'
    """
    seconds = round(max(delta.total_seconds(), 0.0), 1)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"
