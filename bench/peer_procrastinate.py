"""procrastinate's side of the queue benchmark's peers: an app on the bench database and its no-op task.

Loaded by procrastinate's CLI in the peer's own process (``python -m procrastinate --app
bench.peer_procrastinate.app worker …``) and by ``bench.peers``' enqueue timing; never by the app.
The connection comes from libpq's environment (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE),
which ``bench.peers`` sets to the bench database.
"""

from procrastinate import App, PsycopgConnector

app = App(connector=PsycopgConnector(conninfo=""))


@app.task(name="noop")
def noop() -> None:
    """A plain function, as runjobs' ``noop`` handler is: procrastinate runs it in a thread of its event loop."""
