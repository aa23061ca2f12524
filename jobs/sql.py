"""Every statement that moves a job between states, in one place.

Each transition is conditional on the state it leaves (and, for a run in
progress, on the attempt number it claimed: a fencing token), so a worker that
lost its job — swept as a zombie and re-claimed elsewhere, or failed by an
operator — cannot overwrite its successor. Zero rows updated means exactly that.
"""

# Advisory lock namespace (first key of the two-int form) for the
# one_running_per claim guard. Other apps take their own namespaces.
GUARD_LOCK_NAMESPACE = 0x5E01

JOB_COLUMNS = (
    "id, org_id, type, status, attempts, dedup_key, payload, progress, report, error, "
    "created_at, started_at, finished_at"
)

# enqueue: insert unless a live job holds the same dedup_key. pg_notify() in
# RETURNING costs no extra round trip; PostgreSQL delivers it on COMMIT, so a
# worker is never woken for a job it cannot see yet (or one that rolled back).
ENQUEUE = f"""
INSERT INTO jobs (org_id, type, payload, dedup_key)
VALUES (%(org_id)s, %(type)s, %(payload)s::jsonb, %(dedup_key)s)
ON CONFLICT (dedup_key) DO NOTHING
RETURNING {JOB_COLUMNS}, pg_notify(%(channel)s, '')
"""

# enqueue_many: one statement for a batch of jobs of one type (the mail poller
# queues a fetched batch's documents at once). A key held by a live job means
# that job already covers the work: skipped, as in enqueue. PostgreSQL folds the
# identical notifications of one transaction into a single one.
ENQUEUE_MANY = """
INSERT INTO jobs (org_id, type, payload, dedup_key)
SELECT %(org_id)s, %(type)s, item.payload::jsonb, item.dedup_key
FROM unnest(%(payloads)s::text[], %(dedup_keys)s::text[]) WITH ORDINALITY AS item(payload, dedup_key, n)
ORDER BY item.n
ON CONFLICT (dedup_key) DO NOTHING
RETURNING id, pg_notify(%(channel)s, '')
"""

# enqueue, on conflict: the live job that holds the key (may be gone already).
FIND_BY_DEDUP_KEY = f"SELECT {JOB_COLUMNS} FROM jobs WHERE dedup_key = %(dedup_key)s"

# claim: the oldest queued job no other worker has locked, marked running in the
# same statement. SKIP LOCKED gives concurrent workers disjoint rows without
# waiting. The NOT EXISTS is the cheap half of the one_running_per guard; the
# claim transaction confirms it under an advisory lock (GUARD_CONFLICT), since
# this statement's snapshot cannot see a claim committed while it ran.
# Scope 'active' keeps its dedup_key while running; every other type releases it
# here, so an enqueue during the run is accepted (no lost wake-up).
_CLAIM = """
WITH candidate AS (
    SELECT j.id
    FROM jobs AS j
    WHERE j.status = 'queued'{guard}
    ORDER BY j.created_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs
SET status = 'running',
    started_at = now(),
    attempts = jobs.attempts + 1,
    dedup_key = CASE WHEN jobs.type = ANY(%(active_scoped)s::text[]) THEN jobs.dedup_key END
FROM candidate
WHERE jobs.id = candidate.id
RETURNING {columns}
"""
_GUARD = """
      AND NOT EXISTS (
          SELECT 1
          FROM unnest(%(guard_types)s::text[], %(guard_keys)s::text[]) AS g(type, key)
          JOIN jobs AS r
            ON r.status = 'running' AND r.type = g.type AND r.payload ->> g.key = j.payload ->> g.key
          WHERE g.type = j.type
      )"""
_RETURNING = ", ".join("jobs." + c.strip() for c in JOB_COLUMNS.split(","))
CLAIM = _CLAIM.format(guard=_GUARD, columns=_RETURNING)
# The same without the guard, for a registry without one_running_per types:
# the statement is planned on every call (no prepared statements through
# Django), and the guard's subquery is a good part of that planning.
CLAIM_UNGUARDED = _CLAIM.format(guard="", columns=_RETURNING)

# claim, for a guarded type: serialise claimers of the same (type, value), then
# look again with a snapshot taken after the lock. Anyone who claimed before us
# committed before releasing the lock, so they are visible; anyone after us waits.
GUARD_LOCK = "SELECT pg_advisory_xact_lock(%(namespace)s, hashtext(%(type)s || ':' || %(value)s))"
GUARD_CONFLICT = """
SELECT EXISTS (
    SELECT 1 FROM jobs
    WHERE status = 'running' AND type = %(type)s AND payload ->> %(key)s = %(value)s AND id <> %(id)s
)
"""

# The worker's heartbeat and report_progress: merge into progress, never replace,
# so neither clobbers the other's keys.
PROGRESS = """
UPDATE jobs
SET progress = COALESCE(progress, '{}'::jsonb) || %(fields)s::jsonb
               || jsonb_build_object('updated_at', now())
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempt)s
"""

# finish: the handler returned.
FINISH_DONE = """
UPDATE jobs
SET status = 'done', report = %(report)s::jsonb, finished_at = now(), dedup_key = NULL
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempt)s
"""

# fail: the handler raised (or the type is unknown). Final, no automatic retry:
# a deterministic failure would only fail again.
FINISH_FAILED = """
UPDATE jobs
SET status = 'failed', error = %(error)s, report = %(report)s::jsonb, finished_at = now(), dedup_key = NULL
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempt)s
"""

# The run was interrupted, not failed (its worker vanished, or lost the
# database): back to the queue for another attempt. started_at is cleared, the
# progress checkpoint kept for the next run to resume from.
REQUEUE_INTERRUPTED = """
UPDATE jobs
SET status = 'queued', started_at = NULL
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempt)s
"""

# Interrupted with no attempts left.
FAIL_EXHAUSTED = """
UPDATE jobs
SET status = 'failed', error = 'max attempts exceeded', finished_at = now(), dedup_key = NULL
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempt)s
"""

# sweep: running jobs whose latest sign of life (heartbeat, else start) is older
# than their type's threshold. Locked with SKIP LOCKED so several workers
# sweeping at once each take different rows, and a row a worker is finishing
# right now is left to it.
SWEEP_STALE = """
SELECT j.id, j.type, j.attempts
FROM jobs AS j
LEFT JOIN unnest(%(types)s::text[], %(stale_after)s::float8[]) AS cfg(type, stale_after) ON cfg.type = j.type
WHERE j.status = 'running'
  AND GREATEST(j.started_at, (j.progress ->> 'updated_at')::timestamptz)
      < now() - make_interval(secs => COALESCE(cfg.stale_after, %(default_stale_after)s))
ORDER BY j.started_at
LIMIT 1000
FOR UPDATE OF j SKIP LOCKED
"""

# Operator actions (admin). Same rules as the worker: only from the states they
# name, so a job that moved meanwhile is left alone.

# requeue a failed job: a fresh start, attempts back to zero.
OPERATOR_REQUEUE_FAILED = """
UPDATE jobs
SET status = 'queued', attempts = 0, error = NULL, started_at = NULL, finished_at = NULL
WHERE id = ANY(%(ids)s::uuid[]) AND status = 'failed'
RETURNING id
"""

# requeue a zombie now instead of waiting for the sweep. The caller passes the
# (id, attempts) it found stale: fenced on the attempt, so a job the sweep
# re-queued and a worker re-claimed meanwhile is a live run and is left alone.
# The attempt it used stays counted.
OPERATOR_REQUEUE_STALE = """
UPDATE jobs
SET status = 'queued', started_at = NULL
FROM unnest(%(ids)s::uuid[], %(attempts)s::int[]) AS stale(id, attempts)
WHERE jobs.id = stale.id AND jobs.attempts = stale.attempts AND jobs.status = 'running'
RETURNING jobs.id
"""

# give up on a live job. A worker still running it finds its fence broken: its
# result is discarded and report_progress raises JobLost.
OPERATOR_FAIL = """
UPDATE jobs
SET status = 'failed', error = %(error)s, finished_at = now(), dedup_key = NULL
WHERE id = ANY(%(ids)s::uuid[]) AND status IN ('queued', 'running')
RETURNING id
"""
