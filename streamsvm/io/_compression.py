"""The store's compression: the forms ``convert --compression`` accepts, the zarr codecs each
writes for the inner chunks of every array, and the compression a reader finds recorded in an
array's ``zarr.json``.

Every inner chunk is ``bytes`` (little endian), then a compressor, then ``crc32c``. The
compressor is Blosc (``lz4``, ``zstd`` or ``blosclz`` at a level 1-9, byte shuffle) or none
at all: ``bytes`` + ``crc32c`` only, what a reader copies instead of decompressing.

Why only byte shuffle is offered: on 256 Ki-entry pieces of each array of a 10^5-row store
of the benchmarks' synthetic shape (numcodecs' Blosc, one thread), no shuffle cut lz4's ratio
from 1.55 to 1.24; bitshuffle stayed within 3 % of byte shuffle's ratio for lz4 and zstd and
decoded lz4 at half the speed (BENCHMARKS.md, "the store's compression"). The reader accepts
any shuffle all the same.
"""

from __future__ import annotations

import dataclasses
import re

from ..exceptions import InvalidParameterError

__all__ = ["Compression", "DEFAULT", "LEGACY", "FORMS", "parse_compression",
           "recorded_compression"]

#: What ``convert`` writes unless told otherwise.
DEFAULT = "lz4"
#: What every store written before ``--compression`` existed holds (its options lack it).
LEGACY = "lz4:5"
#: The compressors ``--compression`` offers, and the level of each when none is given: lz4 at
#: 5, what every store had before; zstd at 4 (why: :func:`parse_compression`).
_LEVELS = {"lz4": 5, "zstd": 4, "blosclz": 5}
#: The accepted forms, as the help and the errors name them.
FORMS = "lz4, lz4:N, zstd, zstd:N, blosclz, blosclz:N (N a level 1-9) or none"
#: What a reader accepts in an array's zarr.json (any Blosc zarr can write).
_READ_CNAMES = ("lz4", "lz4hc", "blosclz", "zstd", "zlib", "snappy")
_SHUFFLES = {"noshuffle": "no shuffle", "shuffle": "byte shuffle", "bitshuffle": "bitshuffle"}


@dataclasses.dataclass(frozen=True)
class Compression:
    """The compressor of an array's inner chunks: Blosc ``cname`` at ``clevel`` with
    ``shuffle``, or none (``cname`` None)."""

    cname: str | None
    clevel: int = 0
    shuffle: str = "shuffle"

    @property
    def spec(self) -> str:
        """The canonical ``--compression`` form (``lz4:5``, ``zstd:4``, ``none``; a shuffle
        other than byte shuffle, only ever read, as a ``+noshuffle``/``+bitshuffle``
        suffix)."""
        if self.cname is None:
            return "none"
        return f"{self.cname}:{self.clevel}" + \
            ("" if self.shuffle == "shuffle" else f"+{self.shuffle}")

    def codecs(self) -> list:
        """The zarr ``compressors`` of an array written with it (the CRC-32C last)."""
        from zarr.codecs import BloscCodec, Crc32cCodec
        if self.cname is None:
            return [Crc32cCodec()]
        return [BloscCodec(cname=self.cname, clevel=self.clevel, shuffle=self.shuffle),
                Crc32cCodec()]


def parse_compression(spec, name: str = "compression") -> Compression:
    """The :class:`Compression` of a ``--compression`` form (:data:`FORMS`).

    ``zstd`` without a level is level 4 (zstd's own level 7: Blosc's level N is zstd's
    2N - 1): a store is written once and read every pass, and on the synthetic 10^6-row
    file of ``tools/bench.py codecs`` (BENCHMARKS.md) level 4 made the smallest store of all
    (1.75x, level 5 no smaller) and decoded 1.9x as fast as level 1 (0.22 s against 0.41 s a
    pass), for a conversion 1.3x as long (5.7 s against 4.3 s).

    Raises
    ------
    InvalidParameterError
        Naming ``name`` and the accepted forms.
    """
    if isinstance(spec, Compression):
        return spec
    m = re.fullmatch(r"([a-z0-9]+)(?::([0-9]+))?", spec.strip().lower()) \
        if isinstance(spec, str) else None
    if m is not None and m.group(1) == "none" and m.group(2) is None:
        return Compression(None)
    if m is None or m.group(1) not in _LEVELS or \
            (m.group(2) is not None and not 1 <= int(m.group(2)) <= 9):
        raise InvalidParameterError(f"The {name!r} parameter must be one of {FORMS}. "
                                    f"Got {spec!r} instead.")
    level = _LEVELS[m.group(1)] if m.group(2) is None else int(m.group(2))
    return Compression(m.group(1), level)


def recorded_compression(inner: list) -> Compression | None:
    """The compression of inner chunks whose codecs (a ``zarr.json``'s list, after
    ``bytes`` and before ``crc32c``) are ``inner``; None when it is not one a store holds."""
    if not inner:
        return Compression(None)
    if len(inner) != 1 or inner[0].get("name") != "blosc":
        return None
    conf = inner[0].get("configuration", {})
    cname, clevel, shuffle = conf.get("cname"), conf.get("clevel"), conf.get("shuffle")
    if cname not in _READ_CNAMES or shuffle not in _SHUFFLES or \
            not isinstance(clevel, int) or isinstance(clevel, bool) or not 0 <= clevel <= 9:
        return None
    return Compression(cname, clevel, shuffle)
