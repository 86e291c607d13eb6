"""streamsvm's model file: one JSON document, written and read as a stream.

The document holds the header fields (:mod:`streamsvm._model_check`), then the weights
``coef`` and ``intercept`` as ``{"dtype": "<f8", "shape": [...], "base64": "..."}`` (the
little-endian float64 bytes: a bit-exact round trip), then ``checksums``: for each header
field the CRC-32C of its canonical JSON, for each array that of its raw bytes.

Neither side holds the document whole. :func:`json_pieces` encodes the weights a slice at
a time, computing their CRC as it goes; :func:`read_json` parses the file as a stream
(:mod:`streamsvm._model_stream`): the header whole (a few kB), each base64 value decoded
slice by slice into a preallocated array. A file whose header precedes its weights (as
written) is read in one pass and refused as soon as its size contradicts the header; any
other valid JSON (keys reordered, re-indented, ``\\/`` escapes) is parsed first, its weights
then read by seeking back, under the same limits.
"""

from __future__ import annotations

import base64
import json

import numpy as np

from ._model_check import (CHECKSUM_FIELDS, FORMATS, HEADER_FIELDS, LABELLED_FORMAT,
                           MODEL_FORMAT, WEIGHT_FIELDS,
                           check_array_meta, check_header)
from ._model_stream import BLOCK, HEADER_LIMIT, Base64Array, DocumentReader, crc32c_extend
from .exceptions import ModelError

__all__ = ["json_pieces", "document", "read_json", "field_checksum"]

PIECE = 3 << 18
"""Bytes of weights base64-encoded at a time by :func:`json_pieces` (a multiple of 3: the
pieces' encodings join into the whole's)."""


def _sum(crc: int) -> str:
    return f"crc32c:{crc:08x}"


def field_checksum(value) -> str:
    """The checksum of a header field: CRC-32C of its canonical JSON, as a reader sees it
    (so integer dict keys, tuples, NaN round-trip to the same text)."""
    value = json.loads(json.dumps(value))
    return _sum(crc32c_extend(0, json.dumps(value, sort_keys=True, separators=(",", ":"),
                                            ensure_ascii=True).encode()))


def header(model) -> dict:
    d = {"format": MODEL_FORMAT, "task": model.task, "classes": model.classes.tolist(),
         "n_features": model.n_features, "params": model.params, "problem": model.problem,
         "summary": model.summary,
         "tie_break": None if model.tie_break is None else model.tie_break.tolist()}
    if model.labels is not None:
        d["format"], d["labels"] = LABELLED_FORMAT, _json_labels(model.labels)
    return d


def _json_labels(labels) -> list:
    """The user's labels as a model file holds them: strings or booleans."""
    out = np.asarray(labels).tolist()
    if all(isinstance(v, str) for v in out) or all(isinstance(v, bool) for v in out):
        return out
    odd = next(v for v in out if not isinstance(v, (str, bool)))
    from .exceptions import InvalidParameterError
    raise InvalidParameterError(f"a label of type {type(odd).__name__} ({odd!r}) cannot be "
                                f"saved in a model file: labels must be numbers, strings or "
                                f"booleans")


def document(model) -> dict:
    """The model's whole document (:meth:`LinearModel.to_dict`)."""
    d = header(model)
    sums = {k: field_checksum(d[k]) for k in HEADER_FIELDS if k in d}
    for key in WEIGHT_FIELDS:
        a = np.ascontiguousarray(getattr(model, key), dtype="<f8")
        d[key] = {"dtype": "<f8", "shape": list(a.shape),
                  "base64": base64.b64encode(a.tobytes()).decode()}
        sums[key] = _sum(crc32c_extend(0, a.tobytes()))
    d["checksums"] = sums
    return d


def json_pieces(model):
    """The bytes of ``json.dumps(document(model))``, in pieces: the weights base64-encoded
    (and checksummed) a slice at a time, so a large model's document is never whole in
    memory; the checksums come last."""
    d = header(model)
    sums = {k: field_checksum(d[k]) for k in HEADER_FIELDS if k in d}
    yield json.dumps(d)[:-1].encode()
    for key in WEIGHT_FIELDS:
        a = np.ascontiguousarray(getattr(model, key), dtype="<f8")
        yield (f', "{key}": {{"dtype": "<f8", "shape": {json.dumps(list(a.shape))}, '
               f'"base64": "').encode()
        raw = memoryview(a).cast("B")
        crc = 0
        for i in range(0, len(raw), PIECE):
            crc = crc32c_extend(crc, raw[i:i + PIECE])
            yield base64.b64encode(raw[i:i + PIECE])
        yield b'"}'
        sums[key] = _sum(crc)
    yield f', "checksums": {json.dumps(sums)}}}'.encode()


# -- reading -----------------------------------------------------------------------------

def _b64_len(nbytes: int) -> int:
    return (nbytes + 2) // 3 * 4


def _check_size(head, size: int, source: str) -> None:
    """Refuse a file larger than its header allows (its weights' base64 plus
    :data:`HEADER_LIMIT`), or too small to hold its weights, before reading them."""
    need = sum(_b64_len(8 * int(np.prod(head.shape(k)))) for k in WEIGHT_FIELDS)
    what = (f"its header declares {head.task} weights of {head.rows:,} x "
            f"{head.n_features:,} float64 ({need:,} bytes of base64)")
    if size > need + HEADER_LIMIT:
        raise ModelError(f"{size:,} bytes, more than {what} and {HEADER_LIMIT >> 20} MiB "
                         f"besides; refused unread", file=source, field="n_features")
    if size < need:
        raise ModelError(f"{size:,} bytes: truncated? {what}", file=source)


def read_json(f, size: int, source: str):
    """``(header, coef, intercept)`` of the JSON model in the binary file ``f`` of ``size``
    bytes (module doc), every field checked (:mod:`streamsvm._model_check`) and, in a
    ``/2`` file (and wherever present), every checksum verified."""
    sized = []

    def on_value(field, doc, obj):
        head = check_header(doc, source, complete=False)
        if head is None:
            return None
        check_array_meta(obj, field, head, source, complete=False)
        if "dtype" not in obj or "shape" not in obj:
            return None
        if not sized:
            _check_size(head, size, source)
            sized.append(True)
        return Base64Array(head.shape(field), field, source)

    reader = DocumentReader(f, source, WEIGHT_FIELDS, on_value)
    d = reader.read()
    head = check_header(d, source)
    if not sized:
        _check_size(head, size, source)
    arrays, crcs = {}, {}
    for field in WEIGHT_FIELDS:
        shape = check_array_meta(d[field], field, head, source)
        sink, start, n = reader.values.get(field, (None, None, None))
        if sink is None:
            sink = Base64Array(shape, field, source)
            if start is not None:                 # the header came after the weights
                f.seek(start)
                for i in range(0, n, BLOCK):
                    sink.feed(f.read(min(BLOCK, n - i)))
            else:                                 # (a "base64" key spelt with escapes)
                sink.feed(d[field]["base64"].encode("utf-8"), escaped=False)
        arrays[field], crcs[field] = sink.close()
    _verify(d, head, crcs, source)
    return head, arrays["coef"], arrays["intercept"]


def _verify(d: dict, head, crcs: dict, source: str) -> None:
    """Compare every field with its recorded checksum (required in a ``/2`` file)."""
    sums = d.get("checksums")
    if sums is None and head.format == FORMATS[0]:
        return
    if not isinstance(sums, dict):
        raise ModelError(f"missing, which every {head.format!r} file carries: the file is "
                         f"damaged" if sums is None else
                         f"a JSON {type(sums).__name__}, expected an object",
                         file=source, field="checksums")
    want = [k for k in CHECKSUM_FIELDS if k in d]
    if sorted(sums) != sorted(want):
        raise ModelError(f"covers {sorted(sums)}, expected {sorted(want)}", file=source,
                         field="checksums")
    for key in want:
        got = _sum(crcs[key]) if key in crcs else field_checksum(d[key])
        if sums[key] != got:
            raise ModelError(f"fails its checksum ({got}, recorded {sums[key]!r}): the file "
                             f"is damaged or was edited", file=source, field=key)
