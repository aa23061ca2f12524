"""What a note may be (insight.annotations.checked, latest_day): tables of cases, no database."""

from datetime import date

import pytest

from insight.annotations import checked, latest_day

TODAY = date(2026, 12, 8)


@pytest.mark.parametrize("day, text, expected_day, expected_text", [
    ("2026-11-20", "Moved to HTTPS", date(2026, 11, 20), "Moved to HTTPS"),
    (" 2000-01-01 ", "  first day kept, spaces trimmed  ", date(2000, 1, 1), "first day kept, spaces trimmed"),
    ("2027-12-08", "a year from today is the last day", date(2027, 12, 8), "a year from today is the last day"),
    ("2026-12-08", "x" * 200, date(2026, 12, 8), "x" * 200),
    ("2026-05-01", "Änderung: Übersetzung « é » 日本語 🚀", date(2026, 5, 1), "Änderung: Übersetzung « é » 日本語 🚀"),
])
def test_a_good_note_is_kept_as_typed_without_surrounding_spaces(day, text, expected_day, expected_text):
    assert checked(day, text, TODAY) == (expected_day, expected_text, [])


@pytest.mark.parametrize("day, text, errors", [
    ("", "note", ["The day must be a date written YYYY-MM-DD."]),
    ("20261120", "note", ["The day must be a date written YYYY-MM-DD."]),
    ("2026-02-30", "note", ["The day must be a date written YYYY-MM-DD."]),
    ("1999-12-31", "note", ["The day, 1999-12-31, is before 2000-01-01."]),
    ("2027-12-09", "note", ["The day, 2027-12-09, is after 2027-12-08 (a year from today)."]),
    ("2026-11-20", "", ["The note is empty: write what happened on that day."]),
    ("2026-11-20", " \t ", ["The note is empty: write what happened on that day."]),
    ("2026-11-20", "x" * 201, ["The note is 201 characters long; it may be 200 at most."]),
    ("2026-11-20", "two\nlines", ["The note holds a control character or a line break: write it on one line."]),
    ("2026-11-20", "nul\x00", ["The note holds a control character or a line break: write it on one line."]),
    ("2026-11-20", "bell\x07", ["The note holds a control character or a line break: write it on one line."]),
    ("2026-11-20", "c1\x85x", ["The note holds a control character or a line break: write it on one line."]),
    ("2026-11-20", "sep\u2028x", ["The note holds a control character or a line break: write it on one line."]),
    ("nope", "", ["The day must be a date written YYYY-MM-DD.",
                  "The note is empty: write what happened on that day."]),
])
def test_a_bad_note_is_refused_with_every_reason(day, text, errors):
    found = checked(day, text, TODAY)
    assert found.day is None
    assert found.errors == errors


@pytest.mark.parametrize("today, latest", [
    (date(2026, 12, 8), date(2027, 12, 8)),
    (date(2028, 2, 29), date(2029, 2, 28)),
    (date(2027, 12, 31), date(2028, 12, 31)),
])
def test_the_latest_day_is_a_year_from_today(today, latest):
    assert latest_day(today) == latest
