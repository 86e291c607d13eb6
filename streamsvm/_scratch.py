"""Private scratch folders and the disk space their files take.

Training spills per-row state and resident rows to files in a private folder
(``streamsvm-state-*``), ``convert --shuffle`` its buckets (``streamsvm-shuffle-*``), both
under ``--scratch-dir`` (default: the system temporary directory). Three rules:

* **Reserve before use.** A file that is memory-mapped gets its blocks allocated up front
  (:func:`reserve_file`, ``posix_fallocate``): a write into a mapping of a sparse file on a
  full disk kills the process with SIGBUS, no message and nothing cleaned up. The free space
  is checked first (``statvfs``), so a file that cannot fit is refused at once, naming the
  directory, the bytes needed and the bytes free. Where the file system cannot reserve
  (``EOPNOTSUPP``), the ``statvfs`` check alone stands.
* **Owned.** Each private folder holds an owner file (:data:`OWNER`: pid, host, boot, pid
  namespace and process start time); :func:`sweep_stale` removes the folders of processes
  that are gone (same host and pid namespace, pid not running or started at another time:
  a reused pid; or the machine rebooted since), never those of a live one, of another
  machine or container, nor folders without a readable owner file.
* **Removed** when the run ends, including on SIGINT/SIGTERM (the CLI turns both into
  ``KeyboardInterrupt``, and every owner removes its folder in a ``finally``).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import socket
import tempfile

from .exceptions import OutputNotWritableError

__all__ = ["PREFIXES", "OWNER", "private_dir", "sweep_stale", "sweep_once", "free_bytes",
           "reserve_file", "no_room", "format_bytes", "owner_record", "owner_gone"]

logger = logging.getLogger(__name__)

#: Name prefixes of the private folders (the only folders :func:`sweep_stale` looks at).
PREFIXES = ("streamsvm-state-", "streamsvm-shuffle-")
#: The owner file inside each private folder.
OWNER = ".owner.json"
#: Bytes reserved per ``posix_fallocate`` call: a poll for interruption between them.
RESERVE_STEP = 1 << 30
#: ``posix_fallocate`` errors meaning "this file system cannot reserve", not "no space".
_UNSUPPORTED = {errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS, errno.ENODEV}
#: Errors meaning "no room": reported with the numbers.
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_HINT = "free space there or pass --scratch-dir (scratch_dir=) on a larger disk"
_swept: set = set()


def format_bytes(n: int) -> str:
    """``n`` bytes for messages: "512 B", "12 kB", "3.2 MB", "8 TB"."""
    n = int(n)
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def free_bytes(path) -> int:
    """Bytes an unprivileged user may still write on the file system of ``path`` (or of its
    nearest existing ancestor)."""
    path = os.path.abspath(os.fspath(path))
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    st = os.statvfs(path)
    return int(st.f_bavail) * int(st.f_frsize)


def no_room(directory: str, what: str, need: int, free: int) -> OutputNotWritableError:
    """The error for ``what`` not fitting the scratch ``directory``: the bytes needed and
    free named, ``errno`` ENOSPC."""
    err = OutputNotWritableError(f"scratch directory {directory!r}: {format_bytes(need)} "
                                 f"needed for {what}, {format_bytes(free)} free; {_HINT}")
    err.errno = errno.ENOSPC
    return err


def reserve_file(path: str, nbytes: int, *, directory: str, what: str, pending: int = 0,
                 poll=None) -> bool:
    """Give the file ``path`` its size ``nbytes`` with every block allocated.

    Parameters
    ----------
    path : str
        An existing file (its content is kept; the new bytes read as zeros).
    nbytes : int
    directory : str
        The scratch directory to name in messages.
    what : str
        What the file holds, for messages (``"per-row state 'dcd.alpha'"``).
    pending : int
        Bytes other files in the same place were promised but could not reserve (the
        ``statvfs`` fallback): they count against the free space too.
    poll : callable, optional
        Called between steps of :data:`RESERVE_STEP` bytes (may raise to interrupt).

    Returns
    -------
    bool
        True if the blocks are reserved; False if the file system cannot reserve (the file
        is then sparse, checked against the free space only; logged at debug level).

    Raises
    ------
    OutputNotWritableError
        Not enough room: the directory, the bytes needed and the bytes free named.
    """
    nbytes = int(nbytes)
    free = free_bytes(path)
    held = os.stat(path).st_blocks * 512
    if nbytes - held + pending > free:            # refused before any block is allocated
        raise no_room(directory, what, nbytes + pending, free + held)
    fd = os.open(path, os.O_RDWR)
    try:
        done = 0
        while done < nbytes:
            if poll is not None:
                poll()
            step = min(RESERVE_STEP, nbytes - done)
            try:
                os.posix_fallocate(fd, done, step)
            except AttributeError:                  # no posix_fallocate on this platform
                return _sparse(fd, nbytes, directory, "this platform has no posix_fallocate")
            except OSError as exc:
                if exc.errno in _UNSUPPORTED:
                    return _sparse(fd, nbytes, directory, os.strerror(exc.errno))
                if exc.errno in _NO_ROOM:
                    raise no_room(directory, what, nbytes + pending,
                                   free_bytes(path) + os.fstat(fd).st_blocks * 512) from exc
                raise OutputNotWritableError(
                    f"scratch directory {directory!r}: cannot reserve {format_bytes(nbytes)} "
                    f"for {what}: {exc.strerror}; {_HINT}") from exc
            done += step
    finally:
        os.close(fd)
    return True


def _sparse(fd: int, nbytes: int, directory: str, reason: str) -> bool:
    logger.debug("scratch directory %s cannot reserve file space (%s): checked against its "
                 "free space only; a disk filled later by others can still stop the run",
                 directory, reason)
    if os.fstat(fd).st_size < nbytes:
        os.ftruncate(fd, nbytes)                  # sparse: no byte written by hand
    return False


# -- owned private folders -------------------------------------------------------------------

def _proc_stat(pid: int) -> list | None:
    """Fields 3.. of ``/proc/PID/stat`` (state, ppid, ...), or None where unavailable."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def _pid_namespace() -> str | None:
    """This process's pid namespace (containers sharing a host name and a scratch directory
    see other pids)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def owner_record(pid: int | None = None) -> dict:
    """What an owner file records of process ``pid`` (default: this one; its start time in
    clock ticks after boot, field 22 of ``/proc/PID/stat``)."""
    pid = os.getpid() if pid is None else int(pid)
    stat = _proc_stat(pid)
    return {"pid": pid, "host": socket.gethostname(), "boot": _boot_id(),
            "pidns": _pid_namespace(),
            "start": int(stat[19]) if stat and len(stat) > 19 else None}


def owner_gone(record: dict) -> bool:
    """Whether the process an owner file names has certainly ended (same host: its pid is
    not running, is a zombie, or belongs to a process started at another time or boot)."""
    if record.get("host") != socket.gethostname():
        return False                              # another machine's: cannot tell
    boot = _boot_id()
    if record.get("boot") and boot and record["boot"] != boot:
        return True                               # the machine rebooted since
    if record.get("pidns") != _pid_namespace():
        return False                              # another container's pids: cannot tell
    pid = int(record["pid"])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:                       # someone else's live process
        pass
    stat = _proc_stat(pid)
    if stat is None:
        return False
    if stat[0] in ("Z", "X"):                     # killed, not yet reaped
        return True
    start = record.get("start")
    return start is not None and len(stat) > 19 and int(stat[19]) != int(start)


def private_dir(prefix: str, parent=None) -> str:
    """Create a private folder ``prefix*`` under ``parent`` (created if missing; None: the
    system temporary directory) holding this process's owner file; stale folders of dead
    processes there are swept first (once per process and parent)."""
    parent = tempfile.gettempdir() if parent is None else os.fspath(parent)
    os.makedirs(parent, exist_ok=True)
    sweep_once(parent)
    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        tmp = os.path.join(path, OWNER + ".tmp")
        with open(tmp, "w") as f:
            json.dump(owner_record(), f)
        os.replace(tmp, os.path.join(path, OWNER))     # a sweeper never reads half a file
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


def sweep_once(parent=None) -> None:
    """:func:`sweep_stale` on ``parent``, the first time this process asks."""
    parent = os.path.abspath(tempfile.gettempdir() if parent is None else os.fspath(parent))
    if parent not in _swept:
        _swept.add(parent)
        sweep_stale(parent)


def sweep_stale(parent=None) -> list[str]:
    """Remove the private folders under ``parent`` whose owner process is gone.

    Returns
    -------
    list of str
        The folders removed (each logged at INFO level).
    """
    parent = tempfile.gettempdir() if parent is None else os.fspath(parent)
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    removed = []
    for name in names:
        if not name.startswith(PREFIXES):
            continue
        path = os.path.join(parent, name)
        try:
            with open(os.path.join(path, OWNER)) as f:
                record = json.load(f)
            gone = owner_gone(record)
        except (OSError, ValueError, TypeError, KeyError):
            continue                              # no owner file (yet): not ours to judge
        if gone:
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.exists(path):
                removed.append(path)
                logger.info("removed %s, left behind by process %s (no longer running)",
                            path, record.get("pid"))
    return removed
