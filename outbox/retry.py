"""How long a document waits after a failed try: a pure decision, table-tested."""

from __future__ import annotations


def delay(attempts: int, base: float, maximum: float) -> float:
    """Seconds before the next try of a document that has now failed ``attempts`` times.

    Doubles per try from ``base``, capped at ``maximum``, so an outage costs few
    requests and a recovered downstream is retried within ``maximum``. With base
    10 and maximum 3600: 1 → 10, 2 → 20, 3 → 40, 9 → 2560, 10 → 3600, 50 → 3600.
    """
    if attempts < 1:
        return 0.0
    # The exponent is bounded before it is raised: 2 ** 10000 would be a float overflow, not a long wait.
    return float(min(maximum, base * 2 ** min(attempts - 1, 62)))
