"""An exclusive lock on an output location, so that two processes never write one output.

``convert`` holds one on its output store and ``train`` on its checkpoint directory for as
long as they write there; a second process asking for the same lock stops at once with
:class:`~streamsvm.exceptions.OutputLockedError` naming the holder: "output X is being
written by process 1234 on host H (streamsvm convert ...) since T".

Where the lock lives. For a store, ``<output>.lock`` beside it (the store itself may be
removed and created again under the lock); for a checkpoint directory, which is never
removed, ``<directory>/.streamsvm.lock`` inside it (``inside=True``). Either holds the
holder's pid, host, command, start time and a random token, as JSON, and is removed when the
lock is released.

Local filesystems: an ``fcntl.flock`` on the lock file. The kernel releases it when the
holder exits in any way (a crash or SIGKILL included), so a lock file left behind is never
stale: the next process simply takes it. Taking it checks that the file locked is still the
one at the path (a releasing holder unlinks it), so two processes can never both hold it.

Object stores (S3 and any fsspec filesystem with exclusive create): a marker object created
with ``pipe_file(mode="create")``, which s3fs sends as a conditional PUT (``If-None-Match:
*``): of two processes creating it, exactly one succeeds. No one releases a marker whose
holder was killed, so the stale-marker rule is deliberately simple: a marker written on
*this* host by a process that no longer exists is stale, and is replaced (the replacement
is serialised by a local ``flock``, so two processes of this host cannot both take it
over). A marker from another host is never presumed stale: the message names it and says to
delete it if that process is gone. Markers written with the same pid by a later, unrelated
process are taken as live (the safe side).
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import logging
import os
import shlex
import socket
import sys
import tempfile
import time
import uuid

from ..exceptions import OutputLockedError, OutputNotWritableError, RemoteAccessError
from ._urls import access_error, is_local, join_url, url_to_fs

__all__ = ["OutputLock"]

log = logging.getLogger(__name__)

LOCK_SUFFIX = ".lock"
LOCK_NAME = ".streamsvm.lock"
_READ_WAIT = 2.0        # seconds a loser waits for a new holder to write its details


class OutputLock:
    """An exclusive lock on the output ``url`` (module doc); a context manager.

    Parameters
    ----------
    url : str or path-like
        The output: a store (the lock is ``<url>.lock``) or, with ``inside=True``, a
        directory that is kept (the lock is ``<url>/.streamsvm.lock``).
    what : str
        What the output is, for messages (``"output"``, ``"checkpoint directory"``).
    storage_options : dict, optional
        fsspec options of a remote ``url``.
    inside : bool
        Put the lock inside the directory ``url`` instead of beside it.

    Raises
    ------
    OutputLockedError
        From :meth:`acquire`: another process holds the lock (it is named).
    OutputNotWritableError
        From :meth:`acquire`: the lock cannot be created there.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "s.zarr")
    >>> with OutputLock(out):
    ...     os.path.exists(out + ".lock")
    True
    >>> os.path.exists(out + ".lock")
    False
    """

    def __init__(self, url, *, what: str = "output", storage_options=None,
                 inside: bool = False):
        self.url, self.what = os.fspath(url), what
        base = self.url.rstrip("/") or self.url
        self.lock_url = join_url(base, LOCK_NAME) if inside else base + LOCK_SUFFIX
        self.local = is_local(self.url)
        self._so = storage_options
        self._fd = None
        self._token = None

    # -- the public side -------------------------------------------------------------
    def acquire(self) -> "OutputLock":
        """Take the lock, or raise at once naming its holder (never waits for it)."""
        if self._fd is not None or self._token is not None:
            return self
        info = {"pid": os.getpid(), "host": socket.gethostname(), "command": _command(),
                "started": _now(), "token": uuid.uuid4().hex}
        if self.local:
            self._acquire_local(info)
        else:
            self._acquire_remote(info)
        log.debug("locked %s %s (%s)", self.what, self.url, self.lock_url)
        return self

    def release(self) -> None:
        """Give the lock back and remove the lock file or marker (never raises)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.unlink(os.path.abspath(_local_path(self.lock_url)))  # still holding it
            os.close(fd)
        if self._token is not None:
            token, self._token = self._token, None
            try:
                fs, path = url_to_fs(self.lock_url, self._so)
                if (_parse(fs.cat_file(path)) or {}).get("token") == token:
                    fs.rm_file(path)
            except Exception as exc:  # noqa: BLE001 — releasing must not hide the result
                log.warning("could not remove the lock marker %s: %s", self.lock_url, exc)

    def __enter__(self) -> "OutputLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    # -- local: flock ------------------------------------------------------------------
    def _acquire_local(self, info: dict) -> None:
        import fcntl
        path = os.path.abspath(_local_path(self.lock_url))   # as fsspec resolves the output
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            while True:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = _read_local(fd)
                    os.close(fd)
                    raise OutputLockedError(self._message(holder), holder=holder) from None
                except BaseException:
                    os.close(fd)
                    raise
                if _same_file(fd, path):
                    break
                os.close(fd)      # a holder released and unlinked it meanwhile: again
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(info).encode() + b"\n", 0)   # (for readers only)
            except BaseException:
                os.close(fd)
                raise
        except OutputLockedError:
            raise
        except OSError as exc:
            raise OutputNotWritableError(f"cannot lock the {self.what} {self.url!r}: cannot "
                                         f"write its lock file {path!r}: "
                                         f"{exc.strerror or exc}") from exc
        self._fd = fd

    # -- object stores: a conditional-create marker --------------------------------------
    def _acquire_remote(self, info: dict) -> None:
        fs, path = url_to_fs(self.lock_url, self._so)
        data = json.dumps(info).encode()
        if self._create(fs, path, data):
            self._token = info["token"]
            return
        holder = _read_remote(fs, path)
        if holder is not None and _gone(holder):
            with _host_lock(self.lock_url):          # one taker on this host at a time
                again = _read_remote(fs, path)
                if again is not None and again.get("token") == holder.get("token"):
                    fs.rm_file(path)
                    log.warning("removed the stale lock marker %s of process %s on this "
                                "host, which no longer exists", self.lock_url, holder["pid"])
                if self._create(fs, path, data):
                    self._token = info["token"]
                    return
                holder = _read_remote(fs, path)
        raise OutputLockedError(self._message(holder) + f"; if that process is gone, delete "
                                f"the lock marker {self.lock_url}", holder=holder)

    def _create(self, fs, path, data) -> bool:
        """Create the marker if no object is there (True), else False."""
        try:
            fs.pipe_file(path, data, mode="create")
            return True
        except FileExistsError:
            return False
        except (TypeError, NotImplementedError, ValueError) as exc:
            raise OutputNotWritableError(
                f"cannot lock the {self.what} {self.url!r}: its filesystem "
                f"({type(fs).__name__}) does not create objects exclusively "
                f"(pipe_file(mode='create')): {exc}") from exc
        except Exception as exc:  # noqa: BLE001 — permissions, network: not writable
            why = access_error(exc, self.url)
            if why is not None:        # credentials, the endpoint: what to check
                raise RemoteAccessError(f"cannot access {self.url!r}: {why}") from exc
            raise OutputNotWritableError(f"cannot lock the {self.what} {self.url!r}: cannot "
                                         f"write its lock marker {self.lock_url}: "
                                         f"{type(exc).__name__}: {exc}") from exc

    def _message(self, holder) -> str:
        if not holder:
            return (f"{self.what} {self.url} is being written by another process (its lock "
                    f"{self.lock_url} does not say which)")
        return (f"{self.what} {self.url} is being written by process {holder.get('pid')} on "
                f"host {holder.get('host')} ({holder.get('command')}) since "
                f"{holder.get('started')}")


def _command() -> str:
    """This process's command line, as the user typed it for the CLI."""
    argv = list(sys.argv)
    if argv and os.path.basename(argv[0]) in ("cli.py", "__main__.py", "streamsvm"):
        argv[0] = "streamsvm"
    text = shlex.join(argv) if argv else sys.executable
    return text if len(text) <= 200 else text[:197] + "..."


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _local_path(url: str) -> str:
    return url[len("file://"):] if url.startswith("file://") else url


def _same_file(fd: int, path: str) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


def _parse(data) -> dict | None:
    try:
        holder = json.loads(data)
    except ValueError:
        return None
    return holder if isinstance(holder, dict) else None


def _read_local(fd: int) -> dict | None:
    """The holder's details from its lock file (it writes them right after locking)."""
    deadline = time.monotonic() + _READ_WAIT
    while True:
        holder = _parse(os.pread(fd, 4096, 0))
        if holder is not None or time.monotonic() > deadline:
            return holder
        time.sleep(0.02)


def _read_remote(fs, path) -> dict | None:
    try:
        return _parse(fs.cat_file(path))
    except FileNotFoundError:
        return None


def _gone(holder: dict) -> bool:
    """Whether the marker's holder ran on this host and its process no longer exists."""
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@contextlib.contextmanager
def _host_lock(url: str):
    """A local flock named after ``url``: serialises stale-marker takeovers on this host."""
    import fcntl
    name = "streamsvm-lock-" + hashlib.sha256(url.encode()).hexdigest()[:16]
    fd = os.open(os.path.join(tempfile.gettempdir(), name), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)

