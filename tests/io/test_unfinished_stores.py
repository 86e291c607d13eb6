"""What an interrupted or failed conversion leaves, and what every command says about it.

A conversion killed before it wrote its first attributes (a bare Zarr group of ours) is an
unfinished store without a resume point: ``convert`` restarts it with or without
``--resume``, ``--overwrite`` replaces it. A conversion that fails on bad input leaves
nothing (no resume can fix the input). ``verify`` and ``train`` say the same of an
unfinished store. Values that underflow to 0 in the store's dtype are counted and reported.
"""

from __future__ import annotations

import logging

import pytest
import zarr

import streamsvm as ss
from streamsvm.cli import main
from streamsvm.exceptions import IncompleteStoreError, StoreNotFoundError
from streamsvm.io import convert, read_meta

from .helpers import stop_at_first_resume_point

TEXT = "".join(f"{1 if i % 3 else -1} 1:{i % 7 + 1} 4:0.5\n" for i in range(3000))


def _bare_group(path, arrays=("indptr", "indices", "data", "y_raw")):
    """What a conversion killed between creating its group and writing its attributes left
    (before the converter created the group with them)."""
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    for name in arrays:
        g.create_array(name, shape=(0,), dtype="int64", chunks=(16,))
    assert read_meta(str(path)) is None


@pytest.mark.parametrize("flags", [[], ["--resume"], ["--overwrite"]])
@pytest.mark.parametrize("arrays", [(), ("indptr", "indices", "data", "y_raw")])
def test_bare_group_is_an_unfinished_store(tmp_path, capsys, flags, arrays):
    src = tmp_path / "in.svm"
    src.write_text(TEXT)
    out = tmp_path / "out.zarr"
    _bare_group(out, arrays)
    assert main(["info", str(out)]) == 2
    err = capsys.readouterr().err
    assert "incomplete" in err and "no resume point" in err and "convert the input again" in err
    assert main(["convert", str(src), str(out), "-q", *flags]) == 0
    err = capsys.readouterr().err
    if "--resume" in flags:
        assert "has no resume point" in err and "restarting" in err, err
    assert ss.open_store(str(out)).n_rows == 3000


def test_foreign_groups_are_left_alone(tmp_path, capsys):
    src = tmp_path / "in.svm"
    src.write_text(TEXT)
    other = tmp_path / "other.zarr"
    _bare_group(other, ("weights",))          # an array the converter never writes
    attrs = tmp_path / "attrs.zarr"
    zarr.open_group(str(attrs), mode="w", zarr_format=3, attributes={"owner": "someone"})
    for out in (other, attrs):
        for flags in ([], ["--resume"], ["--overwrite"]):
            assert main(["convert", str(src), str(out), "-q", *flags]) == 2
            assert "is not a streamsvm store" in capsys.readouterr().err
        with pytest.raises(StoreNotFoundError):
            ss.open_store(str(out))
    assert (other / "weights" / "zarr.json").exists() and (attrs / "zarr.json").exists()


def test_group_is_created_with_its_attributes(tmp_path, monkeypatch):
    """Killed right after the group is created, the store already says it is unfinished."""
    src = tmp_path / "in.svm"
    src.write_text(TEXT)
    out = tmp_path / "out.zarr"

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(zarr.Group, "create_array", killed)
    with pytest.raises(KeyboardInterrupt):
        convert(str(src), str(out))
    meta = read_meta(str(out))
    assert meta is not None and meta["complete"] is False and meta["progress"]["rows_done"] == 0
    with pytest.raises(IncompleteStoreError, match="no resume point"):
        ss.open_store(str(out))


@pytest.mark.parametrize("resume", [False, True])
def test_bad_input_leaves_no_store_even_past_resume_points(tmp_path, monkeypatch, resume):
    src = tmp_path / "bad.svm"
    src.write_text(TEXT + "1 1:x\n")
    out = tmp_path / "out.zarr"
    kw = dict(chunk_rows=100, progress_bytes=1, block_bytes=4096)
    if resume:       # first stopped at its first resume point, then continued
        progress = stop_at_first_resume_point(monkeypatch, src, out, **kw)
        assert progress["input"] is not None and 0 < progress["rows_done"] < 3000
    with pytest.raises(ss.exceptions.FormatError,
                       match=r"line 3001, column 5.*; the unfinished store was removed"):
        convert(str(src), str(out), resume=resume, **kw)
    assert not out.exists()


def test_bad_input_through_the_cli_then_info(tmp_path, capsys):
    src = tmp_path / "bad.svm"
    src.write_text(TEXT + "1 2:nan\n")
    out = tmp_path / "out.zarr"
    assert main(["convert", str(src), str(out), "-q", "--resume-every", "1KB"]) == 2
    err = capsys.readouterr().err
    assert "line 3001" in err and "removed" in err and err.count("\n") == 1
    assert not out.exists()
    assert main(["info", str(out)]) == 2
    assert "--resume" not in capsys.readouterr().err


def test_verify_and_train_say_the_same_of_an_unfinished_store(tmp_path, capsys):
    src = tmp_path / "in.svm"
    src.write_text(TEXT)
    out = tmp_path / "out.zarr"
    convert(str(src), str(out))
    meta = read_meta(str(out))
    g = zarr.open_group(str(out), mode="r+")
    progress = {"rows_done": 1200, "input": {"file": 0, "offset": 10}}
    g.attrs["streamsvm"] = {k: v for k, v in meta.items() if k != "checksum"} | \
        {"complete": False, "progress": progress}
    said = {}
    for cmd in (["verify", str(out), "-q"], ["train", str(out), "-o", str(tmp_path / "m.json")]):
        assert main(cmd) == 2
        said[cmd[0]] = capsys.readouterr().err
    for err in said.values():
        assert "is incomplete" in err and "--resume" in err and "damaged" not in err, err
        assert "rows written so far: 1200" in err


def test_underflow_to_zero_is_counted_and_reported(tmp_path, caplog):
    src = tmp_path / "tiny.svm"
    src.write_text("1 1:1e-50 2:3\n-1 1:-1e-60 3:1e-30\n1 2:1e-46 3:0\n")
    with caplog.at_level(logging.WARNING, logger="streamsvm"):
        store = convert(str(src), str(tmp_path / "f32.zarr"))
    assert store.meta["n_underflow"] == 3            # 1e-50, -1e-60, 1e-46; not 1e-30, 0
    warned = [r.getMessage() for r in caplog.records if "stored as 0" in r.getMessage()]
    assert warned == ["3 non-zero values of the input are stored as 0: below the smallest "
                      "magnitude float32 holds (pass --dtype float64 to keep them)"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="streamsvm"):
        store = convert(str(src), str(tmp_path / "f64.zarr"), dtype="float64")
    assert store.meta["n_underflow"] == 0
    assert not [r for r in caplog.records if "stored as 0" in r.getMessage()]


def test_underflow_warning_through_the_cli(tmp_path, capsys):
    src = tmp_path / "tiny.svm"
    src.write_text("1 1:1e-50 2:3\n-1 1:2\n")
    assert main(["convert", str(src), str(tmp_path / "o.zarr"), "-q"]) == 0
    err = capsys.readouterr().err
    assert err.count("stored as 0") == 1 and "1 non-zero value of the input is stored" in err
