"""S3 end to end against a real moto_server on 127.0.0.1."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

import streamsvm as ss
from streamsvm.cli import main
from streamsvm.exceptions import (FormatError, IncompleteStoreError, InvalidParameterError,
                                  StoreNotFoundError)
from streamsvm.io import convert

from ..conftest import data_file
from .helpers import assert_csr_equal, store_to_csr


def test_convert_s3_to_s3_and_read_back(s3, tmp_path):
    import s3fs
    bucket, opts = s3
    fs = s3fs.S3FileSystem(**opts)
    raw = data_file("dna/dna.scale").read_bytes()
    fs.pipe(f"{bucket}/in/dna.svm.gz", gzip.compress(raw))
    convert(f"{bucket}/in/dna.svm.gz", f"{bucket}/dna.zarr", chunk_rows=300,
            storage_options=opts)
    local = convert(str(data_file("dna/dna.scale")), str(tmp_path / "l.zarr"),
                    chunk_rows=300)
    again = ss.open_store(f"{bucket}/dna.zarr", storage_options=opts)
    assert again.n_rows == 2000 and again.n_chunks == 7
    assert_csr_equal(store_to_csr(again)[0], store_to_csr(local)[0])
    np.testing.assert_array_equal(store_to_csr(again)[1], store_to_csr(local)[1])
    assert again.info()["bytes_on_disk"] > 0


def test_cli_info_on_s3(s3, capsys):
    import s3fs
    bucket, opts = s3
    fs = s3fs.S3FileSystem(**opts)
    fs.pipe(f"{bucket}/t.svm", b"1 1:1\n-1 2:1\n2 3:1\n")
    endpoint = opts["client_kwargs"]["endpoint_url"]
    so = ["--storage-option", "key=testing", "--storage-option", "secret=testing",
          "--storage-option", f"client_kwargs.endpoint_url={endpoint}"]
    assert main(["convert", f"{bucket}/t.svm", f"{bucket}/t.zarr", "-q", *so]) == 0
    assert main(["info", f"{bucket}/t.zarr", "--json", *so]) == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["n_rows"] == 3 and info["labels"] == {"-1": 1, "1": 1, "2": 1}


def test_s3_bad_input_leaves_no_complete_store(s3):
    import s3fs
    bucket, opts = s3
    fs = s3fs.S3FileSystem(**opts)
    fs.pipe(f"{bucket}/bad.svm", b"1 1:1\n-1 2:x\n")
    with pytest.raises(FormatError, match="line 2"):
        convert(f"{bucket}/bad.svm", f"{bucket}/bad.zarr", storage_options=opts)
    with pytest.raises((IncompleteStoreError, StoreNotFoundError)):
        ss.open_store(f"{bucket}/bad.zarr", storage_options=opts)


def test_s3_missing_input(s3):
    bucket, opts = s3
    with pytest.raises(StoreNotFoundError, match="missing.svm"):
        convert(f"{bucket}/missing.svm", f"{bucket}/x.zarr", storage_options=opts)


def test_s3_glob_inputs(s3):
    import s3fs
    bucket, opts = s3
    fs = s3fs.S3FileSystem(**opts)
    fs.pipe(f"{bucket}/parts/p-0.svm.gz", gzip.compress(b"1 1:1\n"))
    fs.pipe(f"{bucket}/parts/p-1.svm.gz", gzip.compress(b"-1 2:1\n"))
    store = convert(f"{bucket}/parts/p-*.svm.gz", f"{bucket}/g.zarr", storage_options=opts)
    assert store.n_rows == 2
    assert [f["url"] for f in store.meta["source"]["files"]] == \
        [f"{bucket}/parts/p-0.svm.gz", f"{bucket}/parts/p-1.svm.gz"]


def test_s3_output_that_is_or_holds_an_input_is_refused(s3):
    import s3fs
    bucket, opts = s3
    fs = s3fs.S3FileSystem(**opts)
    fs.pipe(f"{bucket}/d/t.svm", b"1 1:1\n-1 2:1\n")
    for out in (f"{bucket}/d/t.svm", f"{bucket}/d/t.svm/", f"{bucket}/d"):
        with pytest.raises(InvalidParameterError, match="destroyed"):
            convert(f"{bucket}/d/*.svm", out, overwrite=True, storage_options=opts)
    assert fs.cat(f"{bucket}/d/t.svm") == b"1 1:1\n-1 2:1\n"


def test_nesvm_caches_its_lipschitz_constant_in_an_s3_store(s3):
    """The derived-values cache (io/_derived.py) on an object store: written by the first
    run (attributes and the side array), read by the second, which spends no pass on it."""
    import warnings

    from streamsvm._train import train
    from streamsvm.exceptions import ConvergenceWarning
    bucket, opts = s3
    convert(str(data_file("dna/dna.scale")), f"{bucket}/dna.zarr", chunk_rows=500,
            storage_options=opts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        store = ss.open_store(f"{bucket}/dna.zarr", storage_options=opts)
        _, first = train(store, solver="nesvm", C=0.1, max_passes=60)
        again = ss.open_store(f"{bucket}/dna.zarr", storage_options=opts)
        _, second = train(again, solver="nesvm", C=0.1, max_passes=60)
    power = [h["kind"] for h in first.history].count("lipschitz")
    assert power > 0 and [h["kind"] for h in second.history].count("lipschitz") == 0
    assert ss.io.verify_store(f"{bucket}/dna.zarr", storage_options=opts)["ok"]


def test_outputs_to_s3_equal_local_ones(s3, tmp_path):
    """Every output option on S3 (one PUT of a whole file) holds the bytes it writes
    locally: train -o (both formats), predict -o (labels, scores)."""
    import s3fs
    bucket, opts = s3
    fs = s3fs.S3FileSystem(**opts)
    src = tmp_path / "t.svm"
    src.write_text("".join(f"{1 if i % 3 else -1} {1 + i % 7}:1 9:{i % 5 + 1}\n"
                           for i in range(200)))
    so = ["--storage-option", "key=testing", "--storage-option", "secret=testing",
          "--storage-option", f"client_kwargs.endpoint_url={opts['client_kwargs']['endpoint_url']}"]
    assert main(["convert", str(src), str(tmp_path / "s.zarr"), "-q"]) == 0
    model = str(tmp_path / "m.json")
    for name, argv in {"m.json": ["train", str(tmp_path / "s.zarr"), "-q"],
                       "m.txt": ["train", str(tmp_path / "s.zarr"), "-q", "--format",
                                 "liblinear"],
                       "p.txt": ["predict", model, str(src)],
                       "s.txt": ["predict", model, str(src), "--scores"]}.items():
        assert main(argv + ["-o", str(tmp_path / name)]) == 0
        assert main(argv + ["-o", f"{bucket}/out/{name}", *so]) == 0
        assert fs.cat(f"{bucket}/out/{name}") == (tmp_path / name).read_bytes(), name
    assert sorted(p.rsplit("/", 1)[1] for p in fs.ls(f"{bucket}/out")) == \
        ["m.json", "m.txt", "p.txt", "s.txt"]
