"""What the mail intake's jobs are for, on the jobs list (``jobs.subjects``): the attachment, from its mailbox."""

from jobs import subjects

from .models import Attachment


def attachment_label(attachment: Attachment) -> str:
    """'example.com · report.csv from mailbox Reports': the site it was routed to, when it was."""
    mailbox = attachment.request.mailbox
    label = f"{attachment.filename} from mailbox {mailbox.name}" if mailbox else attachment.filename
    return f"{attachment.site_target.site} · {label}" if attachment.site_target else label


def register_job_subjects() -> None:
    subjects.register(["process_attachment"], subjects.by_payload_id(
        "attachment_id", Attachment.objects.select_related("request__mailbox", "site_target__site"),
        org_of=lambda attachment: attachment.request.org_id, label=attachment_label))
