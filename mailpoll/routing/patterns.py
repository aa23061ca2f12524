"""A rule's subject pattern: checked when the rule is saved, run in time linear in the subject.

Patterns are RE2's (google-re2): no backreferences and no lookaround, so no
pattern, however written, can make a hostile subject take exponential time.
Matching is case-insensitive; a subject is at most 1,000 characters (the
Request column), so a match is bounded by construction, with no timer.
"""

from __future__ import annotations

import functools

import re2

MAX_PATTERN_CHARS = 500


class BadPattern(ValueError):
    """The pattern cannot be used; the message says why, for the rule's form."""


def _options() -> re2.Options:
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False  # a bad pattern is the operator's, reported on the form, not logged
    options.max_mem = 8 << 20  # bytes for the compiled program: a pattern too big to compile is refused
    return options


@functools.lru_cache(maxsize=256)
def compile_subject_pattern(pattern: str):
    """The compiled pattern; BadPattern for one that is too long or that RE2 refuses."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise BadPattern(f"a pattern is at most {MAX_PATTERN_CHARS} characters")
    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        detail = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise BadPattern(f"not a valid pattern: {detail} (backreferences and lookaround are not supported)") from None
