"""Input and storage: libsvm parsing, the Zarr CSR store, conversion.

Everything outside ``io/`` imports from here, never from a private ``io`` module."""

from ._compression import parse_compression
from ._convert import NO_LIMIT, convert
from ._derived import read_derived, write_derived
from ._folds import FoldStore, fold_of
from ._labels import label_key
from ._lock import OutputLock
from ._memory import InMemoryStore
from ._parse import parse_block
from ._source import describe_inputs, iter_blocks
from ._store import Store
from ._store_meta import Chunk, StoreMeta
from ._store_open import ATTRS_KEY, FORMAT_VERSION, open_store, read_meta
from ._urls import (STDOUT, access_error, is_local, join_url, open_output, output_target,
                    remote_errors, url_to_fs, write_atomic)
from ._verify import verify_store
from ._writer import write_store

__all__ = ["ATTRS_KEY", "FORMAT_VERSION", "NO_LIMIT", "STDOUT", "Chunk", "InMemoryStore",
           "FoldStore", "OutputLock", "Store", "StoreMeta", "access_error", "convert",
           "describe_inputs", "fold_of",
           "is_local", "iter_blocks", "join_url", "label_key", "open_output", "open_store",
           "output_target", "parse_block", "parse_compression", "read_derived", "read_meta",
           "remote_errors", "url_to_fs", "verify_store", "write_atomic", "write_derived",
           "write_store"]
