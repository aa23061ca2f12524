"""A write cut short never leaves a file that is trusted: full disk, a killed writer, a damaged file.

Stored files are named by their content's hash. A partial file under that name
used to be reused by every later message with the same content; now a file
gets its name only once complete, a file found under a name is reused only when
its size and hash match, and processing checks the hash again.
"""

import hashlib
import os
import signal
import textwrap
import time
from pathlib import Path

import pytest

from mailpoll.sync import watchdog
from mailpoll.models import Attachment, AttachmentStatus, FolderCursor, Request
from mailpoll.sync.store import store_message
from seoinsight import storage
from tests.mailpoll.corpus import tiny_pdf
from tests.mailpoll.factories import MailboxFactory, mail, poll_now
from tests.support.processes import ManagedProcess, process_env, run_burst, wait_for
from tests.support.tmpfs import media_tmpfs  # noqa: F401  (fixture)


def csv_of(size: int) -> bytes:
    """A valid export of about ``size`` bytes, rows inside the factory mailbox's target."""
    rows, total = [b"Page,Clicks,Impressions,CTR,Position,Date"], 0
    while total < size:
        rows.append(b"https://shop.example/p%d,3,30,10%%,2.5,2026-11-01" % len(rows))
        total += len(rows[-1]) + 1
    return b"\n".join(rows) + b"\n"


def content_path(media: Path, content: bytes) -> Path:
    digest = hashlib.sha256(content).hexdigest()
    return Path(media) / "mail" / digest[:2] / digest


@pytest.mark.django_db
def test_a_truncated_file_under_the_content_name_is_rewritten_not_reused(media):
    """What an old full disk or kill left behind: the next message with that content repairs it."""
    pdf = tiny_pdf("Clicks doubled")
    path = content_path(media, pdf)
    path.parent.mkdir(parents=True)
    path.write_bytes(pdf[:40])

    store_message(MailboxFactory(), "INBOX", 1, mail(attachments=[("r.pdf", pdf, "application/pdf")]))

    assert path.read_bytes() == pdf
    run_burst()
    attachment = Attachment.objects.get(document_type="pdf")
    assert attachment.status == AttachmentStatus.DONE and "Clicks doubled" in attachment.extracted_text


@pytest.mark.django_db
def test_processing_refuses_a_file_that_is_not_the_stored_bytes(media):
    """A file damaged after it was stored fails with that reason, not as an empty or unreadable PDF."""
    pdf = tiny_pdf()
    store_message(MailboxFactory(), "INBOX", 1, mail(attachments=[("r.pdf", pdf, "application/pdf")]))
    content_path(media, pdf).write_bytes(b"")  # as a 0-byte file from a full disk looked

    run_burst()

    attachment = Attachment.objects.get(document_type="pdf")
    assert attachment.status == AttachmentStatus.FAILED
    assert "damaged" in attachment.error and f"0 bytes instead of {len(pdf):,}" in attachment.error
    assert "PDF" not in attachment.error.split("damaged")[0]  # not "the PDF cannot be read"


@pytest.mark.django_db
def test_the_hash_is_checked_not_only_the_size(media):
    csv = csv_of(2000)
    store_message(MailboxFactory(), "INBOX", 1, mail(attachments=[("pages.csv", csv, "text/csv")]))
    content_path(media, csv).write_bytes(csv.replace(b"shop.example/p1,", b"shop.example/p9,"))

    run_burst()

    attachment = Attachment.objects.get(document_type="csv")
    assert attachment.status == AttachmentStatus.FAILED and "SHA-256" in attachment.error
    assert attachment.source_import_id is None


def test_a_writer_killed_by_sigkill_mid_file_leaves_nothing_under_the_final_name(transactional_db, media,
                                                                                 monkeypatch):
    """kill -9 between two chunks of a file: the content name stays absent, the next store writes it whole."""
    csv = csv_of(300_000)
    target, marker = content_path(media, csv), Path(media) / "half-written"
    code = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from seoinsight import storage

        def chunks():
            data = Path({str(Path(media) / 'source')!r}).read_bytes()
            yield data[:131072]
            Path({str(marker)!r}).write_text("half")
            time.sleep(120)
            yield data[131072:]

        storage.write_atomic(Path({str(target)!r}), chunks())
    """)
    Path(media).mkdir(parents=True, exist_ok=True)
    (Path(media) / "source").write_bytes(csv)
    writer = ManagedProcess("shell", "-c", code, env=process_env(MEDIA_ROOT=str(media)))
    try:
        wait_for(lambda: marker.exists() or not writer.alive(), message="the writer's first chunk")
        assert writer.alive(), writer.output()
        writer.kill9()
    finally:
        if writer.alive():
            writer.kill9()

    assert not target.exists()
    partial = [p for p in target.parent.iterdir() if p.name.startswith(storage.TEMP_PREFIX)]
    assert [p.stat().st_size for p in partial] == [131072]  # the cut-short bytes, under a name no one reads

    mailbox = MailboxFactory()
    store_message(mailbox, "INBOX", 1, mail(attachments=[("pages.csv", csv, "text/csv")]))
    assert target.read_bytes() == csv
    run_burst()
    assert Attachment.objects.get(document_type="csv").status == AttachmentStatus.DONE

    # The watchdog deletes what the kill left once it is a day old, never a write that may be in progress.
    (left,) = partial
    os.utime(left, (time.time() - 2 * 86400,) * 2)
    in_progress = left.with_name(storage.TEMP_PREFIX + "in-progress")
    in_progress.write_bytes(b"x")
    monkeypatch.setattr(watchdog, "_next_partial_sweep", 0.0)
    watchdog.run_once()
    assert not left.exists() and in_progress.exists() and target.read_bytes() == csv


def test_a_poller_killed_inside_a_file_write_leaves_no_file_that_a_later_message_reuses(transactional_db, media):
    """The store itself killed by the kernel in the middle of write(2) (file size limit, SIGXFSZ)."""
    mailbox = MailboxFactory()
    csv = csv_of(1_000_000)
    raw = Path(media) / "raw.eml"
    Path(media).mkdir(parents=True, exist_ok=True)
    raw.write_bytes(mail("First", attachments=[("pages.csv", csv, "text/csv")]))
    code = textwrap.dedent(f"""
        import resource, signal
        from pathlib import Path
        from mailpoll.models import Mailbox
        from mailpoll.sync.store import store_message

        raw = Path({str(raw)!r}).read_bytes()
        mailbox = Mailbox.objects.get(pk={mailbox.pk})
        # Python ignores SIGXFSZ; restored, the kernel kills the process inside the write that crosses the limit.
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_FSIZE, (262144, 262144))
        store_message(mailbox, "INBOX", 1, raw)
        print("stored")
    """)
    writer = ManagedProcess("shell", "-c", code, env=process_env(MEDIA_ROOT=str(media)))
    assert writer.wait(timeout=60) == -signal.SIGXFSZ, writer.output()
    assert not Request.objects.exists()  # killed before its transaction
    target = content_path(media, csv)
    assert not target.exists()
    cut_short = [p.stat().st_size for p in target.parent.iterdir() if p.name.startswith(storage.TEMP_PREFIX)]
    assert cut_short == [262144]  # killed inside this file's write, at the limit

    store_message(mailbox, "INBOX", 2, mail("Second", attachments=[("pages.csv", csv, "text/csv")]))
    assert content_path(media, csv).read_bytes() == csv
    run_burst()
    assert Attachment.objects.get(document_type="csv").status == AttachmentStatus.DONE


@pytest.mark.django_db
def test_a_full_disk_stores_nothing_partial_and_the_message_once_there_is_room(dovecot, imap_mailbox, media_tmpfs):  # noqa: F811  (fixture)
    big, small = csv_of(1_500_000), csv_of(3_000)
    disk = media_tmpfs
    mailbox = imap_mailbox()
    dovecot.append_many(mailbox.username, "INBOX", [
        mail("Big export", attachments=[("big.csv", big, "text/csv")]),
        mail("Small export", attachments=[("small.csv", small, "text/csv")]),
    ])

    poll_now(mailbox)
    # The big one is not stored and holds the cursor; the small one fits and is stored.
    assert list(Request.objects.values_list("subject", flat=True)) == ["Small export"]
    assert FolderCursor.objects.get(mailbox=mailbox).last_uid == 0
    assert "out of disk space" in mailbox.last_error
    assert disk.files() == [content_path(disk.path, small)]  # no partial file anywhere

    disk.resize("8m")  # the operator frees space
    poll_now(mailbox)
    assert sorted(Request.objects.values_list("subject", flat=True)) == ["Big export", "Small export"]
    assert FolderCursor.objects.get(mailbox=mailbox).last_uid == 2 and mailbox.consecutive_failures == 0
    assert content_path(disk.path, big).read_bytes() == big

    run_burst()
    assert set(Attachment.objects.values_list("status", flat=True)) == {AttachmentStatus.DONE}
