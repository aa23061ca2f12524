"""Every statement that moves an outbox entry, in one place (as ``jobs.sql`` is for jobs).

Each transition is one statement conditional on the state it leaves; a sender's
own transitions are also conditional on the claim token it was handed, so a
sender whose lease expired (and was re-claimed elsewhere) cannot move its
successor's try.

Times are statement_timestamp(), the clock of the columns' defaults (Django's
Now()): inside one transaction now() stands still, so an entry added earlier in
it would look due only in the future.
"""

# Advisory lock namespace (first key of the two-int form) of the sender slots (outbox.sender).
SENDER_LOCK_NAMESPACE = 0x0B0C

ENTRY_COLUMNS = "id, key, org_id, document_ref, document, file, file_size, file_sha256, attempts, claim_token"

# add: the accept's entry, in the accept's transaction. UNIQUE (document_ref) makes a second accept of the
# same document (a replayed transition) a no-op instead of a second delivery. The key is the document's
# (outbox.entries.idempotency_key), not drawn per entry: a document held again is sent under the same key.
ADD = """
INSERT INTO outbox_entry (key, org_id, document_ref, source, document, file, file_size, file_sha256, state,
                          attempts, last_error, claimed_by)
VALUES (%(key)s, %(org_id)s, %(document_ref)s, %(source)s, %(document)s::jsonb, %(file)s,
        %(file_size)s, %(file_sha256)s, 'waiting', 0, '', '')
ON CONFLICT (document_ref) DO NOTHING
RETURNING id
"""

# claim: one due entry, or one whose lease expired, taken in one statement. SKIP LOCKED gives concurrent
# senders different rows without waiting; the lease makes a dead sender's claim expire. A re-claim of an
# expired lease counts the dead sender's try (it never reported) and says so in last_error.
# The locking SELECT is a CTE, run once per statement. As a subquery in FROM it could be planned as the inner
# side of a nested loop and run again for each row of the outer scan (the planner does so when it believes
# the table is nearly empty, as after an autovacuum): each run locks the first entry still free, so one claim
# took several entries, and all but the one the sender got stayed "sending" until their lease expired.
CLAIM = f"""
WITH due AS MATERIALIZED (
    SELECT id FROM outbox_entry
    WHERE (state = 'waiting' AND next_attempt_at <= statement_timestamp()) OR (state = 'sending' AND lease_until < statement_timestamp())
    ORDER BY next_attempt_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox_entry AS e
SET state = 'sending',
    claimed_by = %(worker)s,
    claim_token = gen_random_uuid(),
    lease_until = statement_timestamp() + %(lease)s * INTERVAL '1 second',
    attempts = e.attempts + CASE WHEN e.state = 'sending' THEN 1 ELSE 0 END,
    last_error = CASE WHEN e.state = 'sending'
                      THEN 'the claim of ' || e.claimed_by || ' expired (that sender died or hung)'
                      ELSE e.last_error END
FROM due
WHERE e.id = due.id
RETURNING {", ".join("e." + c.strip() for c in ENTRY_COLUMNS.split(","))}
"""

# failed: this sender's try failed. Counted, error kept, claim released at once (the lease is for senders
# that die, not for those that fail and say so), next try after the delay (seoinsight.backoff.doubling).
FAILED = """
UPDATE outbox_entry
SET state = 'waiting', attempts = attempts + 1, last_error = %(error)s, last_tried_at = statement_timestamp(),
    next_attempt_at = statement_timestamp() + %(delay)s * INTERVAL '1 second', claimed_by = '', claim_token = NULL,
    lease_until = NULL, unreachable = %(unreachable)s
WHERE id = %(id)s AND state = 'sending' AND claim_token = %(token)s
"""

# recovered: the downstream acknowledged a document, so it is back: the entries that wait only because it was
# unreachable are due now, not after their backoff (up to OUTBOX_RETRY_MAX_SECONDS). One a document-specific
# refusal keeps its backoff: a success says nothing about it, and would otherwise bring it back at every success.
RECOVERED = """
UPDATE outbox_entry SET next_attempt_at = statement_timestamp(), unreachable = false
WHERE state = 'waiting' AND unreachable AND next_attempt_at > statement_timestamp()
"""

# done: the downstream answered 2xx, so it has the document: the entry goes, whoever holds it now (a
# successor that re-claimed an expired lease sends the same Idempotency-Key; the downstream dedupes).
DONE = "DELETE FROM outbox_entry WHERE id = %(id)s"

# retry_now (the admin): waiting entries due at once; one being sent is left to its sender.
RETRY_NOW = """
UPDATE outbox_entry SET next_attempt_at = statement_timestamp()
WHERE id = ANY(%(ids)s) AND state = 'waiting'
RETURNING id
"""

# Seconds until some entry can be claimed (<= 0: now); NULL when the outbox is empty.
NEXT_DUE_IN = """
SELECT EXTRACT(EPOCH FROM min(CASE WHEN state = 'waiting' THEN next_attempt_at ELSE lease_until END) - statement_timestamp())
FROM outbox_entry
"""

DUE_COUNT = """
SELECT count(*) FROM outbox_entry
WHERE (state = 'waiting' AND next_attempt_at <= statement_timestamp()) OR (state = 'sending' AND lease_until < statement_timestamp())
"""

DEPTH = "SELECT count(*), EXTRACT(EPOCH FROM statement_timestamp() - min(created_at)) FROM outbox_entry"

TRY_SLOT = "SELECT pg_try_advisory_lock(%(namespace)s, %(slot)s)"
RELEASE_SLOT = "SELECT pg_advisory_unlock(%(namespace)s, %(slot)s)"

# The periodic duty (outbox.watch): should a sender be woken? True when an entry is claimable (due, or its
# lease expired) and no sender is queued (the wake's dedup key, UNIQUE) or running (the live-jobs partial
# index: running rows are at most one per worker). Each EXISTS stops at its first row.
SENDER_WANTED = """
SELECT (EXISTS (SELECT 1 FROM outbox_entry WHERE state = 'waiting' AND next_attempt_at <= statement_timestamp())
        OR EXISTS (SELECT 1 FROM outbox_entry WHERE state = 'sending' AND lease_until < statement_timestamp()))
   AND NOT EXISTS (SELECT 1 FROM jobs WHERE dedup_key = %(dedup_key)s)
   AND NOT EXISTS (SELECT 1 FROM jobs WHERE status = 'running' AND type = %(job_type)s)
"""

# Entries claimable for longer than %(after)s seconds (due, or their lease over, and nobody took them), and
# how long the longest of them has been claimable: a sender should have had them long ago.
OVERDUE = """
SELECT count(*), EXTRACT(EPOCH FROM statement_timestamp() - min(due_at))
FROM (SELECT CASE WHEN state = 'waiting' THEN next_attempt_at ELSE lease_until END AS due_at FROM outbox_entry) AS e
WHERE due_at < statement_timestamp() - %(after)s * INTERVAL '1 second'
"""
