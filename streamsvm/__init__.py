"""streamsvm: exact linear SVMs on libsvm files far larger than memory."""

from .exceptions import (CheckpointError, ConvergenceWarning, FormatError, IncompleteStoreError,
                         InvalidParameterError, StoreError, StoreExistsError, StoreNotFoundError,
                         StreamSVMError)
from .io import Chunk, Store, open_store

__version__ = "0.1.0"

__all__ = [
    "Chunk", "Store", "open_store",
    "StreamSVMError", "FormatError", "StoreError", "StoreNotFoundError", "StoreExistsError",
    "IncompleteStoreError", "InvalidParameterError", "CheckpointError", "ConvergenceWarning",
]
