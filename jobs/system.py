"""The system org: the owner of jobs that serve every org at once (the outbox's senders).

Such a job's report and error may speak of several orgs' documents, so it is
filed under no real org: ``SYSTEM_ORG`` is not a valid ``Org`` id (an id is
lowercase letters, digits, ``-`` and ``_``), so no membership and no API token
reaches it. The org-scoped admin shows its jobs to superusers only, and
``GET /jobs/<id>`` answers 404 to every token.
"""

SYSTEM_ORG = "~system"
