"""Streaming text input: open local/remote, plain/compressed files and cut them into
line-aligned byte blocks with line numbers, in a background thread.

Compression is inferred from the extension (``.gz``, ``.bz2``, ``.xz``/``.lzma``, ``.zst``).
A truncated or corrupt compressed stream is a :class:`FormatError` naming the file.
A UTF-8 byte order mark opening a file's (decompressed) text is skipped; its three bytes
still count in the blocks' offsets and CRC-32, so ``--resume`` positions stay byte offsets.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
import zlib

from ..exceptions import FormatError, RemoteAccessError, StoreNotFoundError
from ._urls import remote_errors, url_to_fs

__all__ = ["TextBlock", "InputFile", "describe_inputs", "iter_blocks", "BLOCK_BYTES"]

BLOCK_BYTES = 4 << 20
BOM = b"\xef\xbb\xbf"   # UTF-8 byte order mark, as some Windows editors write it
_COMPRESSION = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".lzma": "xz", ".zst": "zstd",
                ".zstd": "zstd"}


@dataclasses.dataclass(frozen=True)
class InputFile:
    url: str
    size: int              # bytes on disk (compressed size for compressed files)
    compression: str | None


@dataclasses.dataclass(frozen=True)
class TextBlock:
    file_index: int
    url: str
    data: bytes            # whole lines (the last line of a file may lack '\n')
    first_line: int        # 1-based line number of the block's first line
    offset: int            # decompressed byte offset of the block in its file
    end_offset: int        # decompressed byte offset just after the block
    end_line: int          # line number of the first line after the block
    index: int             # block counter over all inputs (0, 1, ...)
    crc: int               # CRC-32 of the file's decompressed text up to end_offset


def compression_of(url: str) -> str | None:
    return _COMPRESSION.get(os.path.splitext(url.rstrip("/"))[1].lower())


def describe_inputs(urls, storage_options=None) -> list[InputFile]:
    """Check every input exists and return its size and compression."""
    out = []
    for url in _expand(urls, storage_options):
        try:
            fs, path = url_to_fs(url, storage_options)
            with remote_errors(url):        # no credentials, no endpoint: say so
                info = fs.info(path)
        except FileNotFoundError as exc:
            raise StoreNotFoundError(f"input file {url!r} does not exist") from exc
        except RemoteAccessError:
            raise
        except (OSError, ValueError) as exc:
            raise StoreNotFoundError(f"cannot open input {url!r}: {exc}") from exc
        if info.get("type") == "directory":
            raise StoreNotFoundError(f"input {url!r} is a directory, not a libsvm file")
        out.append(InputFile(url, int(info.get("size") or 0), compression_of(url)))
    return out


def _expand(urls, storage_options) -> list[str]:
    """Expand glob patterns (``part-*.svm.gz``), sorted; plain names pass through."""
    out = []
    for url in urls:
        url = os.fspath(url)
        if not any(ch in url for ch in "*?["):
            out.append(url)
            continue
        fs, path = url_to_fs(url, storage_options)
        matches = sorted(fs.glob(path))
        if not matches:
            raise StoreNotFoundError(f"no input file matches {url!r}")
        proto = url.split("://", 1)[0] + "://" if "://" in url else ""
        out.extend(m if (not proto or m.startswith(proto)) else proto + m for m in matches)
    return out


class _ZstdReader:
    """Streaming zstd decompression that notices a truncated last frame."""

    def __init__(self, raw, url):
        import zstandard
        self._raw, self._url, self._zstd = raw, url, zstandard
        self._dobj = zstandard.ZstdDecompressor().decompressobj()
        self._pending = b""
        self._done = False

    def read(self, n: int) -> bytes:
        parts, have = [self._pending], len(self._pending)
        while have < n and not self._done:
            raw = self._raw.read(1 << 22)
            if not raw:
                if not self._dobj.eof and self._started:
                    raise EOFError("zstd stream ends in the middle of a frame")
                self._done = True
                break
            self._started = True
            while raw:
                out = self._dobj.decompress(raw)
                parts.append(out)
                have += len(out)
                raw = self._dobj.unused_data if self._dobj.eof else b""
                if raw:
                    self._dobj = self._zstd.ZstdDecompressor().decompressobj()
        buf = b"".join(parts)            # one join per read, not one per piece
        self._pending = buf[n:]
        return buf[:n]

    _started = False

    def close(self):
        self._raw.close()


def _open(inp: InputFile, storage_options):
    import fsspec
    if inp.compression == "zstd":
        fs, path = url_to_fs(inp.url, storage_options)
        return _ZstdReader(fs.open(path, "rb"), inp.url)
    return fsspec.open(inp.url, "rb", compression=inp.compression,
                       **(storage_options or {})).open()


def _read_file(inp: InputFile, file_index: int, storage_options, start_offset: int,
               start_line: int, start_crc: int, block_bytes: int, counter: list):
    """Yield line-aligned blocks of one file starting at a decompressed byte offset."""
    f = _open(inp, storage_options)
    try:
        line, carry, crc = start_line, b"", start_crc
        skip = start_offset
        while skip > 0:  # resume: decompress and discard up to the offset
            got = f.read(min(skip, 16 << 20))
            if not got:
                raise FormatError(f"input is shorter than the resume offset {start_offset}",
                                  file=inp.url)
            skip -= len(got)
        offset = start_offset
        at_start = start_offset == 0
        while True:
            try:
                raw = f.read(block_bytes)
            except (EOFError, OSError, zlib.error, ValueError) as exc:
                raise FormatError(f"truncated or corrupt {inp.compression or ''} stream: {exc}",
                                  file=inp.url, line=line) from exc
            except Exception as exc:  # lzma.LZMAError, zstd errors, ...
                if type(exc).__name__ in ("LZMAError", "ZstdError", "BadGzipFile"):
                    raise FormatError(f"truncated or corrupt {inp.compression} stream: {exc}",
                                      file=inp.url, line=line) from exc
                raise
            if not raw:
                if carry:
                    yield _block(file_index, inp.url, carry, line, offset, crc, counter)
                return
            buf = carry + raw
            if at_start:                  # a BOM opening the file is not text: skip it
                if len(buf) < len(BOM) and BOM.startswith(buf):
                    carry = buf           # a short read: decide with more bytes
                    continue
                at_start = False
                if buf.startswith(BOM):
                    buf, offset, crc = buf[len(BOM):], offset + len(BOM), zlib.crc32(BOM, crc)
            cut = buf.rfind(b"\n") + 1
            if cut == 0:
                carry = buf
                continue
            block, carry = buf[:cut], buf[cut:]
            blk = _block(file_index, inp.url, block, line, offset, crc, counter)
            yield blk
            offset, line, crc = blk.end_offset, blk.end_line, blk.crc
    finally:
        f.close()


def _block(file_index, url, data, line, offset, crc, counter) -> TextBlock:
    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    blk = TextBlock(file_index, url, data, line, offset, offset + len(data), line + n_lines,
                    counter[0], zlib.crc32(data, crc))
    counter[0] += 1
    return blk


def iter_blocks(inputs: list[InputFile], storage_options=None, *, start=(0, 0, 1, 0),
                block_bytes: int = BLOCK_BYTES, prefetch: int = 2, first_block_index: int = 0):
    """Yield :class:`TextBlock` of all inputs in order, read ahead in a background thread.

    ``start`` = (file index, decompressed byte offset, line number, CRC-32 so far) to
    resume from; a fresh run starts at ``(0, 0, 1, 0)``.
    """
    q: queue.Queue = queue.Queue(maxsize=prefetch)
    stop = threading.Event()
    counter = [first_block_index]

    def produce():
        try:
            f0, off0, line0, crc0 = start
            for k in range(f0, len(inputs)):
                off, ln, crc = (off0, line0, crc0) if k == f0 else (0, 1, 0)
                for blk in _read_file(inputs[k], k, storage_options, off, ln, crc, block_bytes,
                                      counter):
                    while not stop.is_set():
                        try:
                            q.put(blk, timeout=0.1)
                            break
                        except queue.Full:
                            continue
                    if stop.is_set():
                        return
            q.put(None)
        except BaseException as exc:  # surfaced in the consumer
            q.put(exc)

    thread = threading.Thread(target=produce, name="streamsvm-reader", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while thread.is_alive():
            try:
                q.get_nowait()
            except queue.Empty:
                thread.join(0.05)
