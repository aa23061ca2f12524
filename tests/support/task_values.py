"""A @task returning, by name, a value JSON would not give back as it is (tests/jobs/test_task_values.py).

Its job type is registered at import and at every enqueue; the ``tasks`` fixture's ``loaded_tasks``
removes it with the other task types afterwards.
"""

import math

from jobs.tasks import task


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


UNFAITHFUL = {
    "nan": {"ratio": math.nan},
    "infinity": [1.5, math.inf],
    "minus infinity": {"low": -math.inf},
    "nul": {"name": "a\x00b"},
    "nul in a key": {"key\x00": 1},
    "lone surrogate": "caf\udce9",
    # The review's {1: "one", True: "t"}: one key in Python already, {1: "t"}, which JSON reads back as {"1": "t"}.
    "int keys": dict([(1, "one"), (True, "t")]),
    "too deep": _nested(100),  # a report is cut at jobs.storable.MAX_REPORT_DEPTH (64)
}


@task
def returns(kind):
    return UNFAITHFUL[kind]
