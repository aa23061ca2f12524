"""Benchmarks of the queue, the imports and the mail intake, each against a ceiling measured in the same run.

Run from the project root, one module each (docs/benchmarks.md says what they measure)::

    .venv/bin/python -m bench.queue
    .venv/bin/python -m bench.imports
    .venv/bin/python -m bench.mail

``bench.common`` holds what they share: the throw-away database, the app's
processes, peak RSS, and the report's table.
"""
