"""Progress that fits where it goes: a bar on a terminal, plain lines (no carriage returns)
when stderr is a file or a pipe, and ``-q`` removing the display but not the result."""

from __future__ import annotations

import io

import pytest

from streamsvm import _progress
from streamsvm._progress import LogLines, progress_bar
from streamsvm.cli import main

from .conftest import data_file


class _Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_log_lines_are_spaced_by_the_interval_and_end_with_a_summary():
    clock, out = _Clock(), io.StringIO()
    bar = LogLines(total=200, desc="dcd", unit="pass", cap=True, file=out, every=10,
                   clock=clock)
    for _ in range(25):                     # 2 s and 0.5 passes per update: 50 s in all
        clock.t += 2
        bar.update(0.5)
        bar.set_postfix_str("gap~1.00e-02")
    bar.close()
    bar.close()                             # closing twice says it once
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert len(lines) == 5 + 1              # at 10, 20, 30, 40, 50 s; then the summary
    assert lines[0] == ("dcd: 2.50 pass (at most 200) [00:10 elapsed, at most 13:10 left, "
                        "0.25 pass/s] gap~1.00e-02")
    assert lines[-1] == "dcd: finished, 12.50 pass (at most 200) in 00:50 (0.25 pass/s) " \
                        "gap~1.00e-02"


def test_log_lines_scale_bytes_and_say_the_share_done():
    clock, out = _Clock(), io.StringIO()
    bar = LogLines(total=4 << 30, desc="convert", unit="B", unit_scale=True, file=out,
                   every=5, clock=clock)
    clock.t += 5
    bar.set_postfix_str("1,000 rows", refresh=False)    # as the callers: status, amount
    bar.update(1 << 30)
    assert out.getvalue() == ("convert: 1 GiB/4 GiB (25%) [00:05 elapsed, 00:15 left, "
                              "204.8 MiB/s] 1,000 rows\n")


def test_a_terminal_gets_a_bar_and_a_file_gets_lines():
    class Tty(io.StringIO):
        def isatty(self):
            return True
    from tqdm.auto import tqdm
    bar = progress_bar(total=3, desc="x", file=Tty())
    assert isinstance(bar, tqdm)
    bar.close()
    assert isinstance(progress_bar(total=3, desc="x", file=io.StringIO()), LogLines)


@pytest.fixture
def dna_svm():
    return data_file("dna/dna.scale")


def test_train_and_convert_write_plain_lines_to_a_redirected_stderr(dna_svm, tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.setattr(_progress, "LOG_EVERY", 0.0)    # a line at every update
    store = tmp_path / "dna.zarr"
    assert main(["convert", str(dna_svm), str(store), "--chunk-rows", "500"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"wrote {store}")
    assert "\r" not in err and err.splitlines()[-1].startswith("convert: finished, ")
    assert main(["train", str(store), "-o", str(tmp_path / "m.json"), "--solver", "dcd",
                 "--loss", "hinge", "--no-slab", "--max-passes", "4"]) == 0
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert "\r" not in err and len(lines) >= 2          # at least one line, and the summary
    assert all(line.startswith("dcd: ") for line in lines)
    assert "pass (at most 4) [" in lines[0] and "gap" in lines[0]
    assert lines[-1].startswith("dcd: finished, ")
    assert out.startswith(f"wrote {tmp_path / 'm.json'}: ")


def test_quiet_removes_the_progress_but_not_the_result(dna_svm, tmp_path, capsys):
    store = tmp_path / "dna.zarr"
    assert main(["convert", str(dna_svm), str(store), "-q"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"wrote {store}: 2,000 rows") and err == ""
    assert main(["train", str(store), "-o", str(tmp_path / "m.json"), "-q"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"wrote {tmp_path / 'm.json'}: ") and err == ""


def test_a_warning_is_one_line_naming_the_flags(dna_svm, tmp_path):
    """Run as a user runs it (a process: pytest records warnings in-process)."""
    import subprocess
    import sys
    store = tmp_path / "dna.zarr"
    assert main(["convert", str(dna_svm), str(store), "-q"]) == 0
    run = subprocess.run([sys.executable, "-m", "streamsvm", "train", str(store), "-o",
                          str(tmp_path / "m.json"), "--no-slab", "--max-passes", "2"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    warning = [line for line in run.stderr.splitlines() if "warning" in line]
    assert warning == [
        line for line in warning if line.startswith("streamsvm train: warning: dcd reached "
                                                    "--max-passes 2 after 2 passes (+1 certifying "
                                                    "pass: an exact check of the newest "
                                                    "weights)")]
    assert len(warning) == 1 and "increase --max-passes or --tol." in warning[0]
    assert "> --tol 0.001;" in warning[0] and "---" not in warning[0]
    assert "cli.py" not in run.stderr and "model, result" not in run.stderr
