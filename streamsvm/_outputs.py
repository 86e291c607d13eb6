"""Checks, before the first pass, that a run's outputs can be written.

A training run that cannot write its model, checkpoints or scratch files should fail in
its first second, not after hours: each check writes and removes a small probe file (a
probe object on remote filesystems) where the output will go, and turns any failure into
:class:`~streamsvm.exceptions.OutputNotWritableError` naming the location and the reason
the operating system (or fsspec) gave.
"""

from __future__ import annotations

import os
import uuid

from .exceptions import OutputNotWritableError
from .io import is_local, join_url, url_to_fs

__all__ = ["check_writable_file", "check_writable_dir"]


def check_writable_file(url, *, what: str, storage_options=None) -> None:
    """Check that a file can be written at ``url`` (created or replaced).

    Locally: ``url`` is not a directory, its parent directory exists or can be created,
    and a probe file can be created and removed there. Remote: ``url`` is not a
    directory (prefix) and a probe object next to it can be written and removed.

    Parameters
    ----------
    url : str or os.PathLike
        Local path or fsspec URL of the file.
    what : str
        What the file is, for the message (e.g. ``"model output (-o)"``).
    storage_options : dict, optional

    Raises
    ------
    OutputNotWritableError
    """
    url = os.fspath(url)
    if is_local(url):
        local = _local_path(url)
        if os.path.isdir(local):
            raise OutputNotWritableError(f"{what} {url!r} is an existing directory; give a "
                                         f"file name")
        try:
            _probe_local(os.path.dirname(os.path.abspath(local)))
        except OSError as exc:
            raise OutputNotWritableError(f"cannot write the {what} {url!r}: "
                                         f"{_reason(exc)}") from exc
        return
    fs, path = url_to_fs(url, storage_options)
    try:
        is_dir = fs.isdir(path)
    except Exception:  # noqa: BLE001 — the probe below reports what is wrong
        is_dir = False
    if is_dir:
        raise OutputNotWritableError(f"{what} {url!r} is an existing directory; give a "
                                     f"file name")
    _probe_remote(fs, path.rstrip("/").rsplit("/", 1)[0] if "/" in path.rstrip("/") else "",
                  f"cannot write the {what} {url!r}")


def check_writable_dir(url, *, what: str, storage_options=None) -> None:
    """Check that files can be written under the directory ``url`` (created if missing).

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
    if is_local(url):
        try:
            _probe_local(_local_path(url))
        except OSError as exc:
            raise OutputNotWritableError(f"cannot write to the {what} {url!r}: "
                                         f"{_reason(exc)}") from exc
        return
    fs, path = url_to_fs(url, storage_options)
    _probe_remote(fs, path, f"cannot write to the {what} {url!r}")


def _local_path(url: str) -> str:
    return url[len("file://"):] if url.startswith("file://") else url


def _probe_local(directory: str) -> None:
    """Create ``directory`` if missing, then create, write and remove a probe file in it."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise NotADirectoryError(20, "Not a directory", directory)
    os.makedirs(directory, exist_ok=True)
    probe = os.path.join(directory, f".streamsvm-probe-{uuid.uuid4().hex[:8]}")
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, b"streamsvm write probe\n")
    finally:
        os.close(fd)
        os.remove(probe)


def _probe_remote(fs, directory: str, message: str) -> None:
    """Write and remove a probe object under ``directory`` (object stores need no mkdir)."""
    probe = join_url(directory, f".streamsvm-probe-{uuid.uuid4().hex[:8]}")
    try:
        fs.pipe_file(probe, b"streamsvm write probe\n")
        fs.rm_file(probe)
    except Exception as exc:  # noqa: BLE001 — any failure means: not writable
        raise OutputNotWritableError(f"{message}: {_reason(exc)}") from exc


def _reason(exc: BaseException) -> str:
    """The OS reason of ``exc``: ``strerror`` and the file it concerns, else its text."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror + (f": {exc.filename!r}" if exc.filename else "")
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
