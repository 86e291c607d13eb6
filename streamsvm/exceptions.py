"""Exceptions raised by streamsvm.

Every error is a :class:`StreamSVMError` and also inherits the builtin exception a user
would already catch (``ValueError``, ``FileNotFoundError``, ...), in the manner of
scikit-learn's ``InvalidParameterError`` and zarr's ``NodeNotFoundError``.
"""

from __future__ import annotations

__all__ = [
    "StreamSVMError",
    "BudgetTooSmallError",
    "FormatError",
    "StoreError",
    "StoreNotFoundError",
    "StoreExistsError",
    "StoreWriteError",
    "IncompleteStoreError",
    "StoreCorruptError",
    "InvalidParameterError",
    "ModelError",
    "CheckpointError",
    "DataMismatchError",
    "OutputNotWritableError",
    "RemoteAccessError",
    "OutputLockedError",
    "NotFittedError",
    "WorkerLostError",
    "ConvergenceWarning",
    "DataConversionWarning",
]


class StreamSVMError(Exception):
    """Base class of every error raised by streamsvm."""


class FormatError(StreamSVMError, ValueError):
    """Malformed libsvm/svmlight input.

    Attributes
    ----------
    file : str
        The input file (URL or path).
    line : int or None
        1-based line number in that file.
    column : int or None
        1-based byte column within the line.
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 column: int | None = None):
        self.file = file
        self.line = line
        self.column = column
        where = []
        if file is not None:
            where.append(str(file))
        if line is not None:
            where.append(f"line {line}")
        if column is not None:
            where.append(f"column {column}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class StoreError(StreamSVMError, ValueError):
    """A store that cannot be used as asked (wrong format, bad chunk, unreadable)."""


class StoreNotFoundError(StreamSVMError, FileNotFoundError):
    """No store (or input file) at the given URL."""


class StoreExistsError(StreamSVMError, FileExistsError):
    """The output already exists and overwriting was not requested."""


class StoreWriteError(StoreError, OSError):
    """The store, or the shuffle's scratch files, could not be written (no space left on the
    device, a read-only file system, no permission). ``errno`` is the operating system's."""


class IncompleteStoreError(StoreError):
    """The store was not finished (conversion interrupted or still running)."""


class StoreCorruptError(StoreError):
    """A store's bytes fail their checksums, a chunk file is missing, or its arrays
    contradict each other. The message names the store, the array, the chunk or shard file
    and, where known, the rows affected; ``streamsvm verify STORE`` lists every problem."""


class InvalidParameterError(StreamSVMError, ValueError, TypeError):
    """A parameter has an invalid value or type (checked before the first pass)."""


class BudgetTooSmallError(InvalidParameterError):
    """The ``memory`` budget cannot hold what a solver must keep whatever the budget (its
    models and their sums); the message names the least budget that can."""


class ModelError(StreamSVMError, ValueError):
    """A model file that cannot be used: not a model, truncated, failing its checksums, or a
    field that is malformed or contradicts another. The message names the file and the
    field (or, in a LIBLINEAR text model, the line).

    Attributes
    ----------
    file : str
    field : str or None
    line : int or None
        1-based line number (LIBLINEAR text models).
    """

    def __init__(self, message: str, *, file: str, field: str | None = None,
                 line: int | None = None):
        self.file, self.field, self.line = file, field, line
        where = f"model file {file!r}" + (f", line {line}" if line is not None else "")
        where += f", field {field!r}" if field is not None else ""
        super().__init__(f"{where}: {message}")


class NotFittedError(StreamSVMError, ValueError, AttributeError):
    """An estimator was used before ``fit``."""


class CheckpointError(StreamSVMError, ValueError):
    """No valid checkpoint could be read, or a checkpoint does not match the run."""


class DataMismatchError(StreamSVMError, ValueError):
    """Data that does not match the model, e.g. labels outside the model's classes."""


class OutputNotWritableError(StreamSVMError, OSError):
    """An output location (model file, checkpoint or scratch directory) cannot be written."""


class RemoteAccessError(StreamSVMError, OSError):
    """A remote location (an S3 URL, ...) could not be reached, read or written: no
    credentials, credentials refused, no endpoint listening. The message names the URL and
    what to check."""


class OutputLockedError(OutputNotWritableError):
    """Another process is writing the same output (a store being converted, a checkpoint
    directory in use). The message names it; ``holder`` holds its pid, host, command and
    start time (None when its lock does not say)."""

    def __init__(self, message: str, holder=None):
        super().__init__(message)
        self.holder = holder


class WorkerLostError(StreamSVMError, RuntimeError):
    """A dask worker left during a pass: the per-row state it held is gone (the driver
    resumes from its last snapshot on the remaining workers)."""

    def __init__(self, message: str, lost=()):
        super().__init__(message)
        self.lost = tuple(lost)


class ConvergenceWarning(UserWarning):
    """A solver stopped at its iteration or pass limit before reaching ``tol``."""


class DataConversionWarning(UserWarning):
    """Input was converted to the shape or type an estimator needs (a column vector ``y``
    raveled), as scikit-learn warns."""
