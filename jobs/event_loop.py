"""One asyncio event loop per process, for the async task functions a worker runs.

The loop runs forever in a daemon thread of its own, started on first use. ``run(coro)`` hands a
coroutine to it and blocks the calling thread until it ends, so several worker threads
(``runjobs --concurrency N``) share one loop, and async tasks of one process can share what is
bound to a loop (a client session, a connection pool) instead of each run building and tearing
down a loop of its own.

A forked child has no loop thread: it starts its own on first use.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine

THREAD_NAME = "jobs-event-loop"
# Seconds between two looks of a waiting caller at an exception raised into its thread.
WAIT_SLICE = 0.1

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def run(coro: Coroutine):
    """Run ``coro`` on the process's loop and return its result (or raise its exception).

    If the caller stops waiting (a signal's or another thread's exception raised into its
    thread), the coroutine is cancelled rather than left running unobserved. Calling this from the loop's own thread would
    wait on itself forever, so that is a RuntimeError.
    """
    loop = _running_loop()
    if threading.current_thread() is _thread:
        coro.close()
        raise RuntimeError("jobs.event_loop.run() called from the event loop's own thread; await the coroutine")
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        while True:
            # Waiting in slices, not in one blocking call: an exception raised into this thread
            # from another (the timeout watchdog's, jobs.timeouts) is delivered only between two
            # bytecodes, never inside a lock's wait.
            try:
                return future.result(timeout=WAIT_SLICE)
            except TimeoutError:
                if future.done():
                    return future.result()  # done meanwhile, or the coroutine's own TimeoutError
    except BaseException:
        future.cancel()
        raise


def stop(timeout: float = 5.0) -> None:
    """Stop and close the loop (tests; an exiting process need not: the thread is a daemon)."""
    global _loop, _thread
    with _lock:
        loop, thread = _loop, _thread
        _loop = _thread = None
    if loop is None:
        return
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout)
    if not thread.is_alive():
        loop.close()


def _running_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            new_loop = asyncio.new_event_loop()
            thread = threading.Thread(target=_serve, args=(new_loop,), name=THREAD_NAME, daemon=True)
            thread.start()
            _loop, _thread = new_loop, thread
        return _loop


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    loop.run_forever()


def _forget_after_fork() -> None:
    # The child inherits the parent's loop object but not its thread; a new one starts on first use.
    global _lock, _loop, _thread
    _lock, _loop, _thread = threading.Lock(), None, None


os.register_at_fork(after_in_child=_forget_after_fork)
