"""Outbox and downstream settings, each declared once; read them with ``get(name)`` (see seoinsight.conf)."""

from seoinsight.conf import Declarations, Setting

SETTINGS = Declarations(
    Setting("DOWNSTREAM_URL", str, "",
            "where each accepted document is registered (POST); empty: the outbox is off and nothing is queued"),
    Setting("DOWNSTREAM_TOKEN", str, "",
            "sent as 'Authorization: Bearer <token>' with every try, to DOWNSTREAM_URL only; empty: no header"),
    Setting("DOWNSTREAM_TIMEOUT", float, 30.0,
            "seconds to connect to the downstream, and seconds of silence while it answers, before the try fails"),
    Setting("OUTBOX_CAPACITY", int, 200,
            "documents held for the downstream at which mail intake stops fetching (resumes once it drains)"),
    Setting("OUTBOX_LEASE_SECONDS", float, 300.0,
            "seconds a sender's claim on a document is honoured; then another sender may take it"),
    Setting("OUTBOX_RETRY_BASE_SECONDS", float, 10.0, "delay after a document's first failed try (doubles per try)"),
    Setting("OUTBOX_RETRY_MAX_SECONDS", float, 3600.0, "the longest delay between two tries of one document"),
    Setting("OUTBOX_SENDERS", int, 2, "deliver_outbox jobs that may send at once (each holds a worker meanwhile)"),
    Setting("OUTBOX_SENDER_SECONDS", float, 30.0,
            "how long one deliver_outbox job keeps claiming documents and waiting for retries due soon before "
            "it ends (0: one try); what is left goes to the next sender"),
    Setting("OUTBOX_WATCH_SECONDS", float, 5.0,
            "how often each runjobs worker looks for due documents (or expired claims) that no sender is "
            "queued or running for, and wakes one"),
    Setting("OUTBOX_OVERDUE_SECONDS", float, 180.0,
            "seconds a document may stay due without a sender taking it before /health/ready and /metrics "
            "report it overdue"),
)

get = SETTINGS.get

# The numbers that must be above zero (OUTBOX_SENDER_SECONDS may be 0: send what is due, then end).
POSITIVE = ("DOWNSTREAM_TIMEOUT", "OUTBOX_CAPACITY", "OUTBOX_LEASE_SECONDS", "OUTBOX_RETRY_BASE_SECONDS",
            "OUTBOX_RETRY_MAX_SECONDS", "OUTBOX_SENDERS", "OUTBOX_WATCH_SECONDS", "OUTBOX_OVERDUE_SECONDS")
