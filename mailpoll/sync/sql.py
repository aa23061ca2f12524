"""The poller's SQL that decides who does what and what counts as stored, in one place."""

# Claim the due mailboxes and mark them polled, in one committed statement.
# SKIP LOCKED: a mailbox another replica is claiming right now is simply not ours.
# The bump happens before any network I/O, so a replica that dies mid-poll
# leaves the mailbox due again one interval later.
# Due: its poll_interval has passed, and so has the backoff of a failing mailbox
# (next_attempt_at, set by RECORD_POLL_FAILURE). A NULL last_polled_at (never
# polled, or "Poll now" in the admin) is due at once, backoff or not.
# The locking SELECT is a CTE, run once: see outbox.sql.CLAIM for the plan that, as a subquery in FROM,
# ran it once per outer row and claimed past the LIMIT.
# The claim's rules as expressions of a mailbox row, read by the claim and by the admin's "next try" (an
# annotation), so the screen cannot disagree with the machine. An OAuth mailbox is polled only with a live grant:
# one that needs re-authorization (or was never connected) would only fail again, and hammer the token endpoint;
# its last error says why.
POLLABLE = """(mailpoll_mailbox.auth <> 'oauth' OR EXISTS (
    SELECT 1 FROM mailpoll_oauthgrant g WHERE g.mailbox_id = mailpoll_mailbox.id AND g.state = 'active'))"""
DUE_NOW = """(mailpoll_mailbox.last_polled_at IS NULL
    OR (mailpoll_mailbox.last_polled_at < now() - mailpoll_mailbox.poll_interval
        AND (mailpoll_mailbox.next_attempt_at IS NULL OR mailpoll_mailbox.next_attempt_at <= now())))"""
# When DUE_NOW turns true for a polled mailbox: its interval's end, or its backoff's if that is later.
DUE_AT = """GREATEST(mailpoll_mailbox.last_polled_at + mailpoll_mailbox.poll_interval,
    mailpoll_mailbox.next_attempt_at)"""
BACKING_OFF = """COALESCE(mailpoll_mailbox.next_attempt_at
    > mailpoll_mailbox.last_polled_at + mailpoll_mailbox.poll_interval, false)"""

CLAIM_DUE_MAILBOXES = f"""
WITH due AS MATERIALIZED (
    SELECT id FROM mailpoll_mailbox
    WHERE enabled AND {POLLABLE} AND {DUE_NOW}
    ORDER BY last_polled_at NULLS FIRST, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE mailpoll_mailbox AS m
SET last_polled_at = now()
FROM due
WHERE m.id = due.id
RETURNING m.id
"""

# A failed poll: its error, one more consecutive failure, and when to try again.
# With backoff (the server could not be polled: refused, hung, wrong password) the
# wait from the attempt's start doubles with each consecutive failure — 1, 2, 4 …
# poll_intervals — up to %(backoff_max)s seconds, never below poll_interval;
# without (the server answered, a folder or a message failed) the mailbox stays on
# its interval. A success resets both (``MailboxPoll.record_success``).
# A failure kept through a database outage is written late, so it is guarded by
# its own time: it never overwrites a newer error, and when a success came after
# it, it leaves only its trace (error and time), neither a count nor a backoff.
RECORD_POLL_FAILURE = """
UPDATE mailpoll_mailbox AS m SET
    last_error = %(error)s,
    last_error_at = %(failed_at)s,
    consecutive_failures = m.consecutive_failures + CASE WHEN s.superseded THEN 0 ELSE 1 END,
    next_attempt_at = CASE
        WHEN s.superseded THEN m.next_attempt_at
        WHEN NOT %(backoff)s THEN NULL
        ELSE COALESCE(m.last_polled_at, %(failed_at)s) + GREATEST(m.poll_interval, LEAST(
            m.poll_interval * power(2, LEAST(m.consecutive_failures, 30)),
            make_interval(secs => %(backoff_max)s)))
    END
FROM (
    SELECT id, COALESCE(last_success_at >= %(failed_at)s, false) AS superseded
    FROM mailpoll_mailbox WHERE id = %(id)s
) AS s
WHERE m.id = s.id AND (m.last_error_at IS NULL OR m.last_error_at < %(failed_at)s)
"""

# A folder's cursor after a batch (``mailpoll.sync.folder_sync``), in one statement: the
# row is created on the folder's first batch and overwritten after every later one.
SAVE_CURSOR = """
INSERT INTO mailpoll_foldercursor (mailbox_id, folder, uidvalidity, last_uid, sweep_until, sweep_since,
                                   last_sync_ts, last_error, last_error_at)
VALUES (%(mailbox_id)s, %(folder)s, %(uidvalidity)s, %(last_uid)s, %(sweep_until)s, %(sweep_since)s,
        %(now)s, %(last_error)s, %(last_error_at)s)
ON CONFLICT (mailbox_id, folder) DO UPDATE SET
    uidvalidity = EXCLUDED.uidvalidity, last_uid = EXCLUDED.last_uid, sweep_until = EXCLUDED.sweep_until,
    sweep_since = EXCLUDED.sweep_since, last_sync_ts = EXCLUDED.last_sync_ts, last_error = EXCLUDED.last_error,
    last_error_at = EXCLUDED.last_error_at
"""

# The dedup fast path, once per fetched batch: which of these messages does the
# org already have? Only an optimisation (it saves triage and file writes); the
# UNIQUE constraint below is what guarantees one Request per message.
STORED_REFS = """
SELECT source_ref FROM mailpoll_request
WHERE org_id = %(org_id)s AND source = 'email' AND source_ref = ANY(%(refs)s::text[])
"""

# A fetched batch's Requests and their Attachment rows, in one statement.
#
# UNIQUE (org_id, source, source_ref) is the authority: a message another
# poller (or an earlier tick) stored first conflicts and is left out of
# RETURNING, without an error, so the rest of the batch and the transaction go
# on — what a savepoint around each insert would give, without a subtransaction
# per message. Attachment rows join on the Requests actually inserted, so a
# duplicate brings none.
#
# Rows go in source_ref order, not the mailbox's: a conflicting insert waits
# for the transaction holding that key, so two pollers storing the same
# messages in different orders (one message in two mailboxes of one org) would
# each hold a key the other waits for: a deadlock. In one global order, one of
# them simply waits.
INSERT_MESSAGES = """
WITH message AS (
    SELECT * FROM unnest(
        %(source_refs)s::text[], %(uids)s::bigint[], %(statuses)s::text[], %(reject_reasons)s::text[],
        %(senders)s::text[], %(subjects)s::text[], %(received_ats)s::timestamptz[], %(bodies)s::text[],
        %(sizes)s::bigint[], %(provider_refs)s::text[], %(recipients)s::jsonb[], %(auth_results)s::jsonb[]
    ) AS m(source_ref, uid, status, reject_reason, sender, subject, received_at, body_text, size, provider_ref,
           recipients, auth_results)
), request AS (
    INSERT INTO mailpoll_request (org_id, source, source_ref, mailbox_id, folder, uid, provider_ref, status,
                                  reject_reason, sender, subject, received_at, body_text, size, recipients,
                                  auth_results, created_at)
    SELECT %(org_id)s, 'email', source_ref, %(mailbox_id)s, %(folder)s, uid, provider_ref, status, reject_reason,
           sender, subject, received_at, body_text, size, recipients, auth_results, now()
    FROM message
    ORDER BY source_ref
    ON CONFLICT (org_id, source, source_ref) DO NOTHING
    RETURNING id, source_ref
), attachment AS (
    INSERT INTO mailpoll_attachment (request_id, kind, document_type, filename, original_filename, mime, size,
                                     sha256, file, status, skip_reason, context_text, attempts, error,
                                     extracted_text, site_target_id, rule_id, rule_name, route_reason, created_at)
    SELECT request.id, a.kind, a.document_type, a.filename, a.original_filename, a.mime, a.size,
           a.sha256, a.file, a.status, a.skip_reason, a.context_text, 0, '', '', a.site_target_id, a.rule_id,
           a.rule_name, a.route_reason, now()
    FROM unnest(
        %(a_source_refs)s::text[], %(a_kinds)s::text[], %(a_document_types)s::text[], %(a_filenames)s::text[],
        %(a_original_filenames)s::text[], %(a_mimes)s::text[], %(a_sizes)s::bigint[], %(a_sha256s)s::text[],
        %(a_files)s::text[], %(a_statuses)s::text[], %(a_skip_reasons)s::text[], %(a_context_texts)s::text[],
        %(a_site_target_ids)s::bigint[], %(a_rule_ids)s::bigint[], %(a_rule_names)s::text[],
        %(a_route_reasons)s::text[]
    ) WITH ORDINALITY AS a(source_ref, kind, document_type, filename, original_filename, mime, size,
                           sha256, file, status, skip_reason, context_text, site_target_id, rule_id, rule_name,
                           route_reason, n)
    JOIN request ON request.source_ref = a.source_ref
    ORDER BY a.n
    RETURNING id, status
)
SELECT 'request', id, source_ref FROM request
UNION ALL
SELECT 'attachment', id, status FROM attachment
"""

# The documents on their way to the downstream outbox (``outbox.capacity.count_on_the_way``): stored, waiting
# for their process_attachment run or in it, each of which ends as an outbox entry (or failed). Read from the
# live jobs (the queued and the running rows' partial indexes, which an OR reaches and an IN list would not),
# each matched to its attachment by primary key: the cost is the active queue's, which the capacity gate itself
# keeps small, never the attachment table's. The CASE keeps a job with a malformed payload from failing the count.
DOCUMENTS_ON_THEIR_WAY = """
SELECT count(DISTINCT a.id) FROM jobs j
JOIN mailpoll_attachment a ON a.id = CASE WHEN j.payload->>'attachment_id' ~ '^[0-9]{1,18}$'
                                          THEN (j.payload->>'attachment_id')::bigint END
WHERE (j.status = 'queued' OR j.status = 'running') AND j.type = 'process_attachment'
  AND a.status IN ('pending', 'processing')
"""
