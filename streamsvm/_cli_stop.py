"""How ``streamsvm train`` stops on SIGINT/SIGTERM: the first signal asks the run to finish
its iteration and write a checkpoint (the solver polls the event), a second one gives up at
once (``KeyboardInterrupt``)."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

__all__ = ["graceful_stop"]


@contextlib.contextmanager
def graceful_stop(command: str = "train"):
    """Yields a :class:`threading.Event` set by the first SIGINT or SIGTERM; the previous
    handlers are restored on exit."""
    stop = threading.Event()

    def on_signal(signum, frame):
        if stop.is_set():          # second signal: give up at once
            raise KeyboardInterrupt
        stop.set()
        print(f"\nstreamsvm {command}: {signal.Signals(signum).name} received: finishing the "
              f"current iteration and writing a checkpoint", file=sys.stderr)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, h in old.items():
            signal.signal(s, h)
