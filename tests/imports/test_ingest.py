"""ingest.prepare's remembered URLs and ingest.upsert's staging table, against the plain functions."""

from datetime import date

import pytest
from django.db import connection, transaction

from imports import conflicts, ingest
from imports.formats import ParsedRow, RowError, open_source
from imports.formats.values import parse_date
from imports.models import UrlMetric
from imports.urlnorm import InvalidUrl, host_of, in_scope, normalize_url
from tests.factories import SiteTargetFactory
from tests.imports.files import write_csv

PREFIX = "https://shop.example/"
DAY = date(2026, 11, 1)

URLS = [
    "https://shop.example/a",
    "https://SHOP.example:443/b#top",  # normalized to another string
    "https://shop.example/caf%c3%a9",
    "https://shop.example/a/",
    "https://elsewhere.example/c",  # outside the target
    "mailto:someone@shop.example",  # not a page URL
    "https://user@shop.example/x",  # rejected, not rewritten
    "shop.example/d",
]


def reference(urls, scope):
    """What prepare must find, from normalize_url and in_scope called afresh for every row."""
    records, errors, skipped = {}, [], 0
    for number, url in enumerate(urls, start=1):
        try:
            normalized = normalize_url(url)
        except InvalidUrl as exc:
            errors.append({"row": number, "reason": f"URL {url!r}: {exc}"})
            continue
        if not in_scope(normalized, url_prefix=scope.url_prefix):
            skipped += 1
            continue
        records[(normalized, DAY, DAY)] = (url, normalized, DAY, DAY, 1, 10, 0.1, 2.5, 10.0, 1)
    return records, errors, skipped


def rows(urls):
    return [ParsedRow(number, url, DAY, 1, 10, 0.1, 2.5) for number, url in enumerate(urls, start=1)]


def test_remembered_urls_give_what_the_plain_functions_give():
    scope = ingest.Scope(url_prefix=PREFIX)
    expected_records, expected_errors, expected_skipped = reference(URLS, scope)
    for _ in range(3):  # the first batch fills the memory, the others read it
        counts = ingest.Counts()
        assert ingest.prepare(rows(URLS), scope, counts) == expected_records
        assert counts.error_samples == expected_errors
        assert (counts.read, counts.skipped) == (len(URLS), expected_skipped)
    # Invalid URLs are not remembered; the others are, outside ones by their host.
    invalid = {"mailto:someone@shop.example", "https://user@shop.example/x"}
    assert scope.located == {url: normalize_url(url) if in_scope(normalize_url(url), url_prefix=PREFIX)
                             else ingest.Outside(host_of(normalize_url(url)))
                             for url in URLS if url not in invalid}


def test_remembered_urls_are_bounded(monkeypatch):
    monkeypatch.setattr(ingest, "LOCATED_URLS", 3)
    urls = [f"{PREFIX}p{n}" for n in range(10)] + ["https://elsewhere.example/"] + [f"{PREFIX}p{n}" for n in range(10)]
    scope = ingest.Scope(url_prefix=PREFIX)
    for row in rows(urls):
        counts = ingest.Counts()
        records = ingest.prepare([row], scope, counts)
        assert len(scope.located) <= 3
        assert records == reference([row.url], scope)[0]


def test_an_unchanged_url_is_kept_once():
    scope = ingest.Scope(url_prefix=PREFIX)
    url = "https://shop.example/already/normal"
    ingest.prepare(rows([url]), scope, ingest.Counts())
    assert scope.located[url] is next(iter(scope.located))


def test_a_malformed_prefix_fails_the_import_instead_of_counting_rows():
    with pytest.raises(InvalidUrl):
        ingest.prepare(rows(["https://shop.example/a"]), ingest.Scope(url_prefix="mailto:x"), ingest.Counts())


def test_row_errors_and_dates_pass_through():
    counts = ingest.Counts()
    records = ingest.prepare([RowError(1, "row could not be read"), ParsedRow(2, PREFIX, None, 1, 2, 0.5, 1.0)],
                             ingest.Scope(url_prefix=PREFIX, period=(DAY, date(2026, 11, 30))), counts)
    assert list(records) == [(PREFIX, DAY, date(2026, 11, 30))]
    assert counts.error_samples == [{"row": 1, "reason": "row could not be read"}]


def test_repeated_dates_parse_as_each_alone(tmp_path):
    days = ["2026-11-01", "01/11/2026", "2026-11-01", "31/02/2026", "2026-11-02", "31/02/2026", "2026-11-01"]
    path = write_csv(tmp_path, "days.csv", [["Page", "Date"], *[[f"{PREFIX}{n}", day] for n, day in enumerate(days)]])
    parsed = list(open_source(path, "days.csv").rows())
    for row, day in zip(parsed, days, strict=True):
        if day == "31/02/2026":  # errors are not remembered: each bad row says so
            assert isinstance(row, RowError) and "no such day" in row.reason
        else:
            assert row.date == parse_date(day)


# -- upsert: the staging table ---------------------------------------------------------------

def metric_rows(target):
    return sorted(UrlMetric.objects.filter(site_target=target).values_list("url", "url_normalized", "clicks"))


@pytest.mark.django_db
def test_several_batches_in_one_transaction():
    """A transaction may write several batches (the staging table is dropped after each)."""
    target = SiteTargetFactory(url_prefix=PREFIX)
    scope = ingest.Scope(url_prefix=PREFIX)
    def batch(*paths):
        return ingest.upsert(target.pk, None, ingest.prepare(rows([PREFIX + p for p in paths]), scope, ingest.Counts()))

    with transaction.atomic():
        first, second = batch("a", "b"), batch("b", "c")
    assert (first, second) == ((2, 0, 0), (1, 1, 0))
    assert UrlMetric.objects.filter(site_target=target).count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_batch_outside_a_transaction_commits_on_its_own():
    target = SiteTargetFactory(url_prefix=PREFIX)
    assert connection.get_autocommit()
    records = ingest.prepare(rows([f"{PREFIX}a"]), ingest.Scope(url_prefix=PREFIX), ingest.Counts())
    assert ingest.upsert(target.pk, None, records) == (1, 0, 0)
    assert ingest.upsert(target.pk, None, records) == (0, 1, 0)  # the staging table went with its transaction


@pytest.mark.django_db
def test_any_text_survives_the_copy():
    """Tabs, newlines, backslashes and \\N (COPY's text format escapes them) come back as sent."""
    target = SiteTargetFactory(url_prefix=PREFIX)
    urls = [f"{PREFIX}tab\there", f"{PREFIX}line\nbreak", f"{PREFIX}back\\slash", f"{PREFIX}\\N", f"{PREFIX}caf\u00e9"]
    records = ingest.prepare(rows(urls), ingest.Scope(url_prefix=PREFIX), ingest.Counts())
    assert ingest.upsert(target.pk, None, records) == (5, 0, 0)
    assert metric_rows(target) == sorted((url, normalize_url(url), 1) for url in urls)


@pytest.mark.django_db
def test_empty_cells_are_stored_as_null():
    target = SiteTargetFactory(url_prefix=PREFIX)
    records = ingest.prepare([ParsedRow(1, f"{PREFIX}a", DAY, None, None, None, None)],
                             ingest.Scope(url_prefix=PREFIX), ingest.Counts())
    ingest.upsert(target.pk, None, records)
    metric = UrlMetric.objects.get(site_target=target)
    assert (metric.clicks, metric.impressions, metric.ctr, metric.position) == (None, None, None, None)


@pytest.mark.django_db(transaction=True)
def test_a_batch_commits_without_waiting_for_the_disk_and_only_a_batch():
    def synchronous_commit():
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            return cursor.fetchone()[0]

    before = synchronous_commit()
    with ingest.batch_transaction():
        assert synchronous_commit() == "off"
    assert synchronous_commit() == before != "off"


# -- conflicts.retry_conflicts: a transaction PostgreSQL rolled back is run again ------------------------

def raise_in_postgres(sqlstate: str) -> None:
    """Have the server itself fail the statement with this SQLSTATE (as a real deadlock would)."""
    with connection.cursor() as cursor:
        cursor.execute(f"DO $$ BEGIN RAISE EXCEPTION 'raised on purpose' USING ERRCODE = '{sqlstate}'; END $$")


@pytest.fixture
def pauses(monkeypatch):
    slept = []
    monkeypatch.setattr(conflicts, "sleep", slept.append)
    return slept


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sqlstate, reason", [("40P01", "deadlock"), ("40001", "serialization failure")])
def test_a_batch_rolled_back_by_a_conflict_is_run_again_from_the_same_counts(pauses, sqlstate, reason, caplog):
    target = SiteTargetFactory(url_prefix=PREFIX)
    counts, tries = ingest.Counts(), []

    def work():
        tries.append(1)
        # One row outside the target: its reason is counted in a dict, which each rollback must put back too.
        ingest.write(target.pk, None, ingest.prepare(rows([f"{PREFIX}a", f"{PREFIX}b", "https://elsewhere.example/"]),
                                                     ingest.Scope(url_prefix=PREFIX), counts), counts, ingest.Scope())
        if len(tries) < 3:
            raise_in_postgres(sqlstate)  # after the rows: they go with the rollback
        return "written"

    assert ingest.write_batch(work, counts, job_id="j1", what="rows 1 to 2") == "written"
    assert len(tries) == 3 and len(pauses) == 2
    assert (counts.read, counts.inserted, counts.updated) == (3, 2, 0)  # not 9 read, 2 inserted, 4 updated
    assert (counts.skipped, counts.skipped_reasons) == (1, {"outside the site target": 1})
    assert UrlMetric.objects.filter(site_target=target).count() == 2
    assert f"job=j1 rows 1 to 2 rolled back by a {reason} (try 1/5)" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_a_conflict_that_keeps_coming_back_fails_in_words(pauses):
    def work():
        raise_in_postgres("40P01")

    with pytest.raises(conflicts.WriteConflict) as failure:
        conflicts.retry_conflicts(work, what="rows 1 to 5000")
    assert str(failure.value) == ("could not write rows 1 to 5000: it collided with other imports or map updates of "
                                  "the same site target (deadlock, 5 tries); import the file again")
    assert len(pauses) == conflicts.CONFLICT_TRIES - 1


@pytest.mark.django_db(transaction=True)
def test_other_database_errors_are_not_retried(pauses):
    tries = []

    def work():
        tries.append(1)
        raise_in_postgres("23505")  # unique_violation: running it again would only fail again

    with pytest.raises(Exception, match="raised on purpose"):
        conflicts.retry_conflicts(work, what="rows")
    assert tries == [1] and pauses == []


@pytest.mark.parametrize("attempt, draw, expected", [
    (1, 1.0, 0.1), (1, 0.0, 0.05), (2, 1.0, 0.2), (4, 1.0, 0.8), (6, 1.0, 3.0), (20, 0.0, 1.5),
])
def test_conflict_delay(attempt, draw, expected):
    assert conflicts.conflict_delay(attempt, lambda: draw) == pytest.approx(expected)
