"""A UTF-8 byte order mark opening an input file is skipped, and counted in offsets and CRC."""

from __future__ import annotations

import gzip
import zlib

import numpy as np
import pytest

from streamsvm.exceptions import FormatError
from streamsvm.io import convert
from streamsvm.io._source import describe_inputs, iter_blocks

from .helpers import store_arrays

BOM = "\ufeff".encode()
TEXT = b"+1 1:0.5 3:1\n-1 2:2 # comment\n\n+1 4:1.5\n-1 1:1 2:1\n"


def _write(path, data: bytes):
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


@pytest.mark.parametrize("name", ["t.svm", "t.svm.gz"])
def test_bom_file_converts_like_the_file_without_it(name, tmp_path):
    plain = _write(tmp_path / f"plain-{name}", TEXT)
    bom = _write(tmp_path / f"bom-{name}", BOM + TEXT)
    a = convert(str(plain), str(tmp_path / "a.zarr"), chunk_rows=2)
    b = convert(str(bom), str(tmp_path / "b.zarr"), chunk_rows=2)
    arrays_a, _ = store_arrays(a.url)
    arrays_b, _ = store_arrays(b.url)
    assert sorted(arrays_a) == sorted(arrays_b)
    for key in arrays_a:
        np.testing.assert_array_equal(arrays_a[key], arrays_b[key])
    assert b.n_rows == 4
    assert b.info()["source"]["crc32"] == [zlib.crc32(BOM + TEXT)]   # the BOM is in the CRC


@pytest.mark.parametrize("block_bytes", [1, 2, 5, 1 << 20])
@pytest.mark.parametrize("name", ["t.svm", "t.svm.gz"])
def test_bom_blocks_offsets_crc_and_resume(name, block_bytes, tmp_path):
    path = _write(tmp_path / name, BOM + TEXT)
    files = describe_inputs([str(path)])
    blocks = list(iter_blocks(files, block_bytes=block_bytes))
    assert b"".join(b.data for b in blocks) == TEXT
    assert blocks[0].offset == len(BOM) and blocks[-1].end_offset == len(BOM + TEXT)
    assert blocks[-1].crc == zlib.crc32(BOM + TEXT)
    for prev, blk in zip(blocks, blocks[1:]):
        assert blk.offset == prev.end_offset and blk.first_line == prev.end_line
    # a resume point (offset, line, CRC after a block) continues exactly like the full read
    for k, blk in enumerate(blocks[:-1]):
        rest = list(iter_blocks(files, start=(0, blk.end_offset, blk.end_line, blk.crc),
                                block_bytes=block_bytes))
        assert [(r.data, r.offset, r.first_line, r.crc) for r in rest] == \
            [(r.data, r.offset, r.first_line, r.crc) for r in blocks[k + 1:]]


def test_bom_at_the_start_of_every_input(tmp_path):
    one = _write(tmp_path / "one.svm", BOM + b"+1 1:1\n")
    two = _write(tmp_path / "two.svm.gz", BOM + b"-1 2:1\n")
    store = convert([str(one), str(two)], str(tmp_path / "s.zarr"))
    assert store.n_rows == 2 and store.nnz == 2


@pytest.mark.parametrize("text, line", [(b"+1 1:1\n" + BOM + b"-1 2:1\n", 2),
                                        (BOM + BOM + b"+1 1:1\n", 1),
                                        (b" " + BOM + b"+1 1:1\n", 1),
                                        (BOM[:2] + b"+1 1:1\n", 1)])
def test_bom_elsewhere_is_an_error(text, line, tmp_path):
    path = _write(tmp_path / "t.svm", text)
    with pytest.raises(FormatError, match=f"line {line}"):
        convert(str(path), str(tmp_path / "s.zarr"))
