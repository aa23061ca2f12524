"""/imports/sites/: every site of the org on one page, each figure against SUM() over the raw metric rows.

The data: a site with two targets, a site without data, a site whose rows overlap (daily rows and a
7-day export of the same page, which the daily rows shadow, beside a 7-day export of a page without
daily rows, which counts), and another org's site that is never listed. Expected figures are summed
here from the UrlMetric rows with the rule "each day of a page counts once".
"""

import csv
import io
import re
from datetime import date, timedelta

import pytest
from django.utils import timezone

from imports.models import UrlMetric
from insight.models import Alert, AlertKind, Annotation
from insight.portfolio import ordering
from seoinsight import periods
from seoinsight.models import Site
from seoinsight.periods import Period
from tests.factories import ImportFactory, OrgFactory, SiteFactory, SiteTargetFactory, UserFactory
from tests.insight.test_site_page import UrlMetricFactory
from tests.mailpoll.factories import MailboxFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

PATH = "/imports/sites/"
WEEK = Period(date(2026, 5, 8), date(2026, 5, 14))
ASKED = {"period": "custom", "from": "2026-05-08", "to": "2026-05-14"}


def d(n: int, month: int = 5, year: int = 2026) -> date:
    return date(year, month, n)


def counted(rows: list[UrlMetric]) -> list[UrlMetric]:
    """The rows that count: daily ones, and those covering several days none of which has a daily row of their page."""
    daily = {(m.site_target_id, m.url_normalized, m.period_start) for m in rows if m.period_start == m.period_end}
    return [m for m in rows if m.period_start == m.period_end or not any(
        (m.site_target_id, m.url_normalized, m.period_start + timedelta(days=n)) in daily
        for n in range((m.period_end - m.period_start).days + 1))]


def raw(site, period: Period) -> dict:
    """The site's figures in ``period`` from its metric rows: SUM() as the page must give it."""
    everything = list(UrlMetric.objects.filter(site_target__site=site))
    rows = [m for m in counted(everything) if m.period_start >= period.start and m.period_end <= period.end]
    if not rows:
        return {"clicks": None, "impressions": None, "ctr": None, "position": None, "days": {}}
    with_both = [m for m in rows if m.clicks is not None and m.impressions is not None]
    weighted = [(m.position, m.position_weight if m.position_weight is not None else (m.impressions or 1))
                for m in rows if m.position is not None]
    days = {}
    for m in rows:
        if m.period_start == m.period_end:
            days[m.period_start] = days.get(m.period_start, 0) + m.clicks
    return {"clicks": sum(m.clicks for m in rows if m.clicks is not None),
            "impressions": sum(m.impressions for m in rows if m.impressions is not None),
            "ctr": sum(m.clicks for m in with_both) / sum(m.impressions for m in with_both),
            "position": sum(p * w for p, w in weighted) / sum(w for _, w in weighted),
            "days": days}


@pytest.fixture
def portfolio(target):
    """acme.example (two targets), empty.example (no data), overlap.example (daily rows and 7-day exports),
    and rival.example of another org."""
    two = target.site
    french = SiteTargetFactory(site=two, url_prefix="https://acme.example/fr/")
    for n, (en, fr) in enumerate([(40, 9), (38, 11), (44, 7), (41, 12), (39, 10), (20, 8), (22, 6)]):
        UrlMetricFactory(site_target=target, url="https://acme.example/a", period_start=d(1 + n), clicks=en,
                         impressions=400 + n, position=3.0 + n / 10)
        UrlMetricFactory(site_target=french, url="https://acme.example/fr/b", period_start=d(1 + n), clicks=fr,
                         impressions=90, position=8.0)
    for n, (en, fr) in enumerate([(30, 9), (28, 12), (15, 7), (16, 12), (25, 10), (12, 8), (9, 3)]):
        if n == 3:
            continue  # a day without data: the sparkline breaks there
        UrlMetricFactory(site_target=target, url="https://acme.example/a", period_start=d(8 + n), clicks=en,
                         impressions=380, position=4.5)
        UrlMetricFactory(site_target=french, url="https://acme.example/fr/b", period_start=d(8 + n), clicks=fr,
                         impressions=120 + n, position=7.0, position_weight=None)
    # A year before, 52 weeks back: 2025-05-09 … 2025-05-15.
    for n in range(7):
        UrlMetricFactory(site_target=target, url="https://acme.example/a", period_start=d(9 + n, year=2025),
                         clicks=60 + n, impressions=700, position=2.5)

    empty = SiteFactory(org=two.org, domain="empty.example")
    SiteTargetFactory(site=empty, url_prefix="https://empty.example/")

    overlap = SiteFactory(org=two.org, domain="overlap.example")
    o = SiteTargetFactory(site=overlap, url_prefix="https://overlap.example/")
    export = ImportFactory(site_target=o, filename="Pages-7-days.csv", period=(d(8), d(14)), done=True)
    for n in range(7):
        UrlMetricFactory(site_target=o, url="https://overlap.example/x", period_start=d(1 + n), clicks=5,
                         impressions=50)
        UrlMetricFactory(site_target=o, url="https://overlap.example/x", period_start=d(8 + n), clicks=7 + n,
                         impressions=60, position=2.0)
    # The same page's week as one export row: its days have daily rows, so it is not counted (no doubling) …
    UrlMetricFactory(site_target=o, url="https://overlap.example/x", period_start=d(8), period_end=d(14),
                     clicks=70, impressions=420, position=2.0, source_import=export)
    # … while a page that has only the export's row counts, in the figures but not as a day.
    UrlMetricFactory(site_target=o, url="https://overlap.example/y", period_start=d(8), period_end=d(14),
                     clicks=33, impressions=300, position=6.0, source_import=export)

    rival = SiteFactory(org=OrgFactory(id="rival"), domain="rival.example")
    UrlMetricFactory(site_target=SiteTargetFactory(site=rival), url="https://rival.example/a", period_start=d(10),
                     clicks=999)
    return {"two": two, "empty": empty, "overlap": overlap, "rival": rival}


def rows_of(response) -> dict:
    return {r["row"].domain: r for r in response.context["rows"]}


def get(client, **params):
    response = client.get(PATH, params)
    assert response.status_code == 200, response.content[:500]
    return response


# --- figures ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("compare", ["previous", "year"])
def test_every_figure_of_every_row_is_the_sum_of_its_raw_rows(client, member, portfolio, compare):
    response = get(client, **ASKED, compare=compare)

    choice = response.context["choice"]
    compared = WEEK.previous() if compare == "previous" else WEEK.year_before()
    assert (choice.current, choice.previous) == (WEEK, compared)
    shown = rows_of(response)
    assert sorted(shown) == ["acme.example", "empty.example", "overlap.example"]  # never rival.example
    for name in ("two", "empty", "overlap"):
        site = portfolio[name]
        row = shown[site.domain]["row"]
        now, before = raw(site, WEEK), raw(site, compared)
        for figure in ("clicks", "impressions"):
            assert getattr(row.current, figure) == now[figure], (site.domain, figure)
            assert getattr(row.previous, figure) == before[figure], (site.domain, figure)
        for figure in ("ctr", "position"):
            assert getattr(row.current, figure) == pytest.approx(now[figure]), (site.domain, figure)
            assert getattr(row.previous, figure) == pytest.approx(before[figure]), (site.domain, figure)
        assert row.days == now["days"], site.domain
        newest = max((m.period_end for m in UrlMetric.objects.filter(site_target__site=site)), default=None)
        assert row.newest == newest
    # The overlapping week counts the daily rows and the page without them, never the shadowed export row.
    assert shown["overlap.example"]["row"].current.clicks == sum(range(7, 14)) + 33
    assert shown["acme.example"]["row"].current.clicks == 30 + 28 + 15 + 25 + 12 + 9 + 9 + 12 + 7 + 10 + 8 + 3


def test_the_cells_say_each_change_as_the_site_page_does(client, member, portfolio):
    acme = rows_of(get(client, **ASKED))["acme.example"]

    before, now = raw(portfolio["two"], WEEK.previous()), raw(portfolio["two"], WEEK)
    assert (now["clicks"], before["clicks"]) == (168, 307)
    assert acme["delta"] == "−139" and acme["delta_tone"] == "worse"
    assert acme["cells"]["clicks"]["change"] == f"−{(307 - 168) / 307 * 100:.1f}%"
    assert acme["cells"]["position"]["tone"] == "worse"  # a higher position number: worse
    assert acme["cells"]["ctr"]["change"].endswith(" pts")


def test_a_site_without_data_is_listed_with_dashes_and_no_data(client, member, portfolio):
    response = get(client, **ASKED)
    empty = rows_of(response)["empty.example"]
    assert [empty["cells"][name]["text"] for name in ("clicks", "impressions", "ctr", "position")] == ["—"] * 4
    assert empty["delta"] == "—"
    html = response.content.decode()
    row = re.search(r'<tr data-site="empty.example">.*?</tr>', html, re.S).group(0)
    assert "no data" in row and "<polyline" not in row


def test_the_sparkline_draws_each_day_with_its_clicks_and_notes_in_its_tooltips(client, member, portfolio):
    Annotation.objects.create(site=portfolio["two"], day=d(10), text="moved to <HTTPS>")
    Annotation.objects.create(site=portfolio["two"], day=d(20), text="after the period")
    html = get(client, **ASKED).content.decode()
    row = re.search(r'<tr data-site="acme.example">.*?</tr>', html, re.S).group(0)

    # Two runs: May 11 has no data, so the line breaks there instead of bridging it.
    assert row.count("<polyline") == 2
    assert "<title>2026-05-08: 39 clicks</title>" in row
    assert "<title>2026-05-10: 22 clicks · note: moved to &lt;HTTPS&gt;</title>" in row
    assert "after the period" not in row
    assert row.count('class="spark-note"') == 1


# --- order, search ---------------------------------------------------------------------------------------

def test_by_default_the_last_28_days_with_the_largest_fall_in_clicks_first(client, member, portfolio):
    newest = UrlMetricFactory(site_target=SiteTargetFactory(site=SiteFactory(org=portfolio["two"].org,
                                                                             domain="new.example")),
                              url="https://new.example/", period_start=d(16), clicks=2)
    UrlMetricFactory(site_target=portfolio["two"].targets.first(), url="https://acme.example/a", period_start=d(10, 4),
                     clicks=500)
    UrlMetricFactory(site_target=portfolio["overlap"].targets.first(), url="https://overlap.example/x",
                     period_start=d(12, 4), clicks=10)
    response = get(client)
    choice = response.context["choice"]
    assert (choice.preset, choice.compare) == ("28d", "previous")
    assert choice.current == Period(newest.period_start - timedelta(days=27), newest.period_start)
    assert response.context["sort"] == ("clicks_delta", False)
    # The change in clicks of each site against the 28 days before, smallest (largest fall) first; the sites
    # without clicks in the 28 days before have no change, and come last, by domain.
    order = [r["row"].domain for r in response.context["rows"]]
    deltas = {r["row"].domain: ordering.clicks_delta(r["row"]) for r in response.context["rows"]}
    before = choice.previous
    for r in response.context["rows"]:
        site = r["row"]
        now, then = raw(Site.objects.get(pk=site.site_id), choice.current), raw(Site.objects.get(pk=site.site_id),
                                                                                  before)
        assert deltas[site.domain] == (None if then["clicks"] is None else (now["clicks"] or 0) - then["clicks"])
    known = sorted((d, name) for name, d in deltas.items() if d is not None)
    assert order == [name for _, name in known] + sorted(name for name, d in deltas.items() if d is None)
    assert order == ["acme.example", "overlap.example", "empty.example", "new.example"]
    assert (deltas["acme.example"], deltas["overlap.example"]) == (307 + 168 - 500, 35 + 103 - 10)


@pytest.mark.parametrize(("sort", "order"), [
    ("site", ["acme", "empty", "overlap"]),
    ("-site", ["overlap", "empty", "acme"]),
    ("-clicks", ["acme", "overlap", "empty"]),
    ("clicks", ["overlap", "acme", "empty"]),
    ("clicks_delta", ["acme", "overlap", "empty"]),  # −139, then +68 (overlap: 35 → 103)
    ("-clicks_delta", ["overlap", "acme", "empty"]),
    ("clicks_change", ["acme", "overlap", "empty"]),
    ("-impressions", ["acme", "overlap", "empty"]),
    ("impressions_change", ["acme", "overlap", "empty"]),
    ("-ctr", ["overlap", "acme", "empty"]),  # 14.3 % against 5.6 %
    ("ctr_change", ["acme", "overlap", "empty"]),  # −3.3 points, +4.3
    ("position", ["overlap", "acme", "empty"]),
    ("-position_change", ["acme", "overlap", "empty"]),
    ("newest", ["acme", "overlap", "empty"]),
    ("-open", ["overlap", "acme", "empty"]),
])
def test_every_column_sorts(client, member, portfolio, sort, order):
    ImportFactory(site_target=portfolio["overlap"].targets.first(), failed=True)
    response = get(client, **ASKED, sort=sort)
    assert [r["row"].domain.split(".")[0] for r in response.context["rows"]] == order
    assert response.context["sort"] == ordering.parse_sort(sort)


def test_each_header_links_to_its_sort_keeping_the_period_and_comparison(client, member, portfolio):
    response = get(client, **ASKED, compare="year", sort="-clicks")
    links = {column: link for column, _, link in response.context["headers"]}
    assert set(links) == set(ordering.COLUMNS)
    assert "sort=clicks&" in links["clicks"] + "&"  # the current sort's header turns it around
    assert "sort=-impressions" in links["impressions"]
    assert "sort=" not in links["clicks_delta"]  # the default order needs no parameter
    for link in links.values():
        assert "period=custom" in link and "from=2026-05-08" in link and "compare=year" in link


def test_the_search_keeps_the_sites_whose_domain_contains_it(client, member, portfolio):
    response = get(client, **ASKED, q="LAP")
    assert list(rows_of(response)) == ["overlap.example"]
    assert "1 site matching “LAP”" in response.content.decode()
    assert list(rows_of(get(client, **ASKED, q="%"))) == []  # taken literally
    assert "No site's domain contains “%”." in get(client, **ASKED, q="%").content.decode()


# --- what is open ----------------------------------------------------------------------------------------

def test_what_is_open_on_each_site(client, member, portfolio, admin_user):
    two, overlap = portfolio["two"], portfolio["overlap"]
    Alert.objects.create(site=two, kind=AlertKind.CLICKS_DROP, period_start=d(8), period_end=d(14), before=307,
                         after=168)
    Alert.objects.create(site=overlap, kind=AlertKind.STALE_DATA, period_start=d(8), period_end=d(14),
                         acknowledged_at=timezone.now())  # acknowledged: closed
    failed = ImportFactory(site_target=two.targets.order_by("pk").last(), filename="broken.csv", failed=True)
    ImportFactory(site_target=two.targets.first(), done=True)
    ImportFactory(site_target=SiteTargetFactory(site=portfolio["rival"]), failed=True)  # another org's
    # Failing: the mailbox whose fallback target is overlap's; a healthy one names acme's target.
    MailboxFactory(org=two.org, name="reports", site_target=overlap.targets.first(), consecutive_failures=3,
                   last_error="connection refused")
    MailboxFactory(org=two.org, name="fine", site_target=two.targets.first())

    shown = rows_of(get(client, **ASKED))
    acme = shown["acme.example"]["row"]
    assert ([a.kind for a in acme.alerts], acme.failed_imports, acme.failing_mailboxes) == (["clicks_drop"],
                                                                                            [failed], [])
    over = shown["overlap.example"]["row"]
    assert (over.alerts, over.failed_imports, [m.name for m in over.failing_mailboxes]) == ([], [], ["reports"])
    assert shown["empty.example"]["row"].open_count == 0
    html = get(client, **ASKED).content.decode()
    assert f'href="/imports/{failed.pk}/"' in html and "1 failed import<" in html
    assert "mailbox reports failing" in html and "1 alert<" in html


def test_a_mailbox_failing_counts_on_the_sites_its_rules_route_to(client, member, portfolio):
    from mailpoll.models import MailRule

    other = SiteTargetFactory(site=SiteFactory(org=portfolio["two"].org, domain="zz.example"))
    mailbox = MailboxFactory(org=portfolio["two"].org, name="agency", site_target=other, consecutive_failures=1)
    rule = MailRule.objects.create(org=portfolio["two"].org, name="acme reports", action="route",
                                   site_target=portfolio["two"].targets.first())
    rule.mailboxes.add(mailbox)
    MailRule.objects.create(org=portfolio["two"].org, name="off", action="route", enabled=False,
                            site_target=portfolio["empty"].targets.first())
    shown = rows_of(get(client, **ASKED))
    assert [m.name for m in shown["acme.example"]["row"].failing_mailboxes] == ["agency"]
    assert [m.name for m in shown["zz.example"]["row"].failing_mailboxes] == ["agency"]
    assert shown["empty.example"]["row"].failing_mailboxes == []


# --- links -----------------------------------------------------------------------------------------------

def test_each_row_links_to_its_site_page_with_the_same_days_and_comparison(client, member, portfolio):
    for params in (ASKED, {"period": "7d", "compare": "year"}):
        response = get(client, **params)
        choice = response.context["choice"]
        for r in response.context["rows"]:
            if r["row"].current.clicks is None:
                continue
            page = client.get(r["url"])
            assert page.status_code == 200
            assert (page.context["choice"].current, page.context["choice"].previous) == (choice.current,
                                                                                         choice.previous)
            clicks = {t["name"]: t for t in page.context["totals"]}["clicks"]
            assert clicks["current"] == r["cells"]["clicks"]["text"], r["url"]
            assert clicks["previous"] == r["cells"]["clicks"]["before"], r["url"]


def test_the_navigation_links_the_portfolio(client, member, portfolio):
    html = client.get("/imports/").content.decode()
    assert '<a href="/imports/sites/">Sites</a>' in html
    assert '<a href="/imports/sites/" class="current">Sites</a>' in get(client).content.decode()


# --- tenancy ---------------------------------------------------------------------------------------------

def test_anonymous_is_sent_to_the_login_page(client):
    response = client.get(PATH)
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/imports/sites/"


def test_a_user_in_two_orgs_sees_the_sites_of_the_org_chosen_only(client, portfolio):
    user = UserFactory(username="both", org=portfolio["two"].org)
    user.memberships.create(org=portfolio["rival"].org)
    client.force_login(user)

    assert client.post("/org/", {"org": "rival", "next": PATH}).status_code == 302
    response = get(client, **ASKED)
    assert list(rows_of(response)) == ["rival.example"]
    assert rows_of(response)["rival.example"]["row"].current.clicks == 999
    assert "acme.example" not in get(client, **ASKED, format="csv").content.decode()

    assert client.post("/org/", {"org": portfolio["two"].org_id, "next": PATH}).status_code == 302
    assert sorted(rows_of(get(client, **ASKED))) == ["acme.example", "empty.example", "overlap.example"]
    assert "rival.example" not in get(client, **ASKED, format="csv").content.decode()


# --- parameters ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("params", "reason"), [
    ({"period": "fortnight"}, "The period must be one of 28d, 7d, 90d, custom, month. Showing the last 28 days."),
    ({"compare": "decade"}, "The comparison must be one of previous, year. Compared with the previous period."),
    ({"sort": "domain; DROP TABLE"}, "The sort is not one this page offers. Sorted by the largest fall in clicks "
                                     "first."),
    ({"format": "xlsx"}, "The format must be one of csv. Showing the page."),
    ({"q": "a" * 300}, "The search is longer than 253 characters. It was ignored."),
    ({"period": "custom", "from": "2026-05-14", "to": "2026-05-08"},
     "The custom period starts after it ends. Showing the last 28 days instead."),
])
def test_a_bad_parameter_shows_the_default_and_says_why(client, member, portfolio, params, reason):
    response = get(client, **params)
    assert [str(p) for p in response.context["problems"]] == [reason]
    default = periods.choose(None, today=timezone.localdate(), newest=response.context["newest"])
    if "period" in params:
        assert response.context["choice"].current == default.current
    assert reason.split(". ")[0] in response.content.decode()
    assert len(response.context["rows"]) == 3


@pytest.mark.parametrize("params", [{"compare": "decade"}, {"sort": "nope"}, {"period": "fortnight"},
                                    {"period": "custom", "from": "2026-02-30", "to": "2026-05-08"}])
def test_a_csv_asked_with_a_bad_parameter_is_a_plain_400(client, member, portfolio, params):
    response = client.get(PATH, {**params, "format": "csv"})
    assert response.status_code == 400
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert "nothing was exported" in response.content.decode()


# --- CSV ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("compare", ["previous", "year"])
def test_the_csv_is_one_table_of_numbers_that_a_spreadsheet_reads(client, member, portfolio, compare):
    Annotation.objects.create(site=portfolio["two"], day=d(9), text="=moved to HTTPS")
    Annotation.objects.create(site=portfolio["two"], day=d(12), text="menu café")
    response = client.get(PATH, {**ASKED, "compare": compare, "format": "csv", "sort": "site"})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response.content.startswith(b"\xef\xbb\xbf")  # UTF-8's byte order mark: Excel reads it as UTF-8
    body = response.content.decode("utf-8-sig")
    assert "\u2212" not in body and "pts" not in body

    table = list(csv.DictReader(io.StringIO(body)))
    assert [row["site"] for row in table] == ["acme.example", "empty.example", "overlap.example"]
    compared = WEEK.previous() if compare == "previous" else WEEK.year_before()
    for row, name in zip(table, ("two", "empty", "overlap"), strict=True):
        now, before = raw(portfolio[name], WEEK), raw(portfolio[name], compared)
        assert (row["start"], row["end"]) == ("2026-05-08", "2026-05-14")
        assert (row["compared_start"], row["compared_end"]) == (str(compared.start), str(compared.end))
        for header, value in (("clicks", now["clicks"]), ("compared_clicks", before["clicks"]),
                              ("impressions", now["impressions"]), ("compared_impressions", before["impressions"])):
            assert row[header] == ("" if value is None else str(value)), (name, header)
        if now["clicks"] is not None:
            assert float(row["ctr_percent"]) == pytest.approx(round(now["ctr"] * 100, 2))
            assert float(row["position"]) == pytest.approx(round(now["position"], 1))
            if before["clicks"] is not None:
                assert int(row["clicks_change"]) == now["clicks"] - before["clicks"]
                assert float(row["clicks_change_percent"]) == pytest.approx(
                    round((now["clicks"] - before["clicks"]) / before["clicks"] * 100, 1))
                assert float(row["ctr_change_points"]) == pytest.approx(
                    round((now["ctr"] - before["ctr"]) * 100, 2))
    acme = table[0]
    assert acme["annotations"] == "2026-05-09: =moved to HTTPS; 2026-05-12: menu café"
    assert acme["newest_day"] == "2026-05-14"
    assert acme["site_page"].startswith(f"http://testserver/imports/sites/{portfolio['two'].pk}/?period=custom")
    assert table[1]["clicks"] == "" and table[1]["newest_day"] == ""
