"""Scoring a model on data that may not fit in memory: a store or a libsvm file.

Streams row blocks (store chunks, or parsed text blocks of a libsvm file read through
fsspec) and accumulates accuracy, the confusion matrix and the metrics derived from it
(``_metrics.py``), for binary models the ROC AUC, and the primal
objective ``½‖w‖² + ½b² + Σ C_i ξ(y_i f(x_i))`` with the model's C, loss, bias and class
weights. ``predict`` writes one predicted label per line, like LIBLINEAR's ``predict``.

Model and data are matched: ``evaluate`` refuses labels outside the model's classes
(naming the store, or the file and line); features beyond the model's weigh 0, as in
LIBLINEAR, and are reported once (a warning with the counts, and ``unseen_features``).
"""

from __future__ import annotations

import logging
import os

import numpy as np

from .exceptions import DataMismatchError, StoreNotFoundError
from ._metrics import Metrics
from .kernels import csr_matmat
from .model import LinearModel

__all__ = ["iter_labelled_blocks", "evaluate", "predict_to_file", "UnseenFeatures"]

log = logging.getLogger(__name__)


def iter_labelled_blocks(data, *, storage_options=None, zero_based="no", classes=None,
                         unseen=None):
    """Yield ``(indptr, indices, data, original_labels)`` of a store or a libsvm file.

    Parameters
    ----------
    data : Store, InMemoryStore, str or os.PathLike
        A store, or the URL of a store or of a libsvm/svmlight file.
    classes : ndarray, optional
        The model's classes: a label outside them raises :class:`DataMismatchError`
        naming the label(s) and the store URL, or the file and line.
    unseen : UnseenFeatures, optional
        Counts the entries beyond the model's features (see :class:`UnseenFeatures`).
    """
    from .io import StoreMeta, open_store, read_meta
    if isinstance(data, StoreMeta):
        store = data
    elif read_meta(os.fspath(data), storage_options) is not None:
        store = open_store(data, storage_options=storage_options)
    else:
        yield from _iter_text(os.fspath(data), storage_options, zero_based, classes, unseen)
        return
    if classes is not None:
        _check_store_labels(store, classes)
    have = store.classes
    for chunk in store.iter_chunks():
        if store.task == "binary":
            labels = np.where(chunk.y > 0, have[-1], have[0])
        else:
            labels = have[chunk.y]
        if unseen is not None:
            unseen.add(chunk.indptr, chunk.indices, base=1, where=store.url)
        yield chunk.indptr, chunk.indices, chunk.data, labels


def _iter_text(url, storage_options, zero_based, classes, unseen):
    from .io import NO_LIMIT, describe_inputs, iter_blocks, parse_block
    files = describe_inputs([url], storage_options)
    lo = 0 if zero_based == "yes" else 1
    for blk in iter_blocks(files, storage_options):
        p = parse_block(blk.data, file=blk.url, first_line=blk.first_line, min_index=lo,
                        max_index=NO_LIMIT)
        if classes is not None:
            bad = ~np.isin(p.labels, classes)
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise DataMismatchError(
                    f"{blk.url}, line {_line_of_row(blk.data, blk.first_line, row)}: label "
                    f"{_labels(p.labels[row:row + 1])} is not a class of the model (classes "
                    f"{_labels(classes)}); labels outside them in this block: "
                    f"{_labels(p.labels[bad])}")
        indices = p.indices - lo
        if unseen is not None:
            unseen.add(p.indptr, indices, base=lo, where=blk.url)
        yield p.indptr, indices, p.values, p.labels


def _check_store_labels(store, classes) -> None:
    """Refuse a store whose labels (from its metadata) are not all classes of the model."""
    from .io import label_key
    have = store.classes
    bad = have[~np.isin(have, classes)]
    if len(bad):
        counts = store.label_counts
        n = sum(int(counts.get(label_key(c), 0)) for c in bad)
        are = "labels {} ({:,} of {:,} rows) are not classes" if len(bad) > 1 else \
            "label {} ({:,} of {:,} rows) is not a class"
        raise DataMismatchError(f"store {store.url!r}: "
                                f"{are.format(_labels(bad), n, store.n_rows)} of the model "
                                f"(classes {_labels(classes)})")


def _labels(values) -> str:
    values = np.unique(np.asarray(values, dtype=np.float64))
    shown = ", ".join(_fmt(v) for v in values[:10])
    return shown + (f", ... ({len(values)} labels)" if len(values) > 10 else "")


def _line_of_row(data, first_line: int, row: int) -> int:
    """1-based line number of row ``row`` (0-based) of a block of libsvm text: blank and
    comment-only lines give no row (as in the parser)."""
    for k, line in enumerate(bytes(data).split(b"\n")):
        if line.split(b"#", 1)[0].strip(b" \t\r\v\f"):
            if row == 0:
                return first_line + k
            row -= 1
    raise AssertionError("row beyond the block")     # pragma: no cover


class UnseenFeatures:
    """Counts rows and entries whose features are beyond the model's, to report once.

    LIBLINEAR's rule is kept: such features weigh 0. :meth:`warn` logs a single warning
    with the counts and the largest index; :meth:`as_dict` is the ``evaluate --json`` field.

    Parameters
    ----------
    n_features : int
        The model's number of features.
    """

    def __init__(self, n_features: int):
        self.n_features = int(n_features)
        self.rows = self.entries = self.n_rows = 0
        self.max_index = None
        self.where: list[str] = []

    def add(self, indptr, indices, *, base: int, where: str) -> None:
        """Count a block; ``base`` turns 0-based ``indices`` into the data's own numbering."""
        self.n_rows += len(indptr) - 1
        over = indices >= self.n_features
        if not over.any():
            return
        cum = np.concatenate(([0], np.cumsum(over)))
        self.rows += int(np.count_nonzero(cum[indptr[1:]] != cum[indptr[:-1]]))
        self.entries += int(cum[-1])
        top = int(indices[over].max()) + base
        self.max_index = top if self.max_index is None else max(self.max_index, top)
        if where not in self.where:
            self.where.append(where)

    def as_dict(self) -> dict:
        return {"rows": self.rows, "entries": self.entries, "max_index": self.max_index,
                "model_n_features": self.n_features}

    def warn(self) -> None:
        if self.rows:
            log.warning("%s of %s rows in %s (%s entries) have features beyond the model's "
                        "%s (largest index %s); they weigh 0, as in LIBLINEAR", f"{self.rows:,}",
                        f"{self.n_rows:,}", ", ".join(self.where), f"{self.entries:,}",
                        f"{self.n_features:,}", self.max_index)


def _scores(model: LinearModel, W, indptr, indices, data):
    """Decision values of a block of rows; ``W``: ``model.coef.T`` C-contiguous, made once
    by the caller (a copy per block held a multiclass model's weights twice, over and
    over)."""
    keep = indices < model.n_features          # unseen features weigh nothing
    if not keep.all():
        import scipy.sparse as sp
        X = sp.csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, int(indices.max()) + 1))
        X = X[:, :model.n_features].tocsr()
        indptr, indices, data = X.indptr.astype(np.int64), X.indices, X.data
    out = np.zeros((len(indptr) - 1, model.coef.shape[0]))
    csr_matmat((np.asarray(indptr, dtype=np.int64), indices, data), W, out)
    return out + model.intercept


def evaluate(model: LinearModel, data, *, storage_options=None, zero_based="no") -> dict:
    """Accuracy, the metrics of :mod:`streamsvm._metrics` (confusion matrix, per-class
    precision / recall / F1 and accuracy, balanced accuracy, macro F1, binary ROC AUC) and
    the primal objective of ``model`` on ``data``.

    The objective is the model's declared problem (``LinearModel.problem``: loss, C, class
    weights, bias mode; one-vs-rest models summed over classes) evaluated on ``data``; a
    model that records no C (read from a LIBLINEAR file) gets none. Labels outside the
    model's classes raise :class:`DataMismatchError`; features beyond the model's weigh 0
    (LIBLINEAR's rule), with one warning, and are counted in ``unseen_features``.
    """
    if model.labels is not None:
        raise DataMismatchError(
            f"the model predicts the labels {model.labels.tolist()[:10]} it was fit on in "
            f"Python, and a store or libsvm file holds numbers: score it in Python "
            f"(LinearSVC.score(X, y))")
    n = correct = 0
    loss = 0.0
    problem = model.problem_obj()
    objective = problem is not None and problem.C is not None
    costs = problem.costs(model.classes) if objective else None
    metrics = Metrics(model.classes, binary=model.task == "binary")
    unseen = UnseenFeatures(model.n_features)
    W = np.ascontiguousarray(model.coef.T)
    for indptr, indices, values, labels in iter_labelled_blocks(
            data, storage_options=storage_options, zero_based=zero_based,
            classes=model.classes, unseen=unseen):
        scores = _scores(model, W, indptr, indices, values)
        enc = model.predict_encoded(scores[:, 0] if model.task == "binary" else scores)
        truth = model.class_indices(labels)
        hit = enc == truth
        correct += int(np.count_nonzero(hit))
        n += len(labels)
        metrics.add(truth, enc, scores[:, 0] if model.task == "binary" else None)
        if objective:
            loss += problem.loss_sum(scores, labels, model.classes, costs)
    if n == 0:
        raise StoreNotFoundError(f"no rows to evaluate in {data!r}")
    unseen.warn()
    out = {"n_rows": n, "accuracy": correct / n, "correct": correct, **metrics.report(),
           "unseen_features": unseen.as_dict()}
    if objective:
        out["objective"] = problem.regularizer(model.coef, model.intercept) + loss
        out["C"], out["loss"] = problem.C, problem.loss
    return out


def predict_to_file(model: LinearModel, data, out_path, *, storage_options=None,
                    zero_based="no", scores: bool = False) -> int:
    """Write one predicted label (or decision values) per row; returns the row count.

    The output is written through :func:`streamsvm.io.open_output`: ``-`` is standard
    output, a device or FIFO is written in place, a file (or the target of a symbolic link)
    appears whole or not at all: streamed to a temporary file next to it (local) or in the
    temp dir (remote), then renamed or uploaded. Labels in ``data`` are not checked;
    features beyond the model's weigh 0, with one warning.
    """
    from .io import open_output
    n = 0
    unseen = UnseenFeatures(model.n_features)
    W = np.ascontiguousarray(model.coef.T)
    with open_output(os.fspath(out_path), storage_options) as f:
        for indptr, indices, values, _ in iter_labelled_blocks(
                data, storage_options=storage_options, zero_based=zero_based, unseen=unseen):
            s = _scores(model, W, indptr, indices, values)
            if model.task == "binary":
                s = s[:, 0]
            if scores:
                lines = (" ".join(f"{v:.17g}" for v in np.atleast_1d(r)) for r in s)
            else:
                lines = (_fmt(v) for v in model.user_classes[model.predict_encoded(s)])
            f.write("".join(line + "\n" for line in lines).encode())
            n += len(s)
    unseen.warn()
    return n


def _fmt(v) -> str:
    if isinstance(v, (str, np.str_, bool, np.bool_)):
        return str(v)
    return str(int(v)) if float(v).is_integer() else repr(float(v))
