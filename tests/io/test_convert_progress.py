"""convert's progress bar: rows parsed so far (not the writer's lagging count) and their rate."""

from __future__ import annotations

import re
import time

import pytest

from streamsvm.io import convert
from streamsvm.io._convert import _Progress


class FakeBar:
    """What _Progress uses of a tqdm bar; ``start_t`` on tqdm's own clock, like tqdm."""

    def __init__(self):
        self.start_t = time.time()
        self.n, self.postfix, self.desc, self.closed = 0, None, "convert", False

    def update(self, n):
        self.n += n

    def set_postfix_str(self, s, refresh=True):
        self.postfix = s

    def set_description(self, desc):
        self.desc = desc

    def close(self):
        self.closed = True


def _clock(*times):
    it = iter(times)
    return lambda: next(it)


def test_rows_and_rate_on_one_clock():
    bar = FakeBar()
    p = _Progress(bar, clock=_clock(100.0, 102.0, 104.0))
    p.advance(1000, 500)
    assert bar.n == 1000 and bar.postfix == "500 rows, 250 rows/s"
    p.advance(1000, 300)
    assert bar.postfix == "800 rows, 200 rows/s"


def test_resumed_rows_shown_but_not_in_the_rate():
    bar = FakeBar()
    p = _Progress(bar, rows=1000, clock=_clock(0.0, 4.0))
    p.advance(10, 400)
    assert bar.postfix == "1,400 rows, 100 rows/s"


def test_shuffle_scatter_then_gather():
    bar = FakeBar()
    p = _Progress(bar, clock=_clock(0.0, 1.0, 10.0, 10.0, 12.0))
    p.advance(10, 500)                       # scatter: rows read into the buckets
    assert bar.postfix == "500 rows, 500 rows/s"
    p.start_gather()                         # gather: rows from the buckets to the writer
    assert bar.desc.startswith("shuffle") and bar.postfix.startswith("0/500 rows")
    p.gathered(300)
    assert bar.postfix == "300/500 rows, 150 rows/s"


def test_no_bar():
    p = _Progress(None)
    p.advance(10, 5)
    p.start_gather()
    p.gathered(5)
    p.close()
    assert p.rows == 5


def _last_bar(err: str) -> str:
    return [s for s in re.split(r"[\r\n]", err) if s.strip()][-1]


@pytest.mark.parametrize("shuffle", [False, True])
def test_bar_shows_every_row_at_the_end(shuffle, tmp_path, capsys):
    n = 3000
    src = tmp_path / "t.svm"
    src.write_text("".join(f"{1 if i % 3 else -1} {1 + i % 7}:1 9:{i % 5 + 1}\n"
                           for i in range(n)))
    store = convert(str(src), str(tmp_path / "s.zarr"), chunk_rows=100, shuffle=shuffle,
                    progress=True, block_bytes=256)
    assert store.n_rows == n
    bar = _last_bar(capsys.readouterr().err)
    assert (f"{n:,}/{n:,} rows, " if shuffle else f"{n:,} rows, ") in bar, bar
