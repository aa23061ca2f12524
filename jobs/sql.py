"""Every statement that moves a job between states, in one place.

Each transition is conditional on the state it leaves (and, for a run in
progress, on the attempt number it claimed: a fencing token), so a worker that
lost its job — swept as a zombie and re-claimed elsewhere, or failed by an
operator — cannot overwrite its successor. Zero rows updated means exactly that.
"""

# Queued rows the guarded claim looks at in order before it looks type by type.
GUARD_WINDOW = 32

# Advisory lock namespace (first key of the two-int form) for the
# one_running_per claim guard. Other apps take their own namespaces.
GUARD_LOCK_NAMESPACE = 0x5E01

JOB_COLUMNS = (
    "id, org_id, type, status, attempts, uncounted_attempts, outages, dedup_key, enqueued_key, "
    "payload, progress, report, error, created_at, started_at, finished_at, priority"
)

# enqueue: insert unless a live job holds the same dedup_key (the partial unique
# index jobs_dedup_key_live is the arbiter: the WHERE lets PostgreSQL infer it). pg_notify() in
# RETURNING costs no extra round trip; PostgreSQL delivers it on COMMIT, so a
# worker is never woken for a job it cannot see yet (or one that rolled back).
# enqueued_key keeps the key for the job's whole life: a job put back in the
# queue takes it back (never two queued jobs with one key).
# The id is made by the caller (jobs.ids: uuidv7's layout, without the server's cost).
# RETURNING only what the caller cannot know: what the database chose (created_at)
# and, when a payload was given, the payload as jsonb wrote it (keys in jsonb's
# order, numbers as jsonb writes them). The rest of the new row is what enqueue
# sent and the columns' defaults (jobs.rows.queued_job, which sets every field of
# the Job it returns). Without a payload the column's default, {}, is known:
# reading nothing back is ~15 µs less per enqueue (docs/benchmarks.md, enqueue).
_INSERT_KEYED = """
INSERT INTO jobs (id, org_id, type, payload, dedup_key, enqueued_key, run_after, priority, queue_name)
VALUES (%(id)s, %(org_id)s, %(type)s, %(payload)s::jsonb, %(dedup_key)s, %(dedup_key)s,
        %(run_after)s, %(priority)s, %(queue_name)s)
ON CONFLICT (dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
"""
# enqueue without a dedup_key: no ON CONFLICT, which would make the row a
# speculative insertion (a token lock, one more WAL record) though a NULL key is
# outside jobs_dedup_key_live and cannot conflict.
_INSERT_KEYLESS = """
INSERT INTO jobs (id, org_id, type, payload, run_after, priority, queue_name)
VALUES (%(id)s, %(org_id)s, %(type)s, %(payload)s::jsonb, %(run_after)s, %(priority)s, %(queue_name)s)
"""
_RETURNING = "RETURNING created_at, pg_notify(%(channel)s, '')"
ENQUEUE = _INSERT_KEYED + _RETURNING + ", payload\n"
ENQUEUE_KEYLESS = _INSERT_KEYLESS + _RETURNING + ", payload\n"
ENQUEUE_NO_PAYLOAD = _INSERT_KEYED + _RETURNING + "\n"
ENQUEUE_KEYLESS_NO_PAYLOAD = _INSERT_KEYLESS + _RETURNING + "\n"

# enqueue_many: one statement for a batch of jobs of one type (the mail poller
# queues a fetched batch's documents at once), rows inserted in the items' order.
# A key held by a live job means that job already covers the work: skipped, as in
# enqueue. It answers the number queued and notifies once, only if that is not 0
# (the notification carries nothing: one wakes the listeners as well as a thousand).
# The items come as texts, not text[]: %(ids)s one id a line (jobs.ids, made by
# the caller), %(payloads)s one JSON document a line (to_json never writes a line
# break of its own), %(dedup_keys)s a JSON array of the keys (null for none).
# psycopg writes a list of 1,000 strings as an array literal in ~5 ms of Python
# (3.6 µs of client CPU per job, against 0.4 for a join and a split:
# bench.enqueue_paths). COPY was no faster: the same server CPU per row, more
# client CPU, and no ON CONFLICT.
ENQUEUE_MANY = """
WITH queued AS (
    INSERT INTO jobs (id, org_id, type, payload, dedup_key, enqueued_key, run_after, priority, queue_name)
    SELECT item.id::uuid, %(org_id)s, %(type)s, item.payload::jsonb, item.dedup_key, item.dedup_key,
           %(run_after)s, %(priority)s, %(queue_name)s
    FROM ROWS FROM (string_to_table(%(ids)s, E'\\n'), string_to_table(%(payloads)s, E'\\n'),
                    jsonb_array_elements_text(%(dedup_keys)s::jsonb))
         WITH ORDINALITY AS item(id, payload, dedup_key, n)
    ORDER BY item.n
    ON CONFLICT (dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING 1
)
SELECT count.n, pg_notify(%(channel)s, '') FROM (SELECT count(*) AS n FROM queued) AS count WHERE count.n > 0
"""

# enqueue_many of a batch without keys: nothing to arbitrate (a NULL key is outside
# jobs_dedup_key_live), so no ON CONFLICT, which makes every row a speculative
# insertion (a token lock and one more WAL record per row: 44 more bytes of WAL and
# ~6 % more time per job). Otherwise as ENQUEUE_MANY.
ENQUEUE_MANY_KEYLESS = """
WITH queued AS (
    INSERT INTO jobs (id, org_id, type, payload, run_after, priority, queue_name)
    SELECT item.id::uuid, %(org_id)s, %(type)s, item.payload::jsonb, %(run_after)s, %(priority)s, %(queue_name)s
    FROM ROWS FROM (string_to_table(%(ids)s, E'\\n'), string_to_table(%(payloads)s, E'\\n'))
         WITH ORDINALITY AS item(id, payload, n)
    ORDER BY item.n
    RETURNING 1
)
SELECT count.n, pg_notify(%(channel)s, '') FROM (SELECT count(*) AS n FROM queued) AS count WHERE count.n > 0
"""

# enqueue, on conflict: the live job that holds the key (may be gone already).
FIND_BY_DEDUP_KEY = f"SELECT {JOB_COLUMNS} FROM jobs WHERE dedup_key = %(dedup_key)s"

# claim: the first due queued job (highest priority, then oldest) of a type and
# queue this worker runs, not locked by another worker, marked running in the
# same statement. Due is judged on the database's clock (run_after <= now()),
# so workers with skewed clocks agree; %(queues)s NULL means every queue. SKIP LOCKED gives concurrent
# workers disjoint rows without waiting. Only registered types: during a rolling
# deploy an old worker leaves a new type to the workers that know it.
# Scope 'active' keeps its dedup_key while running; every other type releases it
# here, so an enqueue during the run is accepted (no lost wake-up).
# An idle worker's wait ends no later than the soonest scheduled job it could
# claim: seconds until then (NULL: none). Read off jobs_queued_run_after, so a
# backlog of future jobs costs one index probe, not a scan.
NEXT_DUE = """
SELECT extract(epoch FROM min(j.run_after) - now())::float8
FROM jobs AS j
WHERE j.status = 'queued' AND j.run_after > now() AND j.type = ANY(%(types)s::text[])
  AND (%(queues)s::text[] IS NULL OR j.queue_name = ANY(%(queues)s::text[]))
"""

# A queued row is claimable when it is due and in one of the worker's queues.
# {alias} names the row.
_DUE = """({alias}.run_after IS NULL OR {alias}.run_after <= now())
      AND (%(queues)s::text[] IS NULL OR {alias}.queue_name = ANY(%(queues)s::text[]))"""
DUE = _DUE.replace("{alias}", "j")


def _choice(limit: str, narrowed: str = "") -> str:
    """The rows a claim takes: the first ``limit`` due queued rows of the worker's types and queues in claim
    order (priority, then age, then id: one strict order, so a claim can start after a given row), locked,
    skipping those another claim holds. ``narrowed``: one more condition (``_choice_after``)."""
    return f"""SELECT j.id
    FROM jobs AS j
    WHERE j.status = 'queued' AND j.type = ANY(%(types)s::text[]) AND {DUE}{narrowed}
    ORDER BY j.priority DESC, j.created_at, j.id
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED"""


# The same choice, started after the row whose claim-order key is %(after_priority)s,
# %(after_created)s, %(after_id)s: for a worker whose exact claims are slow (jobs.claim_cursor).
# A snapshot held open elsewhere keeps the index entries of every row claimed since it
# was taken; an exact claim walks them all from the index's front, one heap fetch each,
# while this one starts past them. Three branches, because the index key mixes a
# descending and two ascending columns: higher priorities from their start, the same
# priority after the row (a row comparison the index descends to), lower priorities
# from their start. FOR UPDATE is not allowed in a UNION's arms, so each is a subquery;
# the Append runs them in order and the outer LIMIT stops it, so a later branch runs
# (and locks) only when the earlier ones come up short. It takes only rows the exact
# choice could take: the same conditions and one more.
def _choice_after(limit: str) -> str:
    branches = (
        " AND j.priority > %(after_priority)s::smallint",
        " AND j.priority = %(after_priority)s::smallint"
        " AND (j.created_at, j.id) > (%(after_created)s::timestamptz, %(after_id)s::uuid)",
        " AND j.priority < %(after_priority)s::smallint",
    )
    union = "\n    UNION ALL\n    ".join(f"SELECT b.id FROM ({_choice(limit, b)}\n    ) AS b" for b in branches)
    return f"SELECT c.id FROM (\n    {union}\n    ) AS c\n    LIMIT {limit}"


_RETURNING = ", ".join("jobs." + c.strip() for c in JOB_COLUMNS.split(","))
# After a claimed job's columns: how long its statement had run on the server when the row was
# claimed, in seconds. The claim's own cost, without the network or the client's threads, for the
# worker's judgement of slow claims (jobs.claim_cursor).
SERVER_SECONDS = "extract(epoch FROM clock_timestamp() - statement_timestamp())::float8"
_CLAIM = f"""
UPDATE jobs
SET status = 'running',
    started_at = now(),
    attempts = jobs.attempts + 1,
    dedup_key = CASE WHEN jobs.type = ANY(%(active_scoped)s::text[]) THEN jobs.dedup_key END,
    worker_ids = CASE WHEN %(worker_id)s::text IS NULL THEN jobs.worker_ids
                      ELSE array_append(jobs.worker_ids, %(worker_id)s::text) END
FROM candidate
WHERE jobs.id = candidate.id
RETURNING {_RETURNING}, {SERVER_SECONDS} AS took
"""
# For a registry without one_running_per types: one statement, one index scan.
CLAIM_UNGUARDED = f"WITH candidate AS (\n    {_choice('1')}\n)" + _CLAIM
# Its bounded form (_choice_after). MATERIALIZED: the planner may not turn the
# branches into a subquery it runs again for each row of the UPDATE's join.
CLAIM_UNGUARDED_AFTER = f"WITH candidate AS MATERIALIZED (\n    {_choice_after('1')}\n)" + _CLAIM

# The claim of the rows a MATERIALIZED ``candidate`` CTE chose and locked, for
# a claim of several: found by primary key (= ANY of their ids), whatever the
# planner guesses of a LIMIT it cannot see. A prepared statement's generic plan
# takes %(limit)s for a tenth of the table, and would hash the whole table to
# join it (2.5 ms instead of 0.05 on 5,000 rows: docs/benchmarks.md).
_CLAIM_CANDIDATES = _CLAIM.replace(
    "FROM candidate\nWHERE jobs.id = candidate.id\n",
    "WHERE jobs.id = ANY(ARRAY(SELECT id FROM candidate))\n",
)

# claim_many: up to %(limit)s jobs in one statement, for a worker with that many
# free slots (runjobs --concurrency N): CLAIM_UNGUARDED's rule (due, its types
# and queues, SKIP LOCKED) taking the first %(limit)s rows in claim order instead
# of the first one. Only for registries without one_running_per types: this
# snapshot sees neither a claim committed while it runs nor the other rows of
# its own batch, so it could take two jobs of one site (queue.claim_many).
# MATERIALIZED: the locked rows are chosen once, whatever join the planner
# picks for the UPDATE. RETURNING comes in no order; the outer SELECT gives the
# claim order back, so the slots start the most urgent jobs first.
def _claimed_several(choice: str) -> str:
    return f"""
candidate AS MATERIALIZED (
    {choice}
),
claimed AS ({_CLAIM_CANDIDATES})"""


_CLAIMED_SEVERAL = _claimed_several(_choice("%(limit)s"))
_CLAIMED_SEVERAL_AFTER = _claimed_several(_choice_after("%(limit)s"))
_IN_CLAIM_ORDER = f"""
SELECT {JOB_COLUMNS}, took FROM claimed ORDER BY priority DESC, created_at, id
"""
CLAIM_MANY_UNGUARDED = "WITH" + _CLAIMED_SEVERAL + _IN_CLAIM_ORDER
CLAIM_MANY_UNGUARDED_AFTER = "WITH" + _CLAIMED_SEVERAL_AFTER + _IN_CLAIM_ORDER

# What a run that ended done writes, its report given as jsonb text: one definition
# for FINISH_DONE (one run) and FINISH_AND_CLAIM (a turn's runs, with the next claim).
# The dedup key is freed with the job's end (enqueued_key keeps it, for a job put back in the queue).
def _set_done(report: str) -> str:
    return f"status = 'done', report = {report}::jsonb, finished_at = now(), dedup_key = NULL"


# finish_and_claim: a worker's done runs recorded and its next jobs claimed, in
# one statement, so one round trip (and one commit) per turn of the worker
# instead of one per finish and one per claim. Two transitions, each guarded as
# on its own:
# - finished: FINISH_DONE for every (id, attempt, report), each row fenced on
#   the attempt its run claimed; RETURNING the ids it recorded, so a run missing
#   there knows its job was no longer its own;
# - claimed: CLAIM_MANY_UNGUARDED's claim of up to %(limit)s jobs (0: only the
#   finishes), so only for registries without one_running_per types, as there.
# They cannot touch the same row (a running one, queued ones), so neither part
# needs to see the other's effects, which the parts of one statement cannot.
# One statement commits whole or not at all: a crash or a lost connection
# before the commit leaves every one of these runs running, for the sweep or
# the worker's own retry of each finish; none is acknowledged and then lost.
# One row per claimed job, in claim order, each carrying the recorded ids; one
# row of NULL job columns when nothing was claimed.
_FINISHED = """
WITH finished AS (
    UPDATE jobs
    SET """ + _set_done("f.report") + """
    FROM unnest(%(finish_ids)s::uuid[], %(finish_attempts)s::int[], %(finish_reports)s::text[])
         AS f(id, attempt, report)
    WHERE jobs.id = ANY(%(finish_ids)s::uuid[])  -- by primary key (the collation: see PROGRESS, below)
      AND jobs.id = f.id AND jobs.status = 'running' COLLATE "C" AND jobs.attempts = f.attempt
    RETURNING jobs.id
),"""
_FINISHED_AND_CLAIMED = f"""
SELECT ARRAY(SELECT id FROM finished) AS finished, c.*
FROM (SELECT) AS one
LEFT JOIN LATERAL (SELECT {JOB_COLUMNS}, took FROM claimed) AS c ON true
ORDER BY c.priority DESC, c.created_at, c.id
"""
FINISH_AND_CLAIM = _FINISHED + _CLAIMED_SEVERAL + _FINISHED_AND_CLAIMED
# The same turn with the bounded claim (_choice_after), for a worker whose exact claims are slow.
FINISH_AND_CLAIM_AFTER = _FINISHED + _CLAIMED_SEVERAL_AFTER + _FINISHED_AND_CLAIMED

# With one_running_per types, first the cheap way: the first job (claim order:
# priority, then age) in the first GUARD_WINDOW due queued rows that no running
# job blocks (values compared as jsonb, see below). When one is there it is the
# first claimable job of all, since everything before it is in the window; when none is (a blocked backlog fills the
# window, or every claimable row of it is being claimed by others),
# claim_guarded() below looks type by type.
CLAIM_WINDOWED = """
WITH running AS MATERIALIZED (
    SELECT r.type, r.payload FROM jobs AS r WHERE r.status = 'running' AND r.type = ANY(%(guard_types)s::text[])
),
front AS (
    SELECT f.id FROM jobs AS f WHERE f.status = 'queued' AND {due_f}
    ORDER BY f.priority DESC, f.created_at, f.id LIMIT {window}
),
candidate AS (
    SELECT j.id
    FROM front JOIN jobs AS j ON j.id = front.id
    WHERE j.status = 'queued' AND j.type = ANY(%(types)s::text[])
      AND NOT EXISTS (
          SELECT 1
          FROM unnest(%(guard_types)s::text[], %(guard_keys)s::text[]) AS g(type, key)
          JOIN running AS r ON r.type = g.type AND r.payload -> g.key = j.payload -> g.key
          WHERE g.type = j.type AND j.payload -> g.key <> 'null'
      )
    ORDER BY j.priority DESC, j.created_at, j.id
    LIMIT 1
    FOR UPDATE OF j SKIP LOCKED
)
""".replace("{window}", str(GUARD_WINDOW)).replace("{due_f}", _DUE.replace("{alias}", "f")) + _CLAIM

# Otherwise (approximately in claim order: each type's heads are its oldest due
# rows, and priority orders only among them), "the oldest claimable job" must not cost a scan of
# the jobs the guard blocks (20,000 queued for a site that is running would be
# read on every poll). So the candidates are gathered per type, each from an
# index, and only the oldest unlocked one is taken:
# - a type without a guard: its first rows, from jobs_queued_type_created;
# - a guarded type: its first GUARD_WINDOW rows in order, minus those whose
#   value a running job of the type holds. Only when the whole window is blocked
#   (one site's backlog in front), a skip scan over the distinct values
#   (jobs_queued_guard_<key>) takes the oldest job of each value not running:
#   cost by the number of distinct values queued, never by the blocked backlog.
# Values compare as jsonb on both sides (true, 1.0 = 1, nested objects); a
# missing key or JSON null is no value: the guard does not apply.
# The statement's snapshot cannot see a claim committed while it ran: the claim
# transaction confirms the guard under an advisory lock (GUARD_LOCK,
# GUARD_CONFLICT).
# Rows per unguarded type offered to the final SKIP LOCKED: enough for that many
# workers claiming at once.
CLAIM_SPARE = 16

_GUARDED_CTES = """
prefix_{i} AS MATERIALIZED (
    SELECT j.id, j.created_at, j.payload -> {key} AS v
    FROM jobs AS j
    WHERE j.status = 'queued' AND j.type >= {type} AND j.type <= {type} AND {due}
    ORDER BY j.type, j.created_at
    LIMIT {window}
),
blocked_{i} AS (
    SELECT (SELECT count(*) FROM prefix_{i}) = {window}
           AND NOT EXISTS (SELECT 1 FROM prefix_{i} AS p WHERE NOT EXISTS (
               SELECT 1 FROM running AS r WHERE r.type = {type} AND r.payload -> {key} = p.v AND p.v <> 'null'))
           AS all_blocked
),
values_{i}(v) AS (
    SELECT (SELECT j.payload -> {key} FROM jobs AS j
            WHERE j.status = 'queued' AND j.type = {type} AND j.payload -> {key} IS NOT NULL AND {due}
            ORDER BY j.payload -> {key} LIMIT 1)
    WHERE (SELECT all_blocked FROM blocked_{i})
    UNION ALL
    SELECT (SELECT j.payload -> {key} FROM jobs AS j
            WHERE j.status = 'queued' AND j.type = {type} AND j.payload -> {key} > s.v AND {due}
            ORDER BY j.payload -> {key} LIMIT 1)
    FROM values_{i} AS s
    WHERE s.v IS NOT NULL
),"""
_GUARDED_HEADS = """
    UNION ALL
    SELECT p.id, p.created_at FROM prefix_{i} AS p
    WHERE NOT (SELECT all_blocked FROM blocked_{i})
      AND NOT EXISTS (SELECT 1 FROM running AS r WHERE r.type = {type} AND r.payload -> {key} = p.v AND p.v <> 'null')
    UNION ALL
    SELECT h.id, h.created_at
    FROM values_{i} AS s
    CROSS JOIN LATERAL (
        SELECT j.id, j.created_at FROM jobs AS j
        WHERE j.status = 'queued' AND j.type = {type} AND j.payload -> {key} = s.v AND {due}
        ORDER BY j.payload -> {key}, j.created_at LIMIT 1
    ) AS h
    WHERE s.v IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM running AS r WHERE r.type = {type} AND r.payload -> {key} = s.v AND s.v <> 'null')
    UNION ALL
    SELECT h.id, h.created_at
    FROM (SELECT 1 WHERE (SELECT all_blocked FROM blocked_{i})) AS only_when_blocked
    CROSS JOIN LATERAL (
        SELECT j.id, j.created_at FROM jobs AS j
        WHERE j.status = 'queued' AND j.type = {type} AND j.payload -> {key} IS NULL AND {due}
        ORDER BY j.payload -> {key}, j.created_at LIMIT 1
    ) AS h"""
_CANDIDATE_GUARDED = """
WITH RECURSIVE
running AS MATERIALIZED (
    SELECT r.type, r.payload FROM jobs AS r WHERE r.status = 'running'
),{guarded_ctes}
heads AS (
    SELECT h.id, h.created_at
    FROM unnest(%(plain_types)s::text[]) AS t(type)
    CROSS JOIN LATERAL (
        SELECT j.id, j.created_at FROM jobs AS j
        WHERE j.status = 'queued' AND j.type >= t.type AND j.type <= t.type AND {due}
        ORDER BY j.type, j.created_at LIMIT {spare}
    ) AS h{guarded_heads}
),
candidate AS (
    SELECT j.id
    FROM jobs AS j
    WHERE j.id = ANY(ARRAY(SELECT id FROM heads)) AND j.status = 'queued'
    ORDER BY j.priority DESC, j.created_at, j.id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
"""


def _literal(text: str) -> str:
    """A SQL string literal (standard_conforming_strings, PostgreSQL's default), ``%`` escaped for the driver."""
    return "'" + text.replace("'", "''").replace("%", "%%") + "'"


def claim_guarded(guards: tuple[tuple[str, str], ...]) -> str:
    """The claim for a registry with one_running_per types: ``guards`` is ((type, key), ...).

    Types and keys are spelled as literals, so the planner matches the
    expression indexes (``payload -> 'site_id'``).
    """
    ctes, heads = [], []
    for i, (type_name, key) in enumerate(guards):
        names = {"i": i, "type": _literal(type_name), "key": _literal(key), "window": GUARD_WINDOW, "due": DUE}
        ctes.append(_GUARDED_CTES.format(**names))
        heads.append(_GUARDED_HEADS.format(**names))
    candidate = _CANDIDATE_GUARDED.format(guarded_ctes="".join(ctes), guarded_heads="".join(heads),
                                          spare=CLAIM_SPARE, due=DUE)
    return candidate + _CLAIM


# Payload keys with a skip-scan index for the guard (migration 0003); a guarded
# type on another key is correct but its claims slow down with blocked work
# (check jobs.W002).
GUARD_INDEXED_KEYS = ("site_id",)

# claim, for a guarded type: serialise claimers of the same (type, value), then
# look again with a snapshot taken after the lock. Anyone who claimed before us
# committed before releasing the lock, so they are visible; anyone after us waits.
# Both read the value from the claimed row, as jsonb. The lock key is a text that
# jsonb-equal values share (1 and 1.0 alike; any object or array of a type
# shares one lock, which only serialises more); a hash collision only serialises
# two values, it never lets one run twice.
GUARD_LOCK = """
SELECT pg_advisory_xact_lock(%(namespace)s, hashtext(j.type || ':' || CASE jsonb_typeof(v.v)
           WHEN 'number' THEN trim_scale(v.v::numeric)::text
           WHEN 'object' THEN '{}'
           WHEN 'array' THEN '[]'
           ELSE v.v::text END))
FROM jobs AS j CROSS JOIN LATERAL (SELECT j.payload -> %(key)s AS v) AS v
WHERE j.id = %(id)s AND v.v IS NOT NULL AND v.v <> 'null'
"""
GUARD_CONFLICT = """
SELECT EXISTS (
    SELECT 1
    FROM jobs AS me JOIN jobs AS r
      ON r.status = 'running' AND r.type = me.type AND r.id <> me.id AND r.payload -> %(key)s = me.payload -> %(key)s
    WHERE me.id = %(id)s AND me.payload -> %(key)s <> 'null'
)
"""

# The worker's heartbeat and report_progress: merge into progress, never replace,
# so neither clobbers the other's keys. Every write of a run is fenced on
# (status = 'running', attempts = the attempt it claimed): attempts grows at
# every claim and nothing lowers it, so no earlier run of the job holds a token
# that passes. RETURNING tells the run, in the same round trip, whether its
# cancel was requested (jobs.cancel): no row means the job is no longer its own.
# The fence compares status under the "C" collation (for a text equality, the
# same answer) so that it does not match the predicate of the running rows'
# partial index, jobs_running_type_started: the planner would rather scan that
# small index whole, filtering on id, than descend the primary key, a scan that
# grows with every running row and with every dead entry a snapshot held open
# keeps there (docs/benchmarks.md). So every fenced write finds its row by the
# primary key; tests/jobs/test_lean_path.py holds their plans to it.
_THIS_RUN = """id = %(id)s AND status = 'running' COLLATE "C" AND attempts = %(attempt)s"""
PROGRESS = """
UPDATE jobs
SET progress = COALESCE(progress, '{}'::jsonb) || %(fields)s::jsonb
               || jsonb_build_object('updated_at', now())
WHERE """ + _THIS_RUN + """
RETURNING cancel_requested_at
"""

# finish: the handler returned.
FINISH_DONE = f"""
UPDATE jobs
SET {_set_done("%(report)s")}
WHERE {_THIS_RUN}
"""

# fail: the handler raised (or the type is unknown). Final, no automatic retry:
# a deterministic failure would only fail again. The traceback has its own
# column (staff only); the caller runs on_fail in the same transaction.
FINISH_FAILED = """
UPDATE jobs
SET status = 'failed', error = %(error)s, traceback = %(traceback)s, finished_at = now(), dedup_key = NULL
WHERE """ + _THIS_RUN + """
"""

# retry: the handler asked to run again later (jobs.Retry, or a retry_on
# exception) and attempts are left (finish.finish_retry decided, under
# INTERRUPTED_RUN's lock). Back to the queue, not due before the delay on the
# database's clock; attempts kept, so the next claim's token is new and the run
# counts against max_attempts. error/traceback keep why it waits (the admin
# shows it). It takes its key back as an interrupted run does (finish.put_back).
FINISH_RETRY = """
UPDATE jobs
SET status = 'queued', started_at = NULL, run_after = now() + make_interval(secs => %(delay)s),
    error = %(error)s, traceback = %(traceback)s, dedup_key = COALESCE(dedup_key, enqueued_key)
WHERE """ + _THIS_RUN + """
"""

# An interrupted run, read under its fence before deciding its fate
# (finish.after_interruption). FOR UPDATE: nothing else moves it meanwhile,
# a cancel included, so a job asked to stop is never put back to run again.
INTERRUPTED_RUN = """
SELECT attempts, uncounted_attempts, outages, cancel_requested_at IS NOT NULL FROM jobs
WHERE """ + _THIS_RUN + """
FOR UPDATE
"""

# The run was interrupted, not failed (its worker vanished, or lost the
# database): back to the queue for another attempt. started_at is cleared, the
# progress checkpoint kept for the next run to resume from. A queued job holds
# its key, so a 'queue'-scope job (key released at claim) takes it back: a
# unique violation here means a newer queued job holds it (then SUPERSEDE).
# A run the database cut off may be forgiven (spared = 1): it does not count; so
# is one its worker hands back, exiting for another run's fault (finish.hand_back).
REQUEUE_INTERRUPTED = """
UPDATE jobs
SET status = 'queued', started_at = NULL, dedup_key = COALESCE(dedup_key, enqueued_key),
    uncounted_attempts = uncounted_attempts + %(spared)s, outages = outages + %(outage)s
WHERE """ + _THIS_RUN + """
"""

# The runs this process still holds (its claim the latest of worker_ids): a worker
# exiting for a handler it cannot stop waits for them to end, then hands back the
# rest (jobs.timeouts). status = 'running' as the running rows' partial index says it.
RUNNING_HERE = f"""
SELECT {JOB_COLUMNS} FROM jobs
WHERE status = 'running' AND worker_ids[cardinality(worker_ids)] = %(worker_id)s
"""

# Fold an interrupted run into the queued job that holds its key: that job,
# enqueued after this run started, does the same work from the start. Done,
# with a report naming it, and no on_fail: nothing failed.
SUPERSEDE = """
UPDATE jobs
SET status = 'done', finished_at = now(), dedup_key = NULL,
    report = jsonb_build_object('superseded_by', %(holder)s::text), outages = outages + %(outage)s
WHERE """ + _THIS_RUN + """
"""

# Interrupted with no attempts left. error says so, and how many of the runs
# the database cut off (finish.exhausted_error).
FAIL_EXHAUSTED = """
UPDATE jobs
SET status = 'failed', error = %(error)s, finished_at = now(), dedup_key = NULL, outages = outages + %(outage)s
WHERE """ + _THIS_RUN + """
"""

# sweep: running jobs of a registered type whose latest sign of life (heartbeat,
# else start) is older than their type's threshold. Silence is never counted
# from before the database's own start, nor from before the sweeper's
# not_before (its reconnection after it lost the database): a worker cut off by
# an outage gets a full stale_after after it, to get its heartbeat in, before
# anyone may judge it dead. A type this worker does not know is left to the
# workers that do (they know its threshold). Locked with SKIP LOCKED so several
# workers sweeping at once each take different rows, and a row a worker is
# finishing right now is left to it.
#
# STALE is that rule, the one definition of a zombie, run by the sweep, the
# operator's requeue (OPERATOR_INSPECT) and the admin's list (JobQuerySet.stale)
# on one clock: the database's now(). Columns unqualified (the jobs row);
# {stale_after}: seconds, an SQL expression. {not_before} is NULL for the
# operator (GREATEST ignores it), who has no outage of their own to forgive:
# for a stale_after after a sweeper's return the admin may list (and requeue) a
# zombie that sweeper still spares. The admin's list and action always agree.
SILENT_SINCE = """GREATEST(started_at, (progress ->> 'updated_at')::timestamptz,
               pg_postmaster_start_time(), {not_before}::timestamptz)"""
STALE = f"""status = 'running'
  AND {SILENT_SINCE} < now() - make_interval(secs => {{stale_after}})"""
SWEEP_STALE = f"""
SELECT j.id, j.type, j.attempts
FROM jobs AS j
JOIN unnest(%(types)s::text[], %(stale_after)s::float8[]) AS cfg(type, stale_after) ON cfg.type = j.type
WHERE {STALE.format(not_before="%(not_before)s", stale_after="cfg.stale_after")}
ORDER BY j.started_at
LIMIT 1000
FOR UPDATE OF j SKIP LOCKED
"""

# The admin's {stale_after}: the type's, from the (type, seconds) arrays, else
# the default: unlike the sweep, it lists a type its process does not know, as
# an operator should see it. Positional parameters, as RawSQL takes them.
TYPE_STALE_AFTER = """COALESCE(
    (SELECT cfg.seconds FROM unnest(%s::text[], %s::float8[]) AS cfg(name, seconds) WHERE cfg.name = type),
    %s)"""

# The zombie list's columns, intervals read off STALE's own terms so the screen
# cannot disagree with the sweep: SILENT_FOR is the silence STALE counts (never
# from before the server's start), PAST_THRESHOLD how far beyond {stale_after}
# it is (positive exactly when STALE holds).
SILENT_FOR = f"now() - {SILENT_SINCE}"
PAST_THRESHOLD = f"now() - make_interval(secs => {{stale_after}}) - {SILENT_SINCE}"

# Operator actions (admin). Same rules as the worker and the sweep: only from
# the states they name, judged by the database (its clock, its rows, locked),
# so a job that moved meanwhile is left alone.

# An operator's view of one job before a requeue: locked, and judged stale
# by the sweep's rule (STALE, without a not_before).
OPERATOR_INSPECT = f"""
SELECT status, attempts, uncounted_attempts, outages, enqueued_key,
       {STALE.format(not_before="NULL", stale_after="%(stale_after)s")} AS stale
FROM jobs
WHERE id = %(id)s
FOR UPDATE
"""

# requeue a failed job: it runs again with the budget it has left (fresh = true:
# the operator forgives every claim so far, uncounted = attempts). attempts is
# kept, so the next claim's token is new. The old outcome is cleared; the
# progress checkpoint kept. It takes its key back: a unique violation means a
# live job holds it, and the requeue is refused.
OPERATOR_REQUEUE_FAILED = """
UPDATE jobs
SET status = 'queued', error = NULL, report = NULL, traceback = NULL, started_at = NULL, finished_at = NULL,
    dedup_key = enqueued_key,
    uncounted_attempts = CASE WHEN %(fresh)s THEN attempts ELSE uncounted_attempts END
WHERE id = %(id)s AND status = 'failed' AND attempts = %(attempt)s
"""

# requeue a zombie now instead of waiting for the sweep: the sweep's put-back
# (REQUEUE_INTERRUPTED, keys included), only for a row OPERATOR_INSPECT found
# stale under its lock. Without attempts left (and no fresh budget) the caller
# runs FAIL_EXHAUSTED instead, as the sweep would.
OPERATOR_REQUEUE_STALE = """
UPDATE jobs
SET status = 'queued', started_at = NULL, dedup_key = COALESCE(dedup_key, enqueued_key),
    uncounted_attempts = CASE WHEN %(fresh)s THEN attempts ELSE uncounted_attempts END
WHERE """ + _THIS_RUN + """
"""

# give up on a live job. A worker still running it finds its fence broken: its
# result is discarded and report_progress raises JobLost.
OPERATOR_FAIL = """
UPDATE jobs
SET status = 'failed', error = %(error)s, finished_at = now(), dedup_key = NULL
WHERE id = ANY(%(ids)s::uuid[]) AND status IN ('queued', 'running')
RETURNING id
"""

# Cancellation (jobs.cancel, the admin's Cancel): one statement for both live
# states, each row judged on its current version under its lock, so a job
# claimed, put back or finished while the cancel runs is cancelled by the rule
# of the state it is then in, never by two rules or none:
# - queued: it never starts. Failed now, as an operator's mark-failed, with
#   error 'cancelled' and the moment asked; key released; the caller runs
#   on_fail in this transaction. SET reads the row as it was (status before).
# - running: only asked (cancel_requested_at, the first ask kept); the run
#   learns it from PROGRESS's RETURNING and ends itself failed 'cancelled'. A
#   run that finishes before it learns it stays as it finished.
# Finished jobs are not touched. RETURNING the new status says which rule applied.
CANCEL = """
UPDATE jobs
SET status = CASE WHEN status = 'queued' THEN 'failed' ELSE status END,
    error = CASE WHEN status = 'queued' THEN 'cancelled' ELSE error END,
    finished_at = CASE WHEN status = 'queued' THEN now() ELSE finished_at END,
    dedup_key = CASE WHEN status = 'queued' THEN NULL ELSE dedup_key END,
    cancel_requested_at = COALESCE(cancel_requested_at, now())
WHERE id = ANY(%(ids)s::uuid[]) AND status IN ('queued', 'running')
RETURNING id, status
"""
