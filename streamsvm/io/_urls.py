"""URL handling: the one place a string becomes an fsspec filesystem and path, and the one
place an output file is written.

Where an output goes (:func:`open_output`, :func:`write_atomic`):

- ``-``, or a name for this process's standard output or error (``/dev/stdout``,
  ``/dev/fd/1``): written to that stream.
- an existing file that is not a regular file — a device such as ``/dev/null`` or a
  terminal, a FIFO — or a link to one: written in place, no temporary file, no rename.
- a regular file or a new name, or a symbolic link to either: a temporary file next to the
  link's *target*, ``fsync``-ed and renamed over the target, so the link stays a link and a
  half-written file never appears. A new file gets mode ``0666 & ~umask``, as ``cp`` gives
  it; a replaced file keeps its mode. The target's directory must exist: it is never
  created (a mistyped path must not grow directories).
- a remote URL: one PUT at the end (an object store never shows a partial object).

Errors of remote access (no credentials, no endpoint listening, access denied) become a
:class:`~streamsvm.exceptions.RemoteAccessError` naming the URL and what to check
(:func:`remote_errors`, :func:`access_error`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import sys

from ..exceptions import OutputNotWritableError, RemoteAccessError, StreamSVMError

__all__ = ["url_to_fs", "join_url", "is_local", "write_atomic", "open_output",
           "output_target", "missing_parent", "remote_errors", "names_remote_errors",
           "access_error", "STDOUT"]

STDOUT = "-"
"""The output name that means standard output."""


def url_to_fs(url, storage_options: dict | None = None):
    """``(filesystem, path)`` for a local path or any fsspec URL."""
    import fsspec
    url = os.fspath(url)
    try:
        return fsspec.core.url_to_fs(url, **(storage_options or {}))
    except ImportError as exc:  # e.g. s3fs missing
        raise ImportError(f"cannot open {url!r}: {exc}. For s3:// URLs install the extra: "
                          f"pip install 'streamsvm[s3]'") from exc


def join_url(base: str, *parts: str) -> str:
    """Join path components with '/', whatever the filesystem."""
    out = base.rstrip("/")
    for p in parts:
        out = out + "/" + p.strip("/")
    return out


def is_local(url) -> bool:
    url = os.fspath(url)
    return "://" not in url or url.startswith("file://")


def _local_path(url: str) -> str:
    return url[len("file://"):] if url.startswith("file://") else url


# -- writing an output ------------------------------------------------------------------

def output_target(path: str) -> tuple[str, object]:
    """How the local output ``path`` is written: ``(kind, where)``.

    ``("stream", file)``: standard output or error (``-``, ``/dev/stdout``), written to the
    binary ``file``; ``("in_place", path)``: an existing file that is not a regular file (a
    device, a FIFO), opened and written; ``("atomic", target)``: a regular file or a new
    name, written to a temporary file renamed over ``target`` (``path`` with its symbolic
    links resolved).

    Raises
    ------
    IsADirectoryError
        ``path`` is (or links to) a directory.
    """
    if path == STDOUT:
        return "stream", sys.stdout
    local = _local_path(path)
    try:
        st = os.stat(local)                 # follows links, /dev/stdout's magic one too
    except (FileNotFoundError, NotADirectoryError):
        st = None                           # a new file, or a link to one
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), local)
        stream = _std_stream(st)
        if stream is not None:
            return "stream", stream
        if not stat.S_ISREG(st.st_mode):
            return "in_place", local
    target = os.path.realpath(local)
    if st is not None and not _same_file(target, st):
        return "in_place", local            # e.g. /proc/self/fd/N of a deleted file
    return "atomic", target


def _std_stream(st: os.stat_result):
    """``sys.stdout`` or ``sys.stderr`` if ``st`` is the file it writes to, else None."""
    for stream in (sys.stdout, sys.stderr):
        try:
            mine = os.fstat(stream.fileno())
        except (AttributeError, OSError, ValueError):     # replaced or closed stream
            continue
        if (mine.st_dev, mine.st_ino) == (st.st_dev, st.st_ino):
            return stream
    return None


def _same_file(path: str, st: os.stat_result) -> bool:
    try:
        other = os.stat(path)
    except OSError:
        return False
    return (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino)


def missing_parent(path: str) -> str | None:
    """The directory an atomic write of the local ``path`` needs, if it does not exist."""
    parent = os.path.dirname(os.path.abspath(path))
    return None if os.path.lexists(parent) else parent


@contextlib.contextmanager
def open_output(path, storage_options=None, *, make_dirs: bool = False):
    """A binary file to write the output ``path`` through (see the module doc for where
    each kind of name goes). On leaving without an exception the output is complete
    (renamed into place, uploaded); on an exception nothing is renamed or uploaded and the
    temporary file is removed.

    Parameters
    ----------
    path : str or os.PathLike
        ``-``, a local path or an fsspec URL.
    storage_options : dict, optional
    make_dirs : bool, default False
        Create missing parent directories (for files inside a store, never for a user's
        output): otherwise a missing directory raises :class:`OutputNotWritableError`.
    """
    path = os.fspath(path)
    if not is_local(path):
        with _remote_output(path, storage_options) as f:
            yield f
        return
    kind, where = output_target(path)
    if kind == "stream":
        where.flush()                       # what was printed before comes first
        yield where.buffer
        where.buffer.flush()
        return
    if kind == "in_place":
        with open(os.open(where, os.O_WRONLY | os.O_TRUNC), "wb") as f:
            yield f
        return
    yield from _atomic_output(path, where, make_dirs)


def _atomic_output(path: str, target: str, make_dirs: bool):
    """Generator body of :func:`open_output` for a regular file (see there)."""
    import uuid
    parent = missing_parent(target)
    if parent is not None:
        if not make_dirs:
            err = OutputNotWritableError(f"cannot write {path!r}: directory {parent!r} does "
                                         f"not exist")
            err.errno = errno.ENOENT
            raise err
        os.makedirs(parent, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)    # replaced: keeps its mode
    except FileNotFoundError:
        mode = None                                     # new: 0666 & ~umask (os.open)
    tmp = os.path.join(os.path.dirname(target),
                       f".{os.path.basename(target)}.{uuid.uuid4().hex[:8]}.partial")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with open(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)


@contextlib.contextmanager
def _remote_output(url: str, storage_options):
    """A private local temporary file, uploaded to ``url`` once complete (an object store
    shows the whole object or none)."""
    import tempfile
    fd, tmp = tempfile.mkstemp(prefix="streamsvm-output-", suffix=".partial")
    try:
        with open(fd, "wb") as f:
            yield f
        with remote_errors(url):
            fs, p = url_to_fs(url, storage_options)
            fs.put_file(tmp, p)
    finally:
        os.remove(tmp)


def write_atomic(path: str, payload, storage_options=None, *, make_dirs: bool = False) -> None:
    """Write ``payload`` at ``path`` all at once, or through to what ``path`` names (see
    the module doc): locally a private file ``fsync``-ed and renamed over the target of
    ``path``; on an object store one PUT (never a partial object).

    ``payload`` is bytes, or an iterable of bytes pieces: written piece by piece locally (a
    large model's document is never whole in memory), joined for the one PUT.
    ``make_dirs`` creates missing parent directories (see :func:`open_output`)."""
    whole = isinstance(payload, (bytes, bytearray, memoryview))
    pieces = [payload] if whole else payload
    if is_local(path):
        with open_output(path, make_dirs=make_dirs) as f:
            for piece in pieces:
                f.write(piece)
        return
    with remote_errors(path):
        fs, p = url_to_fs(path, storage_options)
        fs.pipe_file(p, payload if whole else b"".join(pieces))     # one PUT


# -- errors of remote access ------------------------------------------------------------

_CREDENTIALS = ("check the credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or "
                "AWS_PROFILE, or --storage-option key=... --storage-option secret=... "
                "(--storage-option anon=true for a public bucket)")
_ENDPOINT = ("check the endpoint (--storage-option client_kwargs.endpoint_url=URL) and "
             "that the service is running and reachable")
_DENIED_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
                 "InvalidToken", "TokenRefreshRequired", "AllAccessDisabled", "403"}


def access_error(exc: BaseException, url=None) -> str | None:
    """Why a remote location could not be reached, read or written, and what to check, for
    an error of remote access: botocore's (missing or refused credentials, no connection to
    the endpoint, access denied) and, when ``url`` is remote, the ``PermissionError`` or
    ``ConnectionError`` a filesystem made of one. None for any other error (a missing file
    among them)."""
    bce = sys.modules.get("botocore.exceptions")    # loaded if s3fs ever ran
    if bce is not None:
        if isinstance(exc, (bce.NoCredentialsError, bce.PartialCredentialsError,
                            bce.CredentialRetrievalError)):
            return f"no usable credentials ({exc}): {_CREDENTIALS}"
        if isinstance(exc, bce.ClientError):
            err = exc.response.get("Error", {})
            code, text = str(err.get("Code", "")), err.get("Message") or str(exc)
            return f"access denied ({code}: {text}): {_CREDENTIALS}" \
                if code in _DENIED_CODES else None
        if isinstance(exc, bce.BotoCoreError):      # no connection, a timeout, ...
            return f"{exc}: {_ENDPOINT}"
    if url is None or is_local(os.fspath(url)):
        return None
    if isinstance(exc, PermissionError):            # s3fs's translation of a 403
        return f"access denied ({exc}): {_CREDENTIALS}"
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return f"{type(exc).__name__}: {exc}: {_ENDPOINT}"
    return None


@contextlib.contextmanager
def remote_errors(url):
    """Turn an error of remote access (:func:`access_error`) while touching ``url`` into a
    :class:`RemoteAccessError` naming it; local paths and other errors pass unchanged."""
    try:
        yield
    except StreamSVMError:
        raise
    except Exception as exc:
        url = os.fspath(url) if isinstance(url, (str, os.PathLike)) else None
        why = access_error(exc, url) if url is not None and not is_local(url) else None
        if why is None:
            raise
        raise RemoteAccessError(f"cannot access {url!r}: {why}") from exc


def names_remote_errors(func):
    """Decorate a function whose first argument is a URL with :func:`remote_errors`."""
    @functools.wraps(func)
    def wrapper(url, *args, **kwargs):
        with remote_errors(url):
            return func(url, *args, **kwargs)
    return wrapper
