"""URL handling: the one place a string becomes an fsspec filesystem and path."""

from __future__ import annotations

import os

__all__ = ["url_to_fs", "join_url", "is_local", "write_atomic"]


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


def write_atomic(path: str, payload, storage_options=None) -> None:
    """Write ``payload`` at ``path`` all at once: locally a private file ``fsync``-ed and
    renamed over ``path``; on an object store one PUT (never a partial object).

    ``payload`` is bytes, or an iterable of bytes pieces: written piece by piece locally (a
    large model's document is never whole in memory), joined for the one PUT."""
    import uuid
    pieces = [payload] if isinstance(payload, (bytes, bytearray, memoryview)) else payload
    if is_local(path):
        local = path[len("file://"):] if path.startswith("file://") else path
        parent = os.path.dirname(os.path.abspath(local))
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, f".{os.path.basename(local)}.{uuid.uuid4().hex[:8]}.partial")
        try:
            with open(tmp, "wb") as f:
                for piece in pieces:
                    f.write(piece)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, local)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return
    fs, p = url_to_fs(path, storage_options)
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        payload = b"".join(pieces)
    fs.pipe_file(p, payload)      # one PUT: an object store never shows a partial object
