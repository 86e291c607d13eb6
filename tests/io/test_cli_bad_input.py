"""Bad input through the CLI: exit code 2, a message naming file/line/column, no store."""

from __future__ import annotations

import gzip
import json

import pytest

import streamsvm as ss
from streamsvm.cli import main
from streamsvm.exceptions import StoreNotFoundError

BAD = {
    "label": ("1 1:1\nabc 1:1\n", "line 2"),
    "value": ("1 1:x\n", "line 1"),
    "missing colon": ("1 1:1\n1 3\n", "line 2"),
    "index zero": ("1 0:1\n", "line 1"),
    "negative index": ("1 -2:1\n", "line 1"),
    "unsorted": ("1 3:1 2:1\n", "line 1"),
    "duplicate": ("-1 1:1\n1 2:1 2:1\n", "line 2"),
    "nan": ("1 1:nan\n", "line 1"),
    "inf": ("1 1:inf\n", "line 1"),
    "overflow": ("1 1:1e999\n", "line 1"),
    "float32 overflow": ("1 1:1\n-1 1:1e39\n", "line 2, column 6: value '1e39' overflows float32"),
    "garbage after label": ("1 abc\n", "line 1"),
    "missing label": ("1:1 2:1\n", "line 1"),
    "empty": ("", "empty"),
    "only comments": ("# nothing\n\n", "empty"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_exit_2_and_no_store(case, tmp_path, capsys):
    text, where = BAD[case]
    src = tmp_path / "bad.svm"
    src.write_text(text)
    out = tmp_path / "out.zarr"
    assert main(["convert", str(src), str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert "bad.svm" in err and where in err, err
    assert not out.exists()         # bad input: nothing that --resume could continue
    with pytest.raises(StoreNotFoundError):
        ss.open_store(str(out))


def test_bad_zero_based_negative(tmp_path, capsys):
    src = tmp_path / "z.svm"
    src.write_text("1 0:1\n1 -1:2\n")
    assert main(["convert", str(src), str(tmp_path / "o.zarr"), "--zero-based", "yes", "-q"]) == 2
    assert "line 2" in capsys.readouterr().err


def test_index_above_n_features(tmp_path, capsys):
    src = tmp_path / "t.svm"
    src.write_text("1 1:1\n1 9:1\n")
    assert main(["convert", str(src), str(tmp_path / "o.zarr"), "--n-features", "5", "-q"]) == 2
    err = capsys.readouterr().err
    assert "line 2" in err and "column" in err


def test_truncated_gzip(tmp_path, capsys):
    src = tmp_path / "t.svm.gz"
    src.write_bytes(gzip.compress(b"1 1:1\n" * 50000)[:-30])
    assert main(["convert", str(src), str(tmp_path / "o.zarr"), "-q"]) == 2
    assert "t.svm.gz" in capsys.readouterr().err


def test_missing_input_file(tmp_path, capsys):
    assert main(["convert", str(tmp_path / "nope.svm"), str(tmp_path / "o.zarr"), "-q"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_existing_output_needs_overwrite(tmp_path, capsys):
    src = tmp_path / "t.svm"
    src.write_text("1 1:1\n-1 2:1\n")
    out = str(tmp_path / "o.zarr")
    assert main(["convert", str(src), out, "-q"]) == 0
    assert main(["convert", str(src), out, "-q"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["convert", str(src), out, "-q", "--overwrite"]) == 0


def test_overwrite_leaves_inputs_and_other_files_alone(tmp_path, capsys):
    src = tmp_path / "t.svm"
    src.write_text("1 1:1\n-1 2:1\n")
    assert main(["convert", str(src), str(src), "-q", "--overwrite"]) == 2
    assert "is the input" in capsys.readouterr().err
    assert src.read_text() == "1 1:1\n-1 2:1\n"
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "model.json").write_text("{}")
    assert main(["convert", str(src), str(tmp_path / "results"), "-q", "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "not a streamsvm store" in err and "model.json" in err and "left alone" in err
    assert (tmp_path / "results" / "model.json").read_text() == "{}"


def test_info_json_keys(tmp_path, capsys):
    src = tmp_path / "t.svm"
    src.write_text("1 1:1\n-1 2:1 4:0.5\n1 3:1\n")
    out = str(tmp_path / "o.zarr")
    assert main(["convert", str(src), out, "--chunk-rows", "2", "-q"]) == 0
    capsys.readouterr()
    assert main(["info", out, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    for key in ("n_rows", "n_features", "nnz", "n_chunks", "chunk_rows", "labels"):
        assert key in info
    assert info["n_rows"] == 3 and info["n_chunks"] == 2 and info["labels"] == {"-1": 1, "1": 2}
    assert main(["info", out]) == 0
    assert "compression ratio" in capsys.readouterr().out


def test_info_on_missing_and_incomplete(tmp_path, capsys):
    assert main(["info", str(tmp_path / "none.zarr")]) == 2
    assert "no streamsvm store" in capsys.readouterr().err


def test_help_texts(capsys):
    for cmd in (["--help"], ["convert", "--help"], ["info", "--help"]):
        with pytest.raises(SystemExit) as e:
            main(cmd)
        assert e.value.code == 0
    assert "--shuffle" in capsys.readouterr().out
