from datetime import date, datetime

import pytest

from imports.formats.searchconsole_export import parse_period
from imports.formats.values import parse_count, parse_ctr, parse_date, parse_position


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1234", 1234),
        ("9223372036854775807", 2**63 - 1),
        ("  42 ", 42),
        ("0", 0),
        ("1,234", 1234),
        ("1.234", 1234),
        ("1 234", 1234),
        ("1\u00a0234", 1234),
        ("1\u202f234", 1234),
        ("1'234", 1234),
        ("1,234,567", 1234567),
        ("1.234.567", 1234567),
        ("1 234 567", 1234567),
        ("1,234.0", 1234),
        ("1.234,0", 1234),
        ("12,0", 12),
        ("12.0", 12),
        ("+7", 7),
        ("", None),
        ("   ", None),
        (None, None),
        (12, 12),
        (12.0, 12),
    ],
)
def test_parse_count(raw, expected):
    assert parse_count(raw) == expected
    assert type(parse_count(raw)) is type(expected)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("abc", "is not a number"),
        ("12,5", "is not a whole number"),
        ("1.5", "is not a whole number"),
        ("-3", "is negative"),
        ("\u22123", "is negative"),
        ("12%", "is not a number"),
        ("1,23,456", "is not a number"),
        ("1.2.3", "is not a number"),
        ("1_000", "is not a number"),
        ("١٢", "is not a number"),
        ("nan", "is not a number"),
        ("1e3", "is not a number"),
        (12.5, "is not a whole number"),
        (-1, "is negative"),
        (True, "is not a number"),
        (float("inf"), "is not a number"),
        (datetime(2024, 1, 1), "is not a number"),
        ("9223372036854775808", "is too large"),
        ("9 223 372 036 854 775 808", "is too large"),
        (1e19, "is too large"),
    ],
)
def test_parse_count_rejects(raw, reason):
    with pytest.raises(ValueError, match=reason):
        parse_count(raw)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("4.5", 4.5),
        ("4,5", 4.5),
        ("1 234,5", 1234.5),
        ("1\u00a0234,5", 1234.5),
        ("1\u202f234,5", 1234.5),
        ("1,234.5", 1234.5),
        ("1.234,5", 1234.5),
        ("1,234", 1.234),  # a single separator is a decimal mark outside counts
        (".5", 0.5),
        ("10", 10.0),
        ("", None),
        (None, None),
        (3, 3.0),
        (2.25, 2.25),
    ],
)
def test_parse_position(raw, expected):
    assert parse_position(raw) == pytest.approx(expected) if expected is not None else parse_position(raw) is None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [("abc", "is not a number"), ("-1", "is negative"), ("inf", "is not a number"), ("1_0", "is not a number")],
)
def test_parse_position_rejects(raw, reason):
    with pytest.raises(ValueError, match=reason):
        parse_position(raw)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("12,3 %", 0.123),
        ("12.3%", 0.123),
        ("12,3\u00a0%", 0.123),
        ("3.53%", 0.0353),
        ("100%", 1.0),
        ("0%", 0.0),
        ("0,5 %", 0.005),
        ("12.3", 0.123),  # a bare number above 1 is a percentage
        ("12,3", 0.123),
        ("0.123", 0.123),  # from 0 to 1 it is a fraction
        ("0,5", 0.5),
        ("1", 1.0),
        ("", None),
        (None, None),
        (0.0353, 0.0353),  # an Excel cell formatted as a percentage holds the fraction
        (12.3, 0.123),
        (0, 0.0),
    ],
)
def test_parse_ctr(raw, expected):
    result = parse_ctr(raw)
    assert result is None if expected is None else result == pytest.approx(expected)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("abc", "is not a number"),
        ("150%", "between 0 and 100"),
        ("-1%", "between 0 and 100"),
        ("101", "between 0 and 100"),
        ("%", "is not a number"),
    ],
)
def test_parse_ctr_rejects(raw, reason):
    with pytest.raises(ValueError, match=reason):
        parse_ctr(raw)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2024-03-05", date(2024, 3, 5)),
        ("2024-3-5", date(2024, 3, 5)),
        ("2024-03-05T00:00:00", date(2024, 3, 5)),
        ("2024-03-05 12:30:00", date(2024, 3, 5)),
        ("05/03/2024", date(2024, 3, 5)),  # day first, always
        ("5/3/2024", date(2024, 3, 5)),
        ("31/12/2023", date(2023, 12, 31)),
        (" 2024-02-29 ", date(2024, 2, 29)),
        ("", None),
        (None, None),
        (datetime(2024, 3, 5, 10, 0), date(2024, 3, 5)),
        (date(2024, 3, 5), date(2024, 3, 5)),
        (45356, date(2024, 3, 5)),  # an Excel serial number
        (45356.5, date(2024, 3, 5)),
    ],
)
def test_parse_date(raw, expected):
    assert parse_date(raw) == expected


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("2024-02-30", "no such day"),
        ("31/02/2024", "no such day"),
        ("13/13/2024", "no such day"),
        ("March 5, 2024", "expected yyyy-mm-dd or dd/mm/yyyy"),
        ("2024/03/05", "expected yyyy-mm-dd or dd/mm/yyyy"),
        ("yesterday", "expected yyyy-mm-dd or dd/mm/yyyy"),
        (-1, "is not a date"),
        (10**9, "is not a date"),
    ],
)
def test_parse_date_rejects(raw, reason):
    with pytest.raises(ValueError, match=reason):
        parse_date(raw)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-01 - 2024-03-31", (date(2024, 1, 1), date(2024, 3, 31))),
        ("2024-01-01-2024-03-31", (date(2024, 1, 1), date(2024, 3, 31))),
        ("2024-01-01 – 2024-03-31", (date(2024, 1, 1), date(2024, 3, 31))),
        ("01/01/2024 - 31/03/2024", (date(2024, 1, 1), date(2024, 3, 31))),
        ("Jan 1, 2024 - Mar 31, 2024", (date(2024, 1, 1), date(2024, 3, 31))),
        ("Aug 28, 2026-Sep 3, 2026", (date(2026, 8, 28), date(2026, 9, 3))),
        ("Custom: January 1, 2024 – March 31, 2024", (date(2024, 1, 1), date(2024, 3, 31))),
        ("Sept. 1, 2024 - Sept. 30, 2024", (date(2024, 9, 1), date(2024, 9, 30))),
        ("1 janv. 2024 - 31 mars 2024", (date(2024, 1, 1), date(2024, 3, 31))),
        ("du 1er février 2024 au 29 févr. 2024", (date(2024, 2, 1), date(2024, 2, 29))),
        ("1 août 2024 – 31 déc. 2024", (date(2024, 8, 1), date(2024, 12, 31))),
        ("2024-05-17", (date(2024, 5, 17), date(2024, 5, 17))),
        ("Last 3 months", None),
        ("3 derniers mois", None),
        ("Last 28 days", None),
        ("Compare: 2024-01-01 - 2024-01-31 vs 2023-01-01 - 2023-01-31", None),
        ("2024-03-31 - 2024-01-01", None),
        ("2024-02-30 - 2024-03-31", (date(2024, 3, 31), date(2024, 3, 31))),
        ("Foo 1, 2024 - Bar 2, 2024", None),
        ("", None),
        (None, None),
        (45356, None),
    ],
)
def test_parse_period(text, expected):
    assert parse_period(text) == expected
