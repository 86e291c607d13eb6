"""streamsvm: exact linear SVMs on libsvm files far larger than memory."""

from . import _numba_cache  # noqa: F401  (first: numba's cache directory, before any kernel)
from .exceptions import (CheckpointError, ConvergenceWarning, FormatError, IncompleteStoreError,
                         InvalidParameterError, StoreError, StoreExistsError, StoreNotFoundError,
                         StoreWriteError, StreamSVMError)
from ._train import train
from ._cv import CVResult, cross_validate, cross_validate_path
from .estimators import LinearSVC, WestonWatkinsSVC
from .exceptions import NotFittedError
from .io import Chunk, InMemoryStore, Store, convert, open_store
from .model import LinearModel, load_model

__version__ = "0.1.0"

__all__ = [
    "convert", "open_store", "train", "cross_validate", "cross_validate_path", "CVResult",
    "LinearSVC", "WestonWatkinsSVC", "load_model", "LinearModel", "Chunk", "Store",
    "InMemoryStore", "NotFittedError",
    "StreamSVMError", "FormatError", "StoreError", "StoreNotFoundError", "StoreExistsError",
    "StoreWriteError", "IncompleteStoreError", "InvalidParameterError", "CheckpointError",
    "ConvergenceWarning",
]
