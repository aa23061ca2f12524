"""bench/portfolio.py's code path at a tiny size, in the test database: it fills, times and reports without rotting.

The benchmark itself (4.8 M rows, minutes) is ``make bench-portfolio``; here 3 sites of 2 pages over 400 days.
"""

import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from bench import portfolio as bench
from imports.models import UrlMetric

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]
ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmark_fills_times_each_view_and_names_its_statements(settings):
    data = bench.build(sites=3, pages=2, days=400, last=date(2026, 5, 31))
    # 2 sites with data (the last has none) and the rival's, each 2 pages x 400 days.
    assert data["rows"] == UrlMetric.objects.count() == 3 * 2 * 400

    results = bench.measure(data["user"], runs=1)

    assert [label for label, _ in bench.VIEWS] == list(results)
    for result in results.values():
        assert result["sites"] == 3  # the org's three, never the rival's
        assert {"portfolio.FIGURES", "portfolio.NEWEST_DAY", bench.OTHER} <= set(result["statements"])
    text = bench.report(results, type("Args", (), {"sites": 3, "pages": 2, "days": 400, "runs": 1})(), "PostgreSQL",
                        data, (0.0, 0.0))
    assert "portfolio.FIGURES" in text and "median < 300 ms" in text
    # Daily rows ending on ``last``; the last site has none.
    days = UrlMetric.objects.filter(site_target__site__domain="client-000.example").values("period_start")
    assert (min(r["period_start"] for r in days), max(r["period_start"] for r in days)) == (date(2025, 4, 27),
                                                                                          date(2026, 5, 31))
    assert not UrlMetric.objects.filter(site_target__site__domain="client-002.example").exists()


def test_the_benchmark_starts_and_checks_its_arguments():
    result = subprocess.run([sys.executable, "-m", "bench.portfolio", "--days", "10"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--days at least 400" in result.stderr
