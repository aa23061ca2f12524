"""Issue 9 item 11 with the real fault: three database restarts during one job do not use up its attempts."""

import pytest

from tests.jobs.test_database_outage import DB, execute, outage_server, query  # noqa: F401  (a fixture)
from tests.support.processes import runjobs, wait_for

pytestmark = pytest.mark.processes

RESTARTS = 3  # as many as test_record's max_attempts: each one used to count


def test_three_restarts_during_one_job_leave_its_budget_whole(outage_server, processes):  # noqa: F811
    server = outage_server
    execute(server, "INSERT INTO jobs (org_id, type, payload) VALUES ('outage', 'test_record', '{\"sleep\": 2}')")
    ((job_id,),) = query(server, "SELECT id FROM jobs")
    worker = processes(runjobs, DATABASE_URL=server.url(DB))

    def runs_started():
        rows = query(server, "SELECT count(*) FROM test_executions WHERE job_id = %s", [job_id])
        return rows[0][0] if rows else 0

    for n in range(1, RESTARTS + 1):
        wait_for(lambda n=n: runs_started() >= n, timeout=60, message=f"run {n} to start")
        server.restart()  # while run n sleeps: its end finds its connection gone

    def finished():
        rows = query(server, "SELECT status FROM jobs WHERE id = %s", [job_id])
        return rows and rows[0][0] in ("done", "failed")

    wait_for(finished, timeout=90, message="the job to finish")
    assert query(server, "SELECT status, error, attempts, outages, attempts - uncounted_attempts FROM jobs"
                         " WHERE id = %s", [job_id]) == [("done", None, RESTARTS + 1, RESTARTS, 1)]
    assert worker.alive()
