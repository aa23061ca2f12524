"""seoinsight.query_params: each parser's bounds and plain-words reasons (tables of cases), and ``Params``
over a real QueryDict: a bad or repeated parameter is its default plus a Problem, never an exception."""

from datetime import date

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.http import QueryDict

from seoinsight import query_params
from seoinsight.query_params import BadParameter, Params

TODAY = date(2026, 12, 7)


@pytest.mark.parametrize(("value", "expected"), [
    ("1", 1), ("25", 25), (" 3 ", 3), ("100000", 100_000),
    ("0", None), ("-3", None), ("100001", None), ("99999999999999999999", None), ("9" * 10_000, None),
    ("1e400", None), ("1.0", None), ("1_0", None), ("٣", None), ("x", None), ("", None),
])
def test_whole_number(value, expected):
    if expected is None:
        with pytest.raises(BadParameter, match="^The page number must be a whole number from 1 to 100,000.$"):
            query_params.whole_number(value)
    else:
        assert query_params.whole_number(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("2026-05-01", date(2026, 5, 1)),
    ("2000-01-01", date(2000, 1, 1)),
    ("2026-12-07", TODAY),
    ("2026-12-08", "The date, 2026-12-08, is after 2026-12-07 (today)."),
    ("9999-12-31", "The date, 9999-12-31, is after 2026-12-07 (today)."),
    ("1999-12-31", "The date, 1999-12-31, is before 2000-01-01."),
    ("0001-01-01", "The date, 0001-01-01, is before 2000-01-01."),
    ("2026-02-30", "The date must be a date written YYYY-MM-DD."),
    ("20260501", "The date must be a date written YYYY-MM-DD."),
    ("2026-W18-5", "The date must be a date written YYYY-MM-DD."),
    ("2026-05-01T00:00", "The date must be a date written YYYY-MM-DD."),
    ("٢٠٢٦-٠٥-٠١", "The date must be a date written YYYY-MM-DD."),
    ("9" * 10_000, "The date must be a date written YYYY-MM-DD."),
])
def test_day(value, expected):
    if isinstance(expected, str):
        with pytest.raises(BadParameter) as raised:
            query_params.day(value, latest=TODAY, latest_name="today")
        assert str(raised.value) == expected
    else:
        assert query_params.day(value, latest=TODAY, latest_name="today") == expected


@pytest.mark.parametrize(("first", "last", "expected"), [
    (date(2026, 5, 1), date(2026, 5, 1), 1),
    (date(2026, 1, 1), date(2026, 3, 11), 70),
    (date(2026, 1, 1), date(2026, 3, 12), "The period spans 71 days; it may span 70 at most."),
    (date(2026, 5, 2), date(2026, 5, 1), "The period starts after it ends."),
])
def test_span(first, last, expected):
    if isinstance(expected, str):
        with pytest.raises(BadParameter) as raised:
            query_params.span(first, last, max_days=70)
        assert str(raised.value) == expected
    else:
        assert query_params.span(first, last, max_days=70) == expected


def test_span_reads_its_bound_from_the_setting(settings):
    settings.QUERY_MAX_PERIOD_DAYS = 3
    assert query_params.span(date(2026, 5, 1), date(2026, 5, 3)) == 3
    with pytest.raises(BadParameter, match="spans 4 days; it may span 3 at most"):
        query_params.span(date(2026, 5, 1), date(2026, 5, 4))


@pytest.mark.parametrize(("value", "expected"), [
    ("  red shoes ", "red shoes"),
    ("x" * 2048, "x" * 2048),
    ("x" * 2049, "The search is longer than 2,048 characters."),
    ("a\x00b", "The search holds a control character."),
    ("a\nb", "The search holds a control character."),
    ("a\x7fb", "The search holds a control character."),
])
def test_text(value, expected):
    if expected.startswith("The search"):
        with pytest.raises(BadParameter) as raised:
            query_params.text(value, what="The search")
        assert str(raised.value) == expected
    else:
        assert query_params.text(value, what="The search") == expected


def test_params_give_each_default_and_say_why():
    params = Params(QueryDict("page=99999999999999999999&sort=x&sort=y&format=xml&q=%00&empty=&period=7d"))

    assert params.page() == 1
    assert params.choice("sort", ["clicks"], "clicks", what="The sort") == "clicks"
    assert params.choice("format", ["csv"], None, what="The format", instead="Showing the page.") is None
    assert params.text("q", what="The search") == ""
    assert params.text("empty", what="The nothing") == ""
    assert params.choice("period", ["7d", "28d"], "28d", what="The period") == "7d"
    assert params.raw("missing") is None
    assert [str(problem) for problem in params.problems] == [
        "The page number must be a whole number from 1 to 100,000. Showing page 1.",
        "“sort” is given 2 times in the address. It was ignored.",
        "The format must be one of csv. Showing the page.",
        "The search holds a control character. It was ignored.",
    ]


@pytest.mark.parametrize("value", ["0", "-5"])
def test_a_period_bound_that_is_not_above_zero_stops_the_checks(settings, value):
    settings.QUERY_MAX_PERIOD_DAYS = int(value)
    with pytest.raises(SystemCheckError, match="seoinsight.E004"):
        call_command("check")


def test_a_period_bound_the_environment_cannot_read_stops_the_checks(monkeypatch):
    monkeypatch.setenv("QUERY_MAX_PERIOD_DAYS", "sixteen months")
    with pytest.raises(SystemCheckError, match="seoinsight.E003"):
        call_command("check")
