"""URL handling: the one place a string becomes an fsspec filesystem and path."""

from __future__ import annotations

import os

__all__ = ["url_to_fs", "join_url", "is_local"]


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
