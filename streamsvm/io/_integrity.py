"""Checksums that make a damaged store fail loudly instead of training on wrong data.

Every byte a reader trusts is covered by a CRC-32C (Castagnoli, hardware-accelerated by
``google_crc32c``, a dependency of zarr):

* the inner chunks of every array (zarr v3's ``crc32c`` codec after ``blosc``, checked by
  the direct reader on every read, and by zarr itself);
* each shard's index (zarr's ``index_codecs``: ``bytes`` + ``crc32c``);
* each array's ``zarr.json`` (its CRC recorded in the group attributes at conversion);
* the group attributes themselves (``checksum``: the CRC of their canonical JSON without
  that key).

So a flipped bit anywhere in a store either stops the reader with a
:class:`~streamsvm.exceptions.StoreCorruptError` or lands in bytes no reader uses.
"""

from __future__ import annotations

import json

import numpy as np

__all__ = ["crc32c", "attrs_checksum", "seal", "check_attrs"]


def crc32c(data) -> int:
    """CRC-32C of a bytes-like object, as an unsigned int (no copy of ``data``)."""
    import google_crc32c
    # (the C extension takes bytes or a numpy array, not a memoryview)
    return int(google_crc32c.value(data if isinstance(data, bytes) else
                                   np.frombuffer(data, dtype=np.uint8)))


def _canonical(attrs: dict) -> bytes:
    body = {k: v for k, v in attrs.items() if k != "checksum"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode()


def attrs_checksum(attrs: dict) -> str:
    """The checksum of a store's ``streamsvm`` attributes (``"crc32c:<8 hex digits>"``)."""
    return f"crc32c:{crc32c(_canonical(attrs)):08x}"


def seal(attrs: dict) -> dict:
    """``attrs`` with its ``checksum`` set (the converter writes this last)."""
    out = {k: v for k, v in attrs.items() if k != "checksum"}
    out["checksum"] = attrs_checksum(out)
    return out


def check_attrs(url: str, attrs: dict) -> None:
    """Raise :class:`StoreCorruptError` unless ``attrs`` match their recorded checksum."""
    from ..exceptions import StoreCorruptError
    want = attrs.get("checksum")
    if not isinstance(want, str):
        raise StoreCorruptError(f"store {url!r}: its attributes (zarr.json) carry no checksum: "
                                f"damaged, or not written by this version of streamsvm; "
                                f"convert the input again")
    got = attrs_checksum(attrs)
    if got != want:
        raise StoreCorruptError(f"store {url!r} is damaged: its attributes (zarr.json) fail "
                                f"their checksum ({got}, recorded {want}); convert the input "
                                f"again")
