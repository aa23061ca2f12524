"""The process list under real processes: each runjobs and pollmail is listed while it runs, says what it
works on, leaves on exit and ages out when killed; its JSON log lines name the job and org."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys
from datetime import timedelta

import pytest
from django.db.models import F

from jobs import processes as process_list
from jobs.models import Process
from jobs.queue import enqueue
from seoinsight.logs import ContextFilter, JsonFormatter
from tests.support.processes import ManagedProcess, process_env, runjobs, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

ORG = "process-list-org"


def entry_of(proc) -> Process | None:
    return Process.objects.filter(pid=proc.pid, host=socket.gethostname()).first()


@pytest.fixture
def no_processes():
    Process.objects.all().delete()


def test_a_worker_is_listed_says_its_job_and_logs_json_with_job_and_org(executions, processes, test_types,
                                                                         no_processes):
    worker = processes(runjobs, LOG_FORMAT="json")
    entry = wait_for(lambda: entry_of(worker), timeout=30, message="the worker's process entry")
    assert entry.kind == "runjobs"

    job = enqueue("test_slow", org_id=ORG, payload={"sleep": 2})
    wait_for(lambda: f"job={job.id} type=test_slow" in (entry_of(worker).doing or ""), timeout=30,
             message="the entry naming the running job")
    wait_for(lambda: entry_of(worker).doing == "", timeout=30, message="the entry idle again")

    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
    assert entry_of(worker) is None

    lines = [json.loads(line) for line in worker.output().splitlines() if line.strip()]
    (done,) = [line for line in lines if line.get("job") == str(job.id) and " done in " in line["message"]]
    assert done["org"] == ORG and done["level"] == "INFO" and done["pid"] == worker.pid
    assert not [line for line in lines if "worker started" in line["message"] and "job" in line]


def test_a_poller_is_listed_and_leaves_on_sigterm(processes, tmp_path, no_processes):
    poller = processes(lambda: ManagedProcess("pollmail", "--interval", "0.5",
                                              env=process_env(MEDIA_ROOT=tmp_path)))
    entry = wait_for(lambda: entry_of(poller), timeout=30, message="the poller's process entry")
    assert entry.kind == "pollmail" and entry.doing == ""

    poller.signal(signal.SIGTERM)
    assert poller.wait(timeout=30) == 0
    assert entry_of(poller) is None


def test_a_killed_process_stays_until_silent_past_forget_after_then_ages_out(processes, no_processes):
    victim = processes(runjobs)
    wait_for(lambda: entry_of(victim), timeout=30, message="the worker's process entry")
    victim.kill9()
    assert entry_of(victim) is not None  # nobody removed it: it only stops being refreshed

    fresh = Process.objects.create(kind="pollmail", host="other-host", pid=1)
    Process.objects.filter(pid=victim.pid).update(
        heartbeat_at=F("heartbeat_at") - timedelta(seconds=process_list.FORGET_AFTER + 1))

    assert process_list.forget_dead() == 1
    assert entry_of(victim) is None
    assert Process.objects.filter(pk=fresh.pk).exists()


def test_the_admin_lists_live_processes_to_superusers_only(admin_client, client, django_user_model, no_processes):
    live = Process.objects.create(kind="runjobs", host="web-1", pid=11, doing="job=0190 type=noop")
    quiet = Process.objects.create(kind="pollmail", host="web-2", pid=12)
    gone = Process.objects.create(kind="pollmail", host="web-3", pid=13)
    Process.objects.filter(pk=quiet.pk).update(heartbeat_at=F("heartbeat_at") - timedelta(minutes=5))
    Process.objects.filter(pk=gone.pk).update(heartbeat_at=F("heartbeat_at") - timedelta(hours=1))

    html = admin_client.get("/admin/jobs/process/").content.decode()

    assert "web-1" in html and "job=0190 type=noop" in html and "running" in html
    assert "web-2" in html and "not seen for 5 min" in html
    assert "web-3" not in html
    assert admin_client.get(f"/admin/jobs/process/{live.pk}/change/").status_code == 200
    assert admin_client.get("/admin/jobs/process/add/").status_code == 403

    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(staff)
    assert client.get("/admin/jobs/process/").status_code == 403



def test_an_entry_forgotten_while_its_process_lives_is_inserted_again(no_processes):
    entry = process_list.ProcessEntry("runjobs", every=30)
    entry.start()
    try:
        assert entry.registered.wait(10)
        first = entry.pk
        Process.objects.filter(pk=first).delete()  # another process judged it dead (a long partition)

        with process_list.doing(mailbox=7):  # a change of work refreshes at once, not after ``every``
            again = wait_for(lambda: Process.objects.filter(pid=os.getpid(), doing="mailbox=7").first(),
                             timeout=10, message="the entry inserted again")
        assert again.pk != first and again.kind == "runjobs"
    finally:
        entry.stop()
    assert not Process.objects.filter(pid=os.getpid()).exists()


def test_doing_names_the_mailbox_and_org_of_every_json_log_line_inside_and_only_inside():
    def line(message, exc_info=None) -> dict:
        record = logging.LogRecord("mailpoll.test", logging.WARNING, __file__, 1, message, (), exc_info)
        ContextFilter().filter(record)
        text = JsonFormatter().format(record)
        assert "\n" not in text
        return json.loads(text)

    with process_list.doing(mailbox=7, org="acme"):
        try:
            raise ValueError("bad\nthing")
        except ValueError:
            inside = line("mailbox=7 poll failed", sys.exc_info())
    outside = line("poller stopped")

    assert (inside["mailbox"], inside["org"], inside["message"]) == ("7", "acme", "mailbox=7 poll failed")
    assert "ValueError: bad" in inside["exc"] and "job" not in inside
    assert not {"job", "mailbox", "org"} & outside.keys()


@pytest.mark.parametrize(("now", "last", "every", "expected"), [
    (0.0, None, 60, True),  # the first refresh (at registration) forgets the dead
    (59.9, 0.0, 60, False),
    (60.0, 0.0, 60, True),
    (1000.0, 10.0, 60, True),
    (5.0, 5.0, 0, True),  # 0: at every refresh
])
def test_when_a_refresh_forgets_the_dead(now, last, every, expected):
    assert process_list.forget_due(now, last, every) is expected


def test_the_dead_are_forgotten_at_registration_and_then_not_at_every_refresh(no_processes):
    long_dead = timedelta(seconds=process_list.FORGET_AFTER + 1)
    before = Process.objects.create(kind="runjobs", host="gone-host", pid=1)
    Process.objects.filter(pk=before.pk).update(heartbeat_at=F("heartbeat_at") - long_dead)
    entry = process_list.ProcessEntry("pollmail", every=30, forget_every=3600)
    entry.start()
    try:
        assert entry.registered.wait(10)
        assert not Process.objects.filter(pk=before.pk).exists()  # the first refresh forgot it

        after = Process.objects.create(kind="runjobs", host="gone-host", pid=2)
        Process.objects.filter(pk=after.pk).update(heartbeat_at=F("heartbeat_at") - long_dead)
        with process_list.doing(mailbox=8):  # a refresh, at once
            wait_for(lambda: Process.objects.filter(pk=entry.pk, doing="mailbox=8").exists(), timeout=10,
                     message="the refresh")
        assert Process.objects.filter(pk=after.pk).exists()  # not due for an hour: left for a later refresh
    finally:
        entry.stop()
