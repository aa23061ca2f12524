"""Log records that say what they were for, and ``LOG_FORMAT=json``: one JSON object a line.

The loops name their work with ``context(job=..., mailbox=..., org=...)`` (the
worker around a job, the poller around a mailbox); ``ContextFilter``, on the
console handler, copies the innermost values onto every record logged inside,
from any module, so the JSON line carries ``job``, ``mailbox`` and ``org``
without each log call repeating them. The values live in a ``ContextVar``:
each thread (a poller's pool thread) and each task sees only its own.

Nothing here formats a secret: a record's message is written as the code
logged it, and only the three context fields are added.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime

FIELDS = ("job", "mailbox", "org")

_context: ContextVar[dict | None] = ContextVar("seoinsight_log_context", default=None)


class context:  # lower case: it is called like a function, ``with logs.context(job=...)``
    """Name the work of the enclosed block for the log records it emits (None values are left out).

    A class rather than a generator function: a worker enters one for every job it runs, and a
    ``contextmanager``'s generator costs ~1 µs more.
    """

    __slots__ = ("_fields", "_token")

    def __init__(self, **fields):
        self._fields = fields

    def __enter__(self) -> None:
        fields = {k: str(v) for k, v in self._fields.items() if v is not None}
        outer = _context.get()
        self._token = _context.set({**outer, **fields} if outer else fields)

    def __exit__(self, *exc) -> None:
        _context.reset(self._token)


def current() -> dict:
    return dict(_context.get() or {})


class ContextFilter(logging.Filter):
    """Sets ``record.job``, ``record.mailbox``, ``record.org`` (None when unknown); never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        values = _context.get() or {}
        for name in FIELDS:
            if getattr(record, name, None) is None:
                setattr(record, name, values.get(name))
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line: time, level, logger, pid, message, job/mailbox/org, exc."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "thread": record.threadName,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        # json.dumps escapes newlines: a traceback stays inside its line.
        return json.dumps(line, ensure_ascii=False, default=str)
