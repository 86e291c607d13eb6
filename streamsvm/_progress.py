"""Progress that fits where it goes: a tqdm bar on a terminal (or in a notebook), and with
stderr redirected to a file or a pipe, one plain line every few seconds (done, rate, time
left, the caller's status) and a final summary line, instead of a stream of carriage-return
bar frames glued into one line of a log.

:func:`progress_bar` takes tqdm's arguments and returns either a tqdm bar or a
:class:`LogLines` with the part of tqdm's interface the package uses (``update``, ``n``,
``set_postfix_str``, ``set_description``, ``close``).
"""

from __future__ import annotations

import sys
import time

__all__ = ["LogLines", "progress_bar", "LOG_EVERY"]

LOG_EVERY = 10.0        # seconds between two plain progress lines


def progress_bar(*, total, desc: str, unit: str = "it", initial: float = 0,
                 unit_scale: bool = False, cap: bool = False, file=None, **tqdm_kwargs):
    """A progress display for ``total`` units (``cap``: ``total`` is a limit the work may
    stop short of, as ``max_passes``, so the time left is an upper bound): a tqdm bar when
    ``file`` (stderr by default) is a terminal or the code runs in a notebook, else
    :class:`LogLines`."""
    file = sys.stderr if file is None else file
    if _interactive(file):
        from tqdm.auto import tqdm
        return tqdm(total=total, desc=desc, unit=unit, initial=initial, unit_scale=unit_scale,
                    dynamic_ncols=True, file=file, **tqdm_kwargs)
    return LogLines(total=total, desc=desc, unit=unit, initial=initial, unit_scale=unit_scale,
                    cap=cap, file=file)


def _interactive(file) -> bool:
    try:
        if file.isatty():
            return True
    except (AttributeError, ValueError):
        return False
    return "ipykernel" in sys.modules


class LogLines:
    """Progress as plain lines (module doc): at most one every ``every`` seconds, and a
    summary when closed (``every``: :data:`LOG_EVERY` unless given); ``clock`` is ``time.monotonic`` unless a test passes its own."""

    def __init__(self, *, total, desc, unit="it", initial=0, unit_scale=False, cap=False,
                 file=None, every: float | None = None, clock=time.monotonic):
        self.total, self.desc, self.unit = total, desc, unit
        self.n = initial
        self.unit_scale, self.cap, self.clock = unit_scale, cap, clock
        self.every = LOG_EVERY if every is None else every
        self.file = sys.stderr if file is None else file
        self.postfix = ""
        self.t0 = self.last = clock()
        self.n0 = initial
        self.closed = False

    def update(self, n: float = 1) -> None:
        self.n += n
        self._maybe_write()

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        """The status after the amount; with ``refresh`` a line is written when one is due
        (without, the next :meth:`update` writes it, as tqdm's bar would refresh)."""
        self.postfix = s
        if refresh:
            self._maybe_write()

    def set_description(self, desc: str = "", refresh: bool = True) -> None:
        self.desc = desc

    def refresh(self) -> None:
        self._maybe_write()

    def close(self) -> None:
        """The summary line: done, elapsed, mean rate, the last status."""
        if self.closed:
            return
        self.closed = True
        elapsed = self.clock() - self.t0
        rate = (self.n - self.n0) / elapsed if elapsed > 0 else 0.0
        self._write(f"{self.desc}: finished, {self._amount()} in {_duration(elapsed)} "
                    f"({self._qty(rate)}/s)")

    def _maybe_write(self) -> None:
        now = self.clock()
        if now - self.last < self.every or self.closed:
            return
        self.last = now
        elapsed = now - self.t0
        rate = (self.n - self.n0) / elapsed if elapsed > 0 else 0.0
        left = ""
        if self.total and rate > 0 and self.n < self.total:
            bound = "at most " if self.cap else ""
            left = f", {bound}{_duration((self.total - self.n) / rate)} left"
        self._write(f"{self.desc}: {self._amount()} [{_duration(elapsed)} elapsed{left}, "
                    f"{self._qty(rate)}/s]")

    def _amount(self) -> str:
        if not self.total:
            return self._qty(self.n)
        if self.cap:                        # a limit, not the work's size: no percentage
            return f"{self._qty(self.n)} (at most {self._qty(self.total, unit=False)})"
        return (f"{self._qty(self.n, unit=self.unit_scale)}/{self._qty(self.total)} "
                f"({100 * self.n / self.total:.0f}%)")

    def _qty(self, x: float, unit: bool = True) -> str:
        """``x`` units, with binary prefixes when ``unit_scale`` (``12.5 MiB``)."""
        prefix = ""
        if self.unit_scale:
            for prefix in ("", "Ki", "Mi", "Gi", "Ti"):
                if abs(x) < 1024 or prefix == "Ti":
                    break
                x /= 1024
        num = f"{x:.0f}" if x == int(x) else f"{x:.1f}" if prefix else f"{x:.2f}"
        return f"{num} {prefix}{self.unit}" if unit else f"{num} {prefix}".rstrip()

    def _write(self, line: str) -> None:
        if self.postfix:
            line += " " + self.postfix
        try:
            print(line, file=self.file, flush=True)
        except (OSError, ValueError):       # a closed or full log: progress is not worth dying
            pass


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"
