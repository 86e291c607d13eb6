"""What a store's attributes must satisfy: everything the store itself can prove.

The attributes' checksum (``_integrity.py``) catches accidents, not edits: attributes changed
and sealed again pass it. So each attribute is also checked against what the rest of the
store proves, when the store is opened:

* every key the converter writes is present with its JSON type (never a ``KeyError`` later);
* the counts agree: ``n_chunks`` is ``ceil(n_rows / chunk_rows)``, ``chunk_nnz`` and
  ``chunk_max_sq_norm`` hold one value per chunk, ``chunk_nnz`` sums to ``nnz``;
* ``n_features`` is what the conversion derived: ``options['n_features']`` when one was
  given, else the largest feature id (``max_index``) + 1; ``chunk_rows``, ``dtype`` and
  ``task`` agree with ``options``;
* ``classes`` are finite and strictly increasing (as ``plan_labels`` sorts them), at most two
  for a binary task; ``label_map`` is exactly the map the converter derives from them;
  ``label_counts`` has one positive count per class, summing to ``n_rows``;
* ``array_meta_crc32c`` covers exactly the arrays the store must hold (``data`` absent iff
  ``binary_values``), and each array's ``zarr.json`` (checked against that CRC) gives the
  length and dtype the attributes imply (:func:`array_problem`).

What only the data can prove is checked as it is read: ``chunk_nnz`` against ``indptr`` at
every chunk boundary a read covers (``Store._check_rows``), ``label_counts`` against the
labels in ``y`` the first time they are used (:func:`label_counts_problem`), feature ids
against ``n_features`` and labels against ``classes`` as inner chunks are decoded.
``chunk_max_sq_norm``, ``max_index``, ``store_id``, ``source`` and ``converter`` change no
result (``verify`` checks the first two against the data).
"""

from __future__ import annotations

import math

import numpy as np

from ..exceptions import StoreCorruptError
from ._labels import label_key

__all__ = ["check_meta", "array_names", "array_problem", "boundary_problem", "count_labels",
           "label_codes", "label_counts_problem", "label_map"]

MAX_INDEX_DTYPE32 = 2**31          # n_features an int32 ``indices`` array can address


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _list_of(pred):
    return lambda v: isinstance(v, list) and all(pred(x) for x in v)


def _object_of(pred):
    return lambda v: isinstance(v, dict) and all(pred(x) for x in v.values())


_TYPES = {   # key: (what it must be, test)
    "complete": ("true", lambda v: v is True),
    "n_rows": ("an integer", _is_int),
    "n_features": ("an integer", _is_int),
    "nnz": ("an integer", _is_int),
    "chunk_rows": ("an integer", _is_int),
    "n_chunks": ("an integer", _is_int),
    "max_index": ("an integer", _is_int),
    "n_underflow": ("an integer", _is_int),
    "task": ("a string", lambda v: isinstance(v, str)),
    "classes": ("a list of numbers", _list_of(_is_num)),
    "label_map": ("an object of integers", _object_of(_is_int)),
    "label_counts": ("an object of integers", _object_of(_is_int)),
    "binary_values": ("true or false", lambda v: isinstance(v, bool)),
    "dtype": ("a string", lambda v: isinstance(v, str)),
    "index_dtype": ("a string", lambda v: isinstance(v, str)),
    "chunk_nnz": ("a list of integers", _list_of(_is_int)),
    "chunk_max_sq_norm": ("a list of numbers", _list_of(_is_num)),
    "array_meta_crc32c": ("an object of integers", _object_of(_is_int)),
    "store_id": ("a non-empty string", lambda v: isinstance(v, str) and v != ""),
    "options": ("an object", lambda v: isinstance(v, dict)),
    "source": ("an object", lambda v: isinstance(v, dict)),
    "converter": ("an object", lambda v: isinstance(v, dict)),
}

_OPTIONS = {   # options key: (what it must be, test)
    "chunk_rows": ("an integer", _is_int),
    "dtype": ("a string", lambda v: isinstance(v, str)),
    "task": ("a string", lambda v: isinstance(v, str)),
    "n_features": ("an integer or null", lambda v: v is None or _is_int(v)),
}


class _Bad(Exception):
    """One contradiction: the attribute at fault and what is wrong with it."""

    def __init__(self, key: str, what: str):
        super().__init__(key, what)
        self.key, self.what = key, what


def _show(v) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def check_meta(url: str, meta: dict) -> None:
    """Raise :class:`StoreCorruptError` naming the first attribute of ``meta`` (a sealed,
    complete store's ``streamsvm`` attributes) that is missing, of the wrong type, or
    contradicted by the others (module doc)."""
    try:
        _check_types(meta)
        _check_counts(meta)
        _check_options(meta)
        _check_labels(meta)
        _check_arrays_listed(meta)
    except _Bad as bad:
        raise StoreCorruptError(f"store {url!r} is damaged: attribute {bad.key!r} {bad.what}; "
                                f"convert the input again") from None


def _check_types(m: dict) -> None:
    for key, (what, ok) in _TYPES.items():
        if key not in m:
            raise _Bad(key, "is missing")
        if not ok(m[key]):
            raise _Bad(key, f"is {_show(m[key])}, expected {what}")
    for key, (what, ok) in _OPTIONS.items():
        if key not in m["options"]:
            raise _Bad("options", f"has no {key!r}")
        if not ok(m["options"][key]):
            raise _Bad("options", f"has {key!r} = {_show(m['options'][key])}, expected {what}")
    files = m["source"].get("files")
    if not (isinstance(files, list) and files and
            all(isinstance(f, dict) and isinstance(f.get("url"), str) for f in files)):
        raise _Bad("source", f"has 'files' = {_show(files)}, expected a list of objects "
                             f"with a 'url'")


def _at_least(m: dict, key: str, low: int) -> None:
    if m[key] < low:
        raise _Bad(key, f"is {m[key]}, expected at least {low}")


def _check_counts(m: dict) -> None:
    for key, low in (("n_rows", 1), ("chunk_rows", 1), ("nnz", 0), ("n_features", 0),
                     ("max_index", -1), ("n_underflow", 0)):
        _at_least(m, key, low)
    n_chunks = -(-m["n_rows"] // m["chunk_rows"])
    if m["n_chunks"] != n_chunks:
        raise _Bad("n_chunks", f"is {m['n_chunks']}, expected {n_chunks} (n_rows "
                               f"{m['n_rows']} in chunks of chunk_rows {m['chunk_rows']})")
    for key in ("chunk_nnz", "chunk_max_sq_norm"):
        if len(m[key]) != n_chunks:
            raise _Bad(key, f"holds {len(m[key])} values, expected one per chunk "
                            f"(n_chunks {n_chunks})")
    if min(m["chunk_nnz"]) < 0:
        raise _Bad("chunk_nnz", f"holds {min(m['chunk_nnz'])}, expected counts >= 0")
    if sum(m["chunk_nnz"]) != m["nnz"]:
        raise _Bad("chunk_nnz", f"sums to {sum(m['chunk_nnz'])}, expected nnz {m['nnz']}")
    bad = [v for v in m["chunk_max_sq_norm"] if not (math.isfinite(v) and v >= 0)]
    if bad:
        raise _Bad("chunk_max_sq_norm", f"holds {bad[0]!r}, expected finite values >= 0")
    if (m["max_index"] >= 0) != (m["nnz"] > 0):
        raise _Bad("max_index", f"is {m['max_index']} with nnz {m['nnz']}: expected -1 "
                                f"exactly when the store holds no entries")
    if m["binary_values"] and m["nnz"] == 0:
        raise _Bad("binary_values", "is true in a store with no entries (the converter "
                                    "writes false)")


def _check_options(m: dict) -> None:
    opts = m["options"]
    given = opts["n_features"]
    want = given if given is not None else m["max_index"] + 1
    how = "options' n_features" if given is not None else \
        f"the largest feature id max_index {m['max_index']} + 1"
    if m["n_features"] != want:
        raise _Bad("n_features", f"is {m['n_features']}, expected {want} ({how})")
    if m["max_index"] >= m["n_features"]:
        raise _Bad("max_index", f"is {m['max_index']}, beyond n_features {m['n_features']}")
    if m["chunk_rows"] != opts["chunk_rows"]:
        raise _Bad("chunk_rows", f"is {m['chunk_rows']}, expected options' chunk_rows "
                                 f"{opts['chunk_rows']}")
    if m["dtype"] not in ("float32", "float64"):
        raise _Bad("dtype", f"is {_show(m['dtype'])}, expected 'float32' or 'float64'")
    if m["dtype"] != opts["dtype"]:
        raise _Bad("dtype", f"is {m['dtype']!r}, expected options' dtype {opts['dtype']!r}")
    index_dtypes = ("int32", "int64") if m["n_features"] <= MAX_INDEX_DTYPE32 else ("int64",)
    if m["index_dtype"] not in index_dtypes:
        raise _Bad("index_dtype", f"is {_show(m['index_dtype'])}, expected one of "
                                  f"{index_dtypes} for {m['n_features']} features")
    if m["task"] not in ("binary", "multiclass"):
        raise _Bad("task", f"is {_show(m['task'])}, expected 'binary' or 'multiclass'")
    if opts["task"] not in ("auto", m["task"]):
        raise _Bad("task", f"is {m['task']!r}, but the conversion asked for "
                           f"{opts['task']!r} (options' task)")


def label_map(task: str, classes) -> dict:
    """The ``label_map`` the converter writes for ``classes``: original label key → stored
    value (binary: -1 for the smaller label, +1 for the larger; multiclass: class index)."""
    k = len(classes)
    return {label_key(c): (i if task == "multiclass" else (1 if i == k - 1 else -1))
            for i, c in enumerate(classes)}


def label_codes(meta: dict) -> np.ndarray:
    """The value array ``y`` stores for each class, in class order."""
    classes = meta["classes"]
    if meta["task"] == "multiclass":
        return np.arange(len(classes))
    if len(classes) == 1:         # one label: +1 unless it is <= 0 (apply_label_plan)
        return np.array([1.0 if classes[0] > 0 else -1.0])
    return np.array([-1.0, 1.0])


def _check_labels(m: dict) -> None:
    classes = m["classes"]
    if not classes:
        raise _Bad("classes", "is empty")
    bad = [c for c in classes if not math.isfinite(c)]
    if bad:
        raise _Bad("classes", f"holds {bad[0]!r}, expected finite labels")
    if any(b <= a for a, b in zip(classes, classes[1:])):
        raise _Bad("classes", f"is {_show(classes)}, expected strictly increasing labels (as "
                              f"the converter sorts them)")
    if m["task"] == "binary" and len(classes) > 2:
        raise _Bad("classes", f"holds {len(classes)} labels, expected at most 2 for task "
                              f"'binary'")
    keys = [label_key(c) for c in classes]
    if len(set(keys)) != len(keys):
        raise _Bad("classes", f"is {_show(classes)}: two labels share a key")
    want = label_map(m["task"], classes)
    if m["label_map"] != want:
        raise _Bad("label_map", f"is {_show(m['label_map'])}, expected {_show(want)} (from "
                                f"classes and task)")
    counts = m["label_counts"]
    if set(counts) != set(keys):
        raise _Bad("label_counts", f"has labels {_show(sorted(counts))}, expected the classes' "
                                   f"{_show(keys)}")
    low = min(counts.values())
    if low < 1:
        raise _Bad("label_counts", f"holds {low}, expected counts >= 1")
    if sum(counts.values()) != m["n_rows"]:
        raise _Bad("label_counts", f"sums to {sum(counts.values())}, expected n_rows "
                                   f"{m['n_rows']}")


def array_names(meta: dict) -> list[str]:
    """The arrays a complete store holds: ``data`` only when not ``binary_values``."""
    return ["indptr", "indices", "y"] + ([] if meta["binary_values"] else ["data"])


def _check_arrays_listed(m: dict) -> None:
    crcs = m["array_meta_crc32c"]
    want = array_names(m)
    if sorted(crcs) != sorted(want):
        raise _Bad("array_meta_crc32c", f"covers {sorted(crcs)}, expected {sorted(want)} "
                                        f"(binary_values is {str(m['binary_values']).lower()})")
    bad = [v for v in crcs.values() if not 0 <= v < 2**32]
    if bad:
        raise _Bad("array_meta_crc32c", f"holds {bad[0]}, not a CRC-32C")


def array_problem(meta: dict, name: str, length: int, dtype) -> str | None:
    """What is wrong with array ``name`` of ``length`` entries and ``dtype`` (from its
    checked ``zarr.json``) given the attributes ``meta``, or None."""
    want_len = {"indptr": meta["n_rows"] + 1, "indices": meta["nnz"], "data": meta["nnz"],
                "y": meta["n_rows"]}[name]
    key = {"indptr": "n_rows", "indices": "nnz", "data": "nnz", "y": "n_rows"}[name]
    if length != want_len:
        return (f"array {name!r} has {length} entries, the attributes say {want_len} "
                f"(attribute {key!r} is {meta[key]})")
    want = {"indptr": ("int64", None), "indices": (meta["index_dtype"], "index_dtype"),
            "data": (meta["dtype"], "dtype"),
            "y": ("float32" if meta["task"] == "binary" else "int32", "task")}[name]
    if np.dtype(dtype).name != want[0]:
        why = f" (attribute {want[1]!r} is {meta[want[1]]!r})" if want[1] else ""
        return f"array {name!r} holds {np.dtype(dtype).name}, expected {want[0]}{why}"
    return None


def label_counts_problem(meta: dict, counts) -> str | None:
    """Compare the labels counted in ``y`` (``counts[i]``: rows holding class ``i``'s code,
    :func:`label_codes`) with attribute ``label_counts``; a message, or None."""
    keys = [label_key(c) for c in meta["classes"]]
    found = {k: int(n) for k, n in zip(keys, counts)}
    recorded = {k: int(meta["label_counts"][k]) for k in keys}
    if found == recorded:
        return None
    return (f"attribute 'label_counts' is {_show(recorded)}, but the labels in array 'y' "
            f"count {_show(found)}")


def count_labels(meta: dict, y) -> np.ndarray:
    """Rows of each class (in class order) in the store's ``y`` array (a ``DirectArray``),
    read at most 2^18 rows (1 MB) at a time. Values that code no class are not counted."""
    codes = label_codes(meta)
    counts = np.zeros(len(codes), dtype=np.int64)
    step = y.inner_len * max(1, (1 << 18) // y.inner_len)
    for a in range(0, len(y), step):
        part = y[a:a + step]
        if meta["task"] == "multiclass":
            part = part[(part >= 0) & (part < len(codes))]
            counts += np.bincount(part, minlength=len(codes))
        else:
            counts += [np.count_nonzero(part == c) for c in codes]
    return counts


def boundary_problem(offsets, chunk_rows: int, n_rows: int, indptr, start: int,
                     p0: int) -> str | None:
    """Where ``indptr`` (of the rows from ``start``, made local by subtracting ``p0``) puts
    each chunk boundary it covers, against ``offsets`` (the cumulative sum of attribute
    ``chunk_nnz``, from 0): a message naming the first that differs, or None."""
    stop = start + len(indptr) - 1
    first = -(-start // chunk_rows) * chunk_rows
    rows = range(first, stop + 1, chunk_rows)
    if stop == n_rows and (not rows or rows[-1] != stop):
        rows = [*rows, stop]
    if len(rows) <= 4:             # most reads: a few scalar compares (a read costs ~1 us more)
        for b in rows:
            got, want = int(indptr[b - start]) + p0, int(offsets[-(-b // chunk_rows)])
            if got != want:
                return _boundary_message(got, b, want)
        return None
    rows = np.asarray(rows)
    got = indptr[rows - start] + p0
    want = offsets[-(-rows // chunk_rows)]
    bad = np.flatnonzero(got != want)
    if len(bad) == 0:
        return None
    k = int(bad[0])
    return _boundary_message(int(got[k]), int(rows[k]), int(want[k]))


def _boundary_message(got: int, row: int, want: int) -> str:
    return f"array 'indptr' puts {got} entries before row {row}, attribute 'chunk_nnz' puts {want}"
