"""Values derived from a store's data, cached with it: computed by one run, free for the next.

A solver that spends passes on a property of the data alone (``nesvm``'s Lipschitz constant
``λ_max(Σ x̄ x̄ᵀ/s̄)`` by power iteration, per bias value) records it here. The values live in
the store's group attributes next to the sealed ``streamsvm`` ones, under their own key
(``streamsvm_derived``), so the store's checksum is untouched and plain zarr still reads the
group::

    "streamsvm_derived": {"<name>": {"value": ..., "store_id": "...", "crc": "crc32c:..."}}

A value may carry one float64 array (``nesvm``'s top eigenvectors: too large for JSON), kept
beside the group as ``derived/<name>.npy`` with its shape and CRC-32C in the entry; a missing or
damaged file makes the entry count as absent.

Each entry is tied to the store's identity (``store_id``, or the attributes' checksum) and
carries the CRC-32C of its own JSON: an entry of another store (a store rewritten in place),
or a damaged one, is ignored with a warning and computed again. ``zarr.json`` is rewritten
whole at once (a renamed private file locally, one PUT on an object store). A store that
cannot be written (read-only, no permission) is simply not cached: a log line says so, the
run goes on. An :class:`InMemoryStore` (an estimator's arrays, built anew by every fit) caches
nothing.
"""

from __future__ import annotations

import json
import logging
import warnings

from ._integrity import crc32c
from ._urls import join_url, url_to_fs, write_atomic

__all__ = ["read_derived", "write_derived", "DERIVED_KEY"]

log = logging.getLogger(__name__)

DERIVED_KEY = "streamsvm_derived"


def _identity(store) -> str:
    meta = store.meta
    return str(meta.get("store_id") or meta.get("checksum") or store.fingerprint)


def _crc(name: str, value, ident: str) -> str:
    body = json.dumps([name, value, ident], sort_keys=True, separators=(",", ":"),
                      allow_nan=False).encode()
    return f"crc32c:{crc32c(body):08x}"


def _zarr_json(store):
    fs, path = url_to_fs(store.url, store.storage_options)
    key = join_url(path, "zarr.json")
    return fs, key


def _on_storage(store) -> bool:
    """Whether ``store`` is a store on a filesystem (an InMemoryStore is not)."""
    return store.url != "memory"


def _array_url(store, name: str) -> str:
    return store.url.rstrip("/") + "/derived/" + name + ".npy"


def read_derived(store, name: str, *, with_array: bool = False):
    """The value cached under ``name`` for ``store``, or None (module doc); with
    ``with_array``, ``(value, array)`` (``(None, None)`` when absent)."""
    value = _read_value(store, name) if _on_storage(store) else None
    if not with_array:
        return value
    info = value.get("array") if isinstance(value, dict) else None
    if not isinstance(info, dict):
        return None, None
    import numpy as np
    try:
        fs, path = url_to_fs(_array_url(store, name), store.storage_options)
        raw = fs.cat_file(path)
        ok = f"crc32c:{crc32c(raw):08x}" == info.get("crc")
        arr = np.frombuffer(raw, dtype="<f8").reshape(info["shape"]) if ok else None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.info("store %r: cached array of %s unreadable (%s)", store.url, name, exc)
        arr = None
    if arr is None:
        warnings.warn(f"store {store.url!r}: the array cached with {name!r} is missing or "
                      f"damaged; it is computed again", RuntimeWarning, stacklevel=2)
        return None, None
    return value, np.array(arr)


def _read_value(store, name: str):
    try:
        fs, key = _zarr_json(store)
        doc = json.loads(fs.cat_file(key))
    except (OSError, ValueError) as exc:
        log.info("store %r: no cached %s (%s)", store.url, name, exc)
        return None
    entry = (doc.get("attributes") or {}).get(DERIVED_KEY, {}).get(name)
    if entry is None:
        return None
    ident = _identity(store)
    try:
        ok = entry["store_id"] == ident and entry["crc"] == _crc(name, entry["value"], ident)
    except (KeyError, TypeError, ValueError):
        ok = False
    if not ok:
        warnings.warn(f"store {store.url!r}: the cached {name!r} belongs to another store or "
                      f"is damaged; it is computed again", RuntimeWarning, stacklevel=3)
        return None
    return entry["value"]


def write_derived(store, name: str, value, array=None) -> bool:
    """Cache ``value`` (a JSON-able dict) and optionally one float64 ``array`` under ``name``
    for ``store``; False when the store cannot be written (module doc)."""
    if not _on_storage(store):
        return False
    ident = _identity(store)
    try:
        if array is not None:
            import numpy as np
            raw = np.ascontiguousarray(array, dtype="<f8").tobytes()
            write_atomic(_array_url(store, name), raw, store.storage_options,
                         make_dirs=True)
            value = dict(value, array={"shape": list(np.shape(array)),
                                       "crc": f"crc32c:{crc32c(raw):08x}"})
        fs, key = _zarr_json(store)
        doc = json.loads(fs.cat_file(key))
        attrs = doc.setdefault("attributes", {})
        attrs.setdefault(DERIVED_KEY, {})[name] = {"value": value, "store_id": ident,
                                                   "crc": _crc(name, value, ident)}
        write_atomic(store.url.rstrip("/") + "/zarr.json", json.dumps(doc, indent=2).encode(),
                     store.storage_options)
    except (OSError, ValueError) as exc:
        log.info("store %r: %s not cached (%s: %s)", store.url, name, type(exc).__name__, exc)
        return False
    return True
