"""The database backend of the embedded server: PostgreSQL's, attaching to the server on first connect.

Settings name it (ENGINE ``seoinsight.embedded_db``) when DATABASE_URL is unset, so
importing them, ``manage.py help`` or ``check`` start nothing. The first connection of a
process starts or attaches to the server and writes its socket into the settings entry
(HOST, PORT), for what reads them afterwards: psql (``dbshell``), the DATABASE_URL the
tests give their subprocesses.
"""

from pathlib import Path

from django.db.backends.postgresql import base, client

from . import attach


class DatabaseClient(client.DatabaseClient):
    def runshell(self, parameters):
        self.connection.attach_embedded()
        super().runshell(parameters)


class DatabaseWrapper(base.DatabaseWrapper):
    client_class = DatabaseClient

    def attach_embedded(self) -> None:
        if not self.settings_dict["HOST"]:
            embedded = self.settings_dict["EMBEDDED"]
            host, port = attach(Path(embedded["PGDATA"]), embedded["DATABASE"])
            self.settings_dict.update(HOST=host, PORT=port)

    def get_connection_params(self):
        self.attach_embedded()
        return super().get_connection_params()
