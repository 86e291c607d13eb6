"""Opening a store: its attributes found, checked and turned into a :class:`~._store.Store`
(``open_store``, ``open_meta``, ``read_meta``), an unfinished conversion told apart.

Layout (DESIGN.md §3): a Zarr v3 group with arrays ``indptr`` (int64, n_rows + 1),
``indices`` (int32, or int64 when n_features >= 2**31), ``data`` (float32/float64; absent
when every stored value is 1.0) and ``y`` (float32 ±1 for binary, int32 class index for
multiclass). Group attribute ``streamsvm`` holds the metadata, with ``complete: true``
written last by the converter.
"""

from __future__ import annotations

import json

from ..exceptions import IncompleteStoreError, StoreCorruptError, StoreError, StoreNotFoundError
from ._attrs import check_meta
from ._integrity import check_attrs
from ._store import Store
from ._urls import join_url, names_remote_errors, url_to_fs

__all__ = ["ATTRS_KEY", "FORMAT_VERSION", "open_meta", "open_store", "read_meta"]

FORMAT_VERSION = 3
"""Version 3: every chunk written and checksummed (CRC-32C), attributes sealed, the largest
feature id (``max_index``) recorded so that ``n_features`` can be checked. Older stores are
refused: convert the input again."""
_OLD_VERSIONS = {1: "written before chunks were checksummed",
                 2: "written before its attributes recorded the largest feature id"}
ARRAY_NAMES = ("indptr", "indices", "data", "y", "y_raw")
"""The arrays the converter writes into a store (``y_raw`` until it finishes)."""
ATTRS_KEY = "streamsvm"


def _zarr_store(url: str, storage_options: dict | None, mode: str):
    """Map a URL onto a zarr store object (the only place URLs become zarr stores)."""
    import zarr.storage
    from ._urls import is_local
    if is_local(url):
        fs, path = url_to_fs(url, storage_options)
        return zarr.storage.LocalStore(path, read_only=(mode == "r"))
    return zarr.storage.FsspecStore.from_url(url, storage_options=dict(storage_options or {}),
                                             read_only=(mode == "r"))


@names_remote_errors          # the first touch of a store: no credentials, no endpoint
def read_meta(url: str, storage_options: dict | None = None) -> dict | None:
    """The ``streamsvm`` attributes of the group at ``url``, or None if there is none."""
    fs, path = url_to_fs(url, storage_options)
    key = join_url(path, "zarr.json")
    if not fs.exists(key):
        return None
    try:
        raw = fs.cat_file(key)
    except OSError as exc:
        raise StoreError(f"store {url!r}: cannot read zarr.json: {exc}") from exc
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise StoreCorruptError(f"store {url!r} is damaged: its zarr.json is not valid JSON "
                                f"({exc})") from exc
    attrs = doc.get("attributes") if isinstance(doc, dict) else None
    meta = attrs.get(ATTRS_KEY) if isinstance(attrs, dict) else None
    if meta is not None and not isinstance(meta, dict):
        raise StoreCorruptError(f"store {url!r} is damaged: its '{ATTRS_KEY}' attributes are "
                                f"not a JSON object")
    return meta


def is_bare_group(url: str, storage_options: dict | None = None) -> bool:
    """Whether ``url`` holds a Zarr group with no attributes and nothing but arrays the
    converter writes (or none): a conversion killed before it wrote its first attributes
    (stores written before the converter created its group with them)."""
    fs, path = url_to_fs(url, storage_options)
    try:
        doc = json.loads(fs.cat_file(join_url(path, "zarr.json")))
        names = {n.rstrip("/").rsplit("/", 1)[-1] for n in fs.ls(path, detail=False)}
    except (OSError, ValueError):
        return False
    return (isinstance(doc, dict) and doc.get("node_type") == "group"
            and doc.get("attributes", {}) == {}
            and names <= {"zarr.json", *ARRAY_NAMES})


def _unfinished(url: str, meta: dict | None) -> IncompleteStoreError:
    progress = (meta or {}).get("progress")
    progress = progress if isinstance(progress, dict) else {}
    rows = progress.get("rows_done", 0)
    if progress.get("input"):
        how = "Continue it with 'streamsvm convert ... --resume' or convert again."
    else:
        how = "It has no resume point: convert the input again."
    return IncompleteStoreError(f"store {url!r} is incomplete: its conversion did not finish "
                                f"(rows written so far: {rows}). {how}")


def open_store(url, *, storage_options: dict | None = None) -> Store:
    """Open a complete store for reading.

    Parameters
    ----------
    url : str or os.PathLike or Store
        Local path or fsspec URL (``s3://bucket/train.zarr``).
    storage_options : dict, optional
        Passed to fsspec (e.g. ``{"endpoint_url": ...}`` for S3).

    Raises
    ------
    StoreNotFoundError
        Nothing at ``url``, or not a streamsvm store.
    IncompleteStoreError
        The conversion that writes it did not finish.
    StoreCorruptError
        Its attributes fail their checksum or contradict the store (``_attrs.py``), or an
        array's ``zarr.json`` fails its CRC or contradicts the attributes.
    """
    if isinstance(url, Store):
        if storage_options:
            raise TypeError("storage_options given together with an already opened Store")
        return url
    store = open_meta(str(url), storage_options)
    store._open_arrays()
    return store


def open_meta(url: str, storage_options: dict | None = None) -> Store:
    """:func:`open_store` without opening the arrays: the attributes checked (``verify``
    opens the arrays itself, to list every problem)."""
    meta = read_meta(url, storage_options)
    if meta is None:
        if is_bare_group(url, storage_options):
            raise _unfinished(url, None)
        raise StoreNotFoundError(f"no streamsvm store at {url!r} (no zarr.json with "
                                 f"'{ATTRS_KEY}' attributes)")
    if "checksum" in meta:              # sealed at the end of a conversion: check it first
        check_attrs(url, meta)
        if meta.get("complete") is not True:
            found = f"is {meta['complete']!r}" if "complete" in meta else "is missing"
            raise StoreCorruptError(
                f"store {url!r} is damaged: attribute 'complete' {found}, but only a finished "
                f"conversion seals the attributes; convert the input again")
    if not meta.get("complete"):
        raise _unfinished(url, meta)
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        why = f" ({_OLD_VERSIONS[version]})" if isinstance(version, int) and \
            version in _OLD_VERSIONS else ""
        raise StoreError(f"store {url!r} has format version {version!r}{why} (attribute "
                         f"'format_version'); this streamsvm reads version {FORMAT_VERSION}: "
                         f"convert the input again")
    check_attrs(url, meta)
    check_meta(url, meta)
    return Store(url, storage_options, meta)
