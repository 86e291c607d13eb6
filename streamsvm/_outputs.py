"""Checks, before any data is read, that a command's outputs can be written.

A run that cannot write its model, predictions, checkpoints or scratch files should fail
in its first second, not after hours: each check writes and removes a small probe file (a
probe object on remote filesystems) where the output will go, and turns any failure into
:class:`~streamsvm.exceptions.OutputNotWritableError` naming the location and the reason
the operating system (or fsspec) gave.

Missing directories are never created for an output *file* (``-o``): its directory must
exist, so a mistyped path does not grow directories (``/nonexistent/dir/m.json``). An
output *directory* (``--checkpoint``, ``--scratch-dir``, ``--workdir``) is created when
missing, but only that one level: its parent must exist. Outputs that are written in place
(``-``, ``/dev/stdout``, a device, a FIFO; see :func:`streamsvm.io.open_output`) are
checked for write permission only, never opened (a FIFO would block).
"""

from __future__ import annotations

import errno
import os
import uuid

from .exceptions import InvalidParameterError, OutputNotWritableError
from .io import STDOUT, access_error, is_local, join_url, output_target, url_to_fs

__all__ = ["check_writable_file", "check_writable_dir", "check_not_an_input"]


def check_writable_file(url, *, what: str, storage_options=None) -> None:
    """Check that a file can be written at ``url`` (created or replaced).

    Locally: ``url`` is ``-``, or names a device or FIFO this process may write, or is not
    a directory, its directory (through symbolic links) exists, and a probe file can be
    created and removed there. Remote: ``url`` is not a directory (prefix) and a probe
    object next to it can be written and removed.

    Parameters
    ----------
    url : str or os.PathLike
        ``-``, a local path or an fsspec URL of the file.
    what : str
        What the file is, for the message (e.g. ``"model output (-o)"``).
    storage_options : dict, optional

    Raises
    ------
    OutputNotWritableError
    """
    url = os.fspath(url)
    if url == STDOUT:
        return
    if not is_local(url):
        _check_remote_file(url, what, storage_options)
        return
    try:
        kind, where = output_target(url)
        if kind == "stream":
            return
        if kind == "in_place":
            if not os.access(where, os.W_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), where)
            return
        parent = os.path.dirname(where)
        if not os.path.lexists(parent):
            raise OutputNotWritableError(f"cannot write the {what} {url!r}: directory "
                                         f"{parent!r} does not exist")
        _probe_local(parent)
    except OutputNotWritableError:
        raise
    except IsADirectoryError:
        raise OutputNotWritableError(f"{what} {url!r} is an existing directory; give a "
                                     f"file name") from None
    except OSError as exc:
        raise OutputNotWritableError(f"cannot write the {what} {url!r}: "
                                     f"{_reason(exc)}") from exc


def check_not_an_input(url, inputs, *, what: str) -> None:
    """Refuse an output file that is one of ``inputs`` (the same local file, whatever the
    names): it would be replaced by what is computed from it.

    Raises
    ------
    InvalidParameterError
    """
    url = os.fspath(url)
    if url == STDOUT or not is_local(url):
        return
    for inp in inputs:
        inp = os.fspath(inp)
        try:
            same = is_local(inp) and os.path.samefile(output_target(url)[1], inp)
        except (OSError, TypeError):        # either missing: not the same file
            same = False
        if same:
            raise InvalidParameterError(f"{what} {url!r} is the input {inp!r}: it would be "
                                        f"replaced; choose another output")


def _check_remote_file(url: str, what: str, storage_options) -> None:
    fs, path = url_to_fs(url, storage_options)
    try:
        is_dir = fs.isdir(path)
    except Exception:  # noqa: BLE001 — the probe below reports what is wrong
        is_dir = False
    if is_dir:
        raise OutputNotWritableError(f"{what} {url!r} is an existing directory; give a "
                                     f"file name")
    _probe_remote(fs, path.rstrip("/").rsplit("/", 1)[0] if "/" in path.rstrip("/") else "",
                  f"cannot write the {what} {url!r}", url)


def check_writable_dir(url, *, what: str, storage_options=None) -> None:
    """Check that files can be written under the directory ``url``, created if missing
    (its parent must exist locally: the directory is created, its parents are not).

    Parameters
    ----------
    url : str or os.PathLike
        Local path or fsspec URL of the directory.
    what : str
        What the directory is for, for the message (e.g. ``"checkpoint directory"``).
    storage_options : dict, optional

    Raises
    ------
    OutputNotWritableError
    """
    url = os.fspath(url)
    fs, path = url_to_fs(url, storage_options)
    if is_local(url):
        local = os.path.abspath(path)
        parent = os.path.dirname(local)
        if not os.path.lexists(local) and not os.path.lexists(parent):
            raise OutputNotWritableError(f"cannot write to the {what} {url!r}: its parent "
                                         f"directory {parent!r} does not exist (streamsvm "
                                         f"creates the directory, not its parents)")
        try:
            _probe_local(local)
        except OSError as exc:
            raise OutputNotWritableError(f"cannot write to the {what} {url!r}: "
                                         f"{_reason(exc)}") from exc
        return
    _probe_remote(fs, path, f"cannot write to the {what} {url!r}", url)


def _probe_local(directory: str) -> None:
    """Create ``directory`` if missing (not its parents), then create, write and remove a
    probe file in it."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise NotADirectoryError(20, "Not a directory", directory)
    if not os.path.isdir(directory):
        os.mkdir(directory)
    probe = os.path.join(directory, f".streamsvm-probe-{uuid.uuid4().hex[:8]}")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:          # name the directory, not the probe's made-up name
        raise type(exc)(exc.errno, exc.strerror, directory) from None
    try:
        os.write(fd, b"streamsvm write probe\n")
    finally:
        os.close(fd)
        os.remove(probe)


def _probe_remote(fs, directory: str, message: str, url: str) -> None:
    """Write and remove a probe object under ``directory`` (object stores need no mkdir)."""
    probe = join_url(directory, f".streamsvm-probe-{uuid.uuid4().hex[:8]}")
    try:
        fs.pipe_file(probe, b"streamsvm write probe\n")
        fs.rm_file(probe)
    except Exception as exc:  # noqa: BLE001 — any failure means: not writable
        raise OutputNotWritableError(f"{message}: {access_error(exc, url) or _reason(exc)}") \
            from exc


def _reason(exc: BaseException) -> str:
    """The OS reason of ``exc``: ``strerror`` and the file it concerns, else its text."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror + (f": {exc.filename!r}" if exc.filename else "")
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
