"""Input and storage: libsvm parsing, the Zarr CSR store, conversion."""

from ._store import ATTRS_KEY, FORMAT_VERSION, Chunk, Store, open_store

__all__ = ["ATTRS_KEY", "FORMAT_VERSION", "Chunk", "Store", "open_store"]
