"""Input and storage: libsvm parsing, the Zarr CSR store, conversion."""

from ._convert import convert
from ._memory import InMemoryStore
from ._store import ATTRS_KEY, FORMAT_VERSION, Chunk, Store, open_store
from ._writer import write_store

__all__ = ["ATTRS_KEY", "FORMAT_VERSION", "Chunk", "InMemoryStore", "Store", "convert",
           "open_store", "write_store"]
