"""Benchmarks of the queue, the imports, the mail intake and the outbox, each against a baseline of the same run.

Run from the project root, one module each (docs/benchmarks.md says what they measure)::

    .venv/bin/python -m bench.queue
    .venv/bin/python -m bench.imports
    .venv/bin/python -m bench.mail
    .venv/bin/python -m bench.mail_api     # Gmail and Graph against IMAP
    .venv/bin/python -m bench.live         # append -> Request, IDLE against polling
    .venv/bin/python -m bench.outbox       # outbox delivery against plain POSTs
    .venv/bin/python -m bench.mail_scale   # 1,000 idle mailboxes, 1 and 3 pollers

``bench.common`` holds what they share: the throw-away database, the app's
processes, peak RSS, and the report's table.
"""
