"""A real SMTP server on loopback (aiosmtpd) for the alert digests: it keeps what it accepted and can refuse first."""

from __future__ import annotations

import email
import email.policy
import socket
import threading

from aiosmtpd.controller import Controller


class Mailbox:
    """aiosmtpd's handler: refuses the first ``refuse`` messages with a 5xx, then accepts and keeps each one."""

    def __init__(self, refuse: int = 0):
        self.refuse = refuse
        self.refused = 0
        self.received: list[email.message.EmailMessage] = []
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            if self.refused < self.refuse:
                self.refused += 1
                return "554 5.7.1 Refused for this test"
            self.received.append(email.message_from_bytes(envelope.original_content, policy=email.policy.default))
        return "250 2.0.0 OK"


class SmtpServer:
    def __init__(self, refuse: int = 0):
        self.mailbox = Mailbox(refuse)
        # aiosmtpd's start checks the port it was given by connecting to it: a free one is chosen first.
        self.port = free_port()
        self.controller = Controller(self.mailbox, hostname="127.0.0.1", port=self.port)

    def start(self) -> SmtpServer:
        self.controller.start()
        return self

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    @property
    def received(self):
        return list(self.mailbox.received)

    def stop(self) -> None:
        self.controller.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
