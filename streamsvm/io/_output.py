"""A conversion's output location: checked before anything is written (its directory, an
input it would destroy, what is already there), prepared (an unfinished store continued or
removed, a complete one replaced only on request), and tidied after a failed write."""

from __future__ import annotations

import contextlib
import logging
import os

from ..exceptions import (InvalidParameterError, OutputNotWritableError, StoreExistsError,
                          StoreWriteError, StreamSVMError)
from ._store_open import ATTRS_KEY, is_bare_group, read_meta
from ._urls import is_local, join_url, missing_parent, url_to_fs

__all__ = ["prepare_output", "check_output_parent", "check_not_an_input", "write_errors",
           "clean_failed_output"]

log = logging.getLogger(__name__)


def prepare_output(url: str, storage_options=None, *, overwrite: bool = False,
                   resume: bool = False, inputs=()) -> dict | None:
    """Check the output location; return the unfinished store's meta when resuming.

    A complete store is replaced only with ``overwrite``; an unfinished one is continued
    with ``resume`` and otherwise removed (a clean restart). A bare group of ours (a
    conversion killed before its first attributes, :func:`is_bare_group`) is an unfinished
    store without a resume point. ``overwrite`` also replaces an empty directory. Anything
    else at the URL (a file, a directory that is not a streamsvm store) is left alone, as is
    any location that is, contains or lies inside one of ``inputs``: those raise before
    anything is deleted.
    """
    fs, path = url_to_fs(url, storage_options)
    check_output_parent(url, storage_options)
    check_not_an_input(url, inputs, storage_options)
    meta = read_meta(url, storage_options)
    if meta is None and is_bare_group(url, storage_options):
        meta = {"complete": False, "progress": {"rows_done": 0, "input": None}}
    if meta is not None and not meta.get("complete"):
        if resume:
            return meta
        log.info("removing the unfinished store at %s (restarting its conversion)", url)
        fs.rm(path, recursive=True)
        return None
    if fs.exists(path):
        empty_dir = meta is None and fs.isdir(path) and not fs.ls(path, detail=False)
        if meta is None and not empty_dir:
            raise StoreExistsError(
                f"output {url!r} exists and is not a streamsvm store: {_describe(fs, path)}. "
                f"It is left alone (--overwrite replaces only a streamsvm store or an empty "
                f"directory); remove it or choose another output")
        if not overwrite:
            what = "a complete streamsvm store" if meta is not None else "an empty directory"
            raise StoreExistsError(f"output {url!r} already exists ({what}); pass --overwrite "
                                   f"(overwrite=True) to replace it")
        fs.rm(path, recursive=True)
    return None


def check_output_parent(url: str, storage_options=None) -> None:
    """Refuse a local store output whose parent directory does not exist (never ``mkdir
    -p`` a mistyped path)."""
    if is_local(url):
        path = url_to_fs(url, storage_options)[1]
        missing = missing_parent(path)
        if missing:
            raise OutputNotWritableError(f"cannot write the store {url!r}: directory "
                                         f"{missing!r} does not exist")
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise OutputNotWritableError(f"cannot write the store {url!r}: Not a directory: "
                                         f"{parent!r}")


def _describe(fs, path: str) -> str:
    """What is at ``path`` (a file, a Zarr node, a directory), in a few words."""
    if not fs.isdir(path):
        return f"a file of {fs.size(path):,} bytes"
    if fs.exists(join_url(path, "zarr.json")):
        return f"a Zarr node without '{ATTRS_KEY}' attributes"
    names = sorted(n.rstrip("/").rsplit("/", 1)[-1] for n in fs.ls(path, detail=False))
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    entries = "entry" if len(names) == 1 else "entries"
    return f"a directory holding {len(names)} {entries} ({shown})"


def _location(url: str, storage_options) -> tuple[str, str, str]:
    """``(protocol, normalized path, separator)``: local paths fully resolved (symlinks,
    ``..``, relative), URLs as fsspec normalizes them."""
    fs, path = url_to_fs(url, storage_options)
    if is_local(url):
        return "file", os.path.realpath(path), os.sep
    proto = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return proto, path.rstrip("/"), "/"


def check_not_an_input(url: str, inputs, storage_options) -> None:
    """Refuse an output that is, contains or lies inside an input (whatever ``overwrite``)."""
    proto, out, sep = _location(url, storage_options)
    for inp in inputs:
        proto_i, path, _ = _location(inp, storage_options)
        if proto_i != proto:
            continue
        if path == out:
            how = "is the input"
        elif path.startswith(out.rstrip(sep) + sep):
            how = "contains the input"
        elif out.startswith(path.rstrip(sep) + sep):
            how = "lies inside the input"
        else:
            continue
        raise InvalidParameterError(f"output {url!r} {how} {inp!r}, which would be "
                                    f"destroyed: choose another output location")


@contextlib.contextmanager
def write_errors(what: str, hint: str = ""):
    """Turn an ``OSError`` raised while writing ``what`` (no space left, a read-only file
    system, ...) into a :class:`StoreWriteError` naming it and the operating system's reason."""
    try:
        yield
    except StreamSVMError:
        raise
    except OSError as exc:
        err = StoreWriteError(f"cannot write {what}: {exc.strerror or exc}{hint}")
        err.errno = exc.errno
        raise err from exc


def clean_failed_output(url: str, storage_options=None, *,
                        keep_resume_point: bool = True) -> str:
    """After a failed write, tidy the unfinished store at ``url``; say what was done.

    Zarr's temporary ``*.partial`` files are removed. The store is kept when it has a resume
    point (``convert --resume`` continues it once there is space again) and
    ``keep_resume_point``, and removed otherwise (bad input: resuming cannot fix it). Call it
    only for a store this conversion created or continued.
    """
    fs, path = url_to_fs(url, storage_options)
    try:
        partial = [f for f in fs.find(path) if f.endswith(".partial")]
        if partial:
            fs.rm(partial)
        meta = read_meta(url, storage_options)
        progress = (meta or {}).get("progress") or {}
        if meta is not None and not meta.get("complete") and progress.get("input") and \
                keep_resume_point:
            return (f"the unfinished store keeps its resume point ({progress['rows_done']:,} "
                    f"rows written): free space, then run the same command with --resume to "
                    f"continue")
        if not fs.exists(path):
            return "no store was left behind"
        fs.rm(path, recursive=True)
        return "the unfinished store was removed"
    except (OSError, StreamSVMError) as exc:
        return f"the unfinished store could not be removed ({exc}): delete {url!r} yourself"
