"""The mail benchmark's messages: a reporting inbox's mix, each message with its own Message-ID and content."""

from __future__ import annotations

import datetime
import random
from email.message import EmailMessage
from email.utils import format_datetime

# The message mix, by weight: what a reporting inbox sees from clients and tools.
MIX = {"plain": 45, "alternative": 30, "csv": 12, "pdf": 8, "inline image": 5}
FIRST_DATE = datetime.datetime(2026, 10, 1, 8, 0, tzinfo=datetime.UTC)
WORDS = ("clicks impressions position report weekly monthly traffic organic ranking shop category product "
         "landing page drop growth query brand campaign attached please find below thanks regards").split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(6, 16))).capitalize() + "."


def csv_export(rng: random.Random, n: int) -> bytes:
    rows = ["Page,Clicks,Impressions,CTR,Position,Date"]
    for row in range(rng.randint(20, 300)):
        impressions = rng.randint(1, 5000)
        clicks = rng.randint(0, impressions // 10)
        rows.append(f"https://shop.example/p/{n}-{row},{clicks},{impressions},"
                    f"{clicks / impressions * 100:.2f}%,{rng.uniform(1, 60):.1f},2026-10-{rng.randint(1, 30):02d}")
    return ("\n".join(rows) + "\n").encode()


def generate(count: int, seed: int) -> tuple[list[bytes], dict[str, int]]:
    """``count`` raw messages of the MIX, each with its own Message-ID and content (so files differ too)."""
    from tests.mailpoll.corpus import png, tiny_pdf

    rng = random.Random(seed)
    kinds = rng.choices(list(MIX), weights=list(MIX.values()), k=count)
    logo = png(48, 16, seed=seed)  # a signature logo: the same one in every message that has it
    messages = []
    for n, kind in enumerate(kinds):
        msg = EmailMessage()
        msg["From"] = f"client{rng.randint(1, 40)}@client.example"
        msg["To"] = "seo@agency.example"
        msg["Subject"] = f"{sentence(rng)[:60]} #{n}"
        msg["Date"] = format_datetime(FIRST_DATE + datetime.timedelta(minutes=7 * n))
        msg["Message-ID"] = f"<bench-{seed}-{n}@client.example>"
        text = "\n\n".join(sentence(rng) for _ in range(rng.randint(2, 12)))
        msg.set_content(text)
        if kind in ("alternative", "inline image"):
            html = "".join(f"<p>{line}</p>" for line in text.split("\n\n"))
            if kind == "inline image":
                html += '<p><img src="cid:logo@client.example" alt="Client"></p>'
            msg.add_alternative(f"<html><body>{html}</body></html>", subtype="html")
            if kind == "inline image":
                msg.get_payload()[1].add_related(logo, maintype="image", subtype="png", cid="<logo@client.example>",
                                                 disposition="inline", filename="logo.png")
        elif kind == "csv":
            msg.add_attachment(csv_export(rng, n), maintype="text", subtype="csv", filename=f"export-{n}.csv")
        elif kind == "pdf":
            msg.add_attachment(tiny_pdf(f"Clicks report {seed}-{n}"), maintype="application", subtype="pdf",
                               filename=f"report-{n}.pdf")
        messages.append(msg.as_bytes())
    return messages, {kind: kinds.count(kind) for kind in MIX}
