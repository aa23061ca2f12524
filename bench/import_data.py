"""The import benchmark's files: a Search Console-like export, and the same rows parsed for the COPY ceiling."""

from __future__ import annotations

import datetime
import random
from contextlib import nullcontext
from pathlib import Path

DAYS = 30
FIRST_DAY = datetime.date(2026, 10, 1)
HOST = "shop.example"
PREFIX = f"https://{HOST}/"

HEADER = "Page,Clicks,Impressions,CTR,Position,Date\n"
# What the ceiling COPYs: the rows as import_csv leaves them in imports_urlmetric.
COPY_COLUMNS = ("site_target_id", "url", "url_normalized", "period_start", "period_end",
                "clicks", "impressions", "ctr", "position", "import_id")


def page_urls(count: int, rng: random.Random) -> list[str]:
    """``count`` distinct URLs under PREFIX, shaped like a shop's Search Console pages."""
    sections = ["products", "category", "blog", "guides", "fr/produits", "de/produkte"]
    words = ["blue", "linen", "shirt", "oak", "table", "lamp", "garden", "chair", "wool", "coat",
             "summer", "sale", "kids", "leather", "bag", "ceramic", "mug", "desk", "sofa", "rug"]
    urls = []
    for n in range(count):
        slug = "-".join(rng.sample(words, rng.randint(2, 4)))
        url = f"{PREFIX}{rng.choice(sections)}/{slug}-{n}"
        kind = rng.random()
        if kind < 0.05:
            url += f"?page={rng.randint(2, 9)}"  # paginated listings
        elif kind < 0.08:
            url = f"{PREFIX}fr/caf%C3%A9-cr%C3%A8me-{n}"  # percent-encoded, as Search Console writes them
        elif kind < 0.09:
            url = f"{PREFIX}fr/caf%c3%a9-{n}"  # lowercase escapes: normalized to uppercase
        elif kind < 0.25:
            url += "/"
        urls.append(url)
    return urls


def generate(directory: Path, rows: int, *, target_id: int, import_id: int, ceiling: bool, seed: int = 1):
    """Write the export (and, with ``ceiling``, the same rows parsed, for COPY); returns facts about it.

    ``rows / DAYS`` URLs, each once a day for DAYS days, day after day, each day in
    its own order: a URL comes back only after every other URL has been seen.
    """
    from imports.formats.values import parse_ctr
    from imports.urlnorm import normalize_url

    rng = random.Random(seed)
    urls = page_urls(-(-rows // DAYS), rng)
    normalized = [normalize_url(url) for url in urls]
    export = directory / f"export-{rows}.csv"
    parsed = directory / f"parsed-{rows}.csv" if ceiling else None
    written = 0
    with export.open("w", encoding="utf-8", newline="") as out, \
            (parsed.open("w", encoding="utf-8", newline="") if parsed else nullcontext()) as parsed_out:
        out.write(HEADER)
        order = list(range(len(urls)))
        for day in range(DAYS):
            when = (FIRST_DAY + datetime.timedelta(days=day)).isoformat()
            rng.shuffle(order)
            for index in order[: rows - written]:
                impressions = int(rng.lognormvariate(3, 1.5)) + 1
                clicks = min(impressions, int(impressions * rng.random() * 0.1))
                ctr = f"{clicks / impressions * 100:.2f}%"
                position = f"{rng.uniform(1, 60):.1f}"
                out.write(f"{urls[index]},{clicks},{impressions},{ctr},{position},{when}\n")
                if parsed_out:
                    parsed_out.write(f"{target_id},{urls[index]},{normalized[index]},{when},{when},"
                               f"{clicks},{impressions},{parse_ctr(ctr)!r},{position},{import_id}\n")
            written += min(len(order), rows - written)
            if written >= rows:
                break
    return {"path": export, "parsed": parsed, "urls": len(urls), "bytes": export.stat().st_size}
