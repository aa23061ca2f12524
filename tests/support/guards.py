"""A hang guard for hostile inputs whose danger is never finishing (quadratic parsers, 2**32 loops).

Not a performance goal — those live in bench/. The bound is far above the
input's honest cost and far below what the unguarded code would take, so a
loaded machine does not trip it and a regression does not pass it.
"""

import contextlib
import signal


class DidNotFinish(AssertionError):
    pass


@contextlib.contextmanager
def finishes_within(seconds: int, what: str):
    """Fail the test (instead of hanging the suite) if the block runs past ``seconds``."""
    def give_up(signum, frame):
        raise DidNotFinish(f"{what} still running after {seconds} s: the guard against this input is gone")

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
