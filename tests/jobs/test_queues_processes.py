"""Queues and scheduled jobs with real ``runjobs`` processes (issue 21 §2)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from jobs.models import Job, JobStatus
from jobs.queue import enqueue
from tests.support.processes import runjobs, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("test_types")]


def db_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def test_each_worker_claims_only_the_queues_it_was_given(executions, processes):
    imports = [enqueue("test_record", org_id="demo", queue_name="imports").id for _ in range(4)]
    mail = [enqueue("test_record", org_id="demo", queue_name="mail").id for _ in range(4)]
    other = enqueue("test_record", org_id="demo", queue_name="reports").id
    a = processes(runjobs, "--burst", "--queue", "imports")
    b = processes(runjobs, "--burst", "--queue", "mail,default")
    assert a.wait(timeout=60) == 0
    assert b.wait(timeout=60) == 0
    by_pid = {job_id: pid for job_id, pid in executions("SELECT job_id, pid FROM test_executions")}
    assert {by_pid[j] for j in imports} == {a.pid}
    assert {by_pid[j] for j in mail} == {b.pid}
    assert other not in by_pid and Job.objects.get(pk=other).status == JobStatus.QUEUED
    assert Job.objects.get(pk=imports[0]).worker_ids[0].endswith(f":{a.pid}")


def test_a_bad_queue_name_stops_runjobs_at_start_with_a_clear_error(processes):
    worker = processes(runjobs, "--queue", "imports,,mail")
    assert worker.wait(timeout=60) != 0
    assert "--queue" in worker.output() and "queue name" in worker.output()


def test_a_scheduled_job_wakes_an_idle_listening_worker_at_its_time_not_at_its_next_poll(executions, processes):
    # Polls every 20-40 s: a run within a few seconds of run_after comes from the capped wait.
    worker = processes(runjobs, "--poll-interval", "30")
    run_after = db_now() + timedelta(seconds=4)
    scheduled = enqueue("test_record", org_id="demo", run_after=run_after).id
    wait_for(lambda: Job.objects.get(pk=scheduled).status == JobStatus.DONE, timeout=15,
             message="the worker to wake for the scheduled job")
    started = Job.objects.get(pk=scheduled).started_at
    assert started >= run_after  # never before its time, on the database's clock
    assert [row[0] for row in executions("SELECT pid FROM test_executions")] == [worker.pid]
