"""The jobs table's seven state rules move from CHECK constraints to one row trigger (issue 22).

PostgreSQL reads every CHECK constraint of a table back from its stored node text, and plans it
again, at each execution of an INSERT or UPDATE (``ExecRelCheck``): for these seven that was about
20 µs of server CPU per statement, half of what an enqueue's INSERT costs the server without its
commit, and paid again by every claim and every finish (docs/benchmarks.md, "The state rules").
A PL/pgSQL trigger is compiled once per session: the same rules cost about a microsecond a row.

Nothing about the rules changes: the same seven, the same names, the same SQLSTATE (23514,
``check_violation``, an ``IntegrityError`` in Django) with the rule's name as the error's constraint,
a rule broken only when it is false (as a CHECK: NULL passes), tried in the order PostgreSQL tried the
constraints (by name), so a row breaking two reports the same one. ``tests/jobs/test_state_rules.py``
breaks each. The priority bounds are ``jobs.registry.MIN_PRIORITY`` and ``MAX_PRIORITY``.

The trigger is created before the constraints go, in one transaction: no row is ever unguarded.
"""

from django.db import migrations

FUNCTION = """
CREATE FUNCTION jobs_check_states() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    broken text;
BEGIN
    broken := CASE
        WHEN (NEW.attempts >= 0) IS FALSE THEN 'jobs_attempts_non_negative'
        WHEN ((NEW.finished_at IS NOT NULL AND NEW.status IN ('done', 'failed'))
              OR (NEW.finished_at IS NULL AND NEW.status IN ('queued', 'running'))) IS FALSE
            THEN 'jobs_finished_at_matches_status'
        WHEN (NEW.priority >= -100 AND NEW.priority <= 100) IS FALSE THEN 'jobs_priority_in_range'
        WHEN (NEW.queue_name <> '') IS FALSE THEN 'jobs_queue_name_not_empty'
        WHEN (NEW.status <> 'running' OR NEW.started_at IS NOT NULL) IS FALSE THEN 'jobs_running_has_started_at'
        WHEN (NEW.status IN ('queued', 'running', 'done', 'failed')) IS FALSE THEN 'jobs_status_valid'
        WHEN (NEW.outages >= 0 AND NEW.uncounted_attempts >= 0 AND NEW.uncounted_attempts <= NEW.attempts) IS FALSE
            THEN 'jobs_uncounted_within_attempts'
    END;
    IF broken IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "%" violates check constraint "%"', TG_TABLE_NAME, broken
            USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA;
    END IF;
    RETURN NEW;
END
$$
"""
TRIGGER = "CREATE TRIGGER jobs_state_rules BEFORE INSERT OR UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_check_states()"
RULES = [
    "jobs_status_valid",
    "jobs_finished_at_matches_status",
    "jobs_running_has_started_at",
    "jobs_attempts_non_negative",
    "jobs_priority_in_range",
    "jobs_queue_name_not_empty",
    "jobs_uncounted_within_attempts",
]


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0009_claim_order_index"),
    ]

    operations = [
        migrations.RunSQL(
            sql=[FUNCTION, TRIGGER],
            reverse_sql=["DROP TRIGGER jobs_state_rules ON jobs", "DROP FUNCTION jobs_check_states()"],
        ),
        *(migrations.RemoveConstraint(model_name="job", name=name) for name in RULES),
    ]
