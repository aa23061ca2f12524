"""The doubling delay every retry in the project waits, capped: a pure decision, table-tested."""

from __future__ import annotations


def doubling(attempts: int, first: float, cap: float) -> float:
    """Seconds to wait after ``attempts`` consecutive failures: ``first``, doubling per failure, at most ``cap``.

    With first 10 and cap 3600: 0 → 0, 1 → 10, 2 → 20, 3 → 40, 9 → 2560, 10 → 3600, 50 → 3600.
    """
    if attempts < 1:
        return 0.0
    # The exponent is bounded before it is raised: 2 ** 10000 would be a float overflow, not a long wait.
    return float(min(cap, first * 2 ** min(attempts - 1, 62)))
