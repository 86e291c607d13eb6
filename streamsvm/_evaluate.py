"""Scoring a model on data that may not fit in memory: a store or a libsvm file.

Streams row blocks (store chunks, or parsed text blocks of a libsvm file read through
fsspec) and accumulates accuracy, per-class counts and, for binary models, the primal
objective ``½‖w‖² + ½b² + Σ C_i ξ(y_i f(x_i))`` with the model's C, loss, bias and class
weights. ``predict`` writes one predicted label per line, like LIBLINEAR's ``predict``.
"""

from __future__ import annotations

import os

import numpy as np

from .exceptions import StoreNotFoundError
from .kernels import csr_matmat
from .model import LinearModel

__all__ = ["iter_labelled_blocks", "evaluate", "predict_to_file"]


def iter_labelled_blocks(data, *, storage_options=None, zero_based="no"):
    """Yield ``(indptr, indices, data, original_labels)`` of a store or a libsvm file."""
    from .io import Store, open_store
    from .io._store import read_meta
    if isinstance(data, Store) or hasattr(data, "read_chunk"):
        store = data
    elif read_meta(os.fspath(data), storage_options) is not None:
        store = open_store(data, storage_options=storage_options)
    else:
        yield from _iter_text(os.fspath(data), storage_options, zero_based)
        return
    classes = store.classes
    for chunk in store.iter_chunks():
        if store.task == "binary":
            labels = np.where(chunk.y > 0, classes[-1], classes[0])
        else:
            labels = classes[chunk.y]
        yield chunk.indptr, chunk.indices, chunk.data, labels


def _iter_text(url, storage_options, zero_based):
    from .io._convert import NO_LIMIT
    from .io._parse import parse_block
    from .io._source import describe_inputs, iter_blocks
    files = describe_inputs([url], storage_options)
    lo = 0 if zero_based == "yes" else 1
    for blk in iter_blocks(files, storage_options):
        p = parse_block(blk.data, file=blk.url, first_line=blk.first_line, min_index=lo,
                        max_index=NO_LIMIT)
        yield p.indptr, (p.indices - lo), p.values, p.labels


def _scores(model: LinearModel, indptr, indices, data):
    keep = indices < model.n_features          # unseen features weigh nothing
    if not keep.all():
        import scipy.sparse as sp
        X = sp.csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, int(indices.max()) + 1))
        X = X[:, :model.n_features].tocsr()
        indptr, indices, data = X.indptr.astype(np.int64), X.indices, X.data
    out = np.zeros((len(indptr) - 1, model.coef.shape[0]))
    W = np.ascontiguousarray(model.coef.T)
    csr_matmat(indptr, indices, data, W, out)
    return out + model.intercept


def evaluate(model: LinearModel, data, *, storage_options=None, zero_based="no") -> dict:
    """Accuracy (and for binary models the primal objective) of ``model`` on ``data``."""
    n = correct = 0
    loss = 0.0
    params = model.params
    C, l2 = float(params.get("C", 1.0)), params.get("loss") == "squared_hinge"
    Cp = Cn = C
    if model.task == "binary":
        from .solvers._base import class_costs
        counts = {}
        cp, cn = class_costs("evaluate", C, params.get("class_weight") if
                             params.get("class_weight") != "balanced" else None,
                             "binary", model.classes, counts)
        Cp, Cn = float(cp[0]), float(cn[0])
    for indptr, indices, values, labels in iter_labelled_blocks(
            data, storage_options=storage_options, zero_based=zero_based):
        scores = _scores(model, indptr, indices, values)
        if model.task == "binary":
            scores = scores[:, 0]
        pred = model.classes[model.predict_encoded(scores)]
        correct += int(np.count_nonzero(pred == labels))
        n += len(labels)
        if model.task == "binary":
            y = np.where(labels == model.classes[-1], 1.0, -1.0)
            xi = np.maximum(0.0, 1.0 - y * scores)
            loss += float((np.where(y > 0, Cp, Cn) * (xi * xi if l2 else xi)).sum())
    if n == 0:
        raise StoreNotFoundError(f"no rows to evaluate in {data!r}")
    out = {"n_rows": n, "accuracy": correct / n, "correct": correct}
    if model.task == "binary":
        bias = float(params.get("bias", 0.0) or 0.0)
        wb = model.intercept[0] / bias if bias > 0 else 0.0
        out["objective"] = 0.5 * float(model.coef[0] @ model.coef[0] + wb * wb) + loss
        out["C"], out["loss"] = C, params.get("loss")
    return out


def predict_to_file(model: LinearModel, data, out_path, *, storage_options=None,
                    zero_based="no", scores: bool = False) -> int:
    """Write one predicted label (or decision values) per row; returns the row count.

    Streams to a temporary file next to the output (local) or in the temp dir (remote),
    then renames or uploads it, so a half-written prediction file never appears.
    """
    import tempfile
    from .io._urls import is_local, url_to_fs
    out_path = os.fspath(out_path)
    local = is_local(out_path)
    parent = os.path.dirname(os.path.abspath(out_path)) if local else None
    fd, tmp = tempfile.mkstemp(prefix=".predict-", suffix=".partial", dir=parent)
    n = 0
    try:
        with os.fdopen(fd, "w") as f:
            for indptr, indices, values, _ in iter_labelled_blocks(
                    data, storage_options=storage_options, zero_based=zero_based):
                s = _scores(model, indptr, indices, values)
                if model.task == "binary":
                    s = s[:, 0]
                if scores:
                    f.writelines(" ".join(f"{v:.17g}" for v in np.atleast_1d(r)) + "\n"
                                 for r in s)
                else:
                    f.writelines(_fmt(v) + "\n" for v in model.classes[model.predict_encoded(s)])
                n += len(s)
        if local:
            os.replace(tmp, out_path)
        else:
            fs, p = url_to_fs(out_path, storage_options)
            fs.put_file(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return n


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))
