"""A warm start: a run of a primal solver begins at the weights of an existing model.

``--init-model MODEL`` (``train(init_model=...)``, ``warm_start=True`` on an estimator)
gives ``newton``, ``nesvm`` and ``alm`` their first point: the model's ``coef`` and, with a
bias feature of value ``B > 0``, ``intercept / B`` as the bias weight (with ``B = 0`` the
intercept is dropped, with a warning). The model must be of the store's task and classes,
with at most its features (missing ones start at 0). The dual solvers (dcd, avsf, ww) are
refused: their state is one dual variable per row, which a model does not hold, so their
run would start afresh all the same. The model's SHA-256 joins the run's identity (a
checkpoint resumes only the warm start it began) and its summary (``init_model``).
"""

from __future__ import annotations

import hashlib
import logging
import os

import numpy as np

from .exceptions import InvalidParameterError

__all__ = ["initial_weights"]

log = logging.getLogger(__name__)


def initial_weights(init_model, store, slv, storage_options=None):
    """``(W0, record)``: the ``(n_features + 1, k)`` starting weights for ``slv`` on
    ``store`` from ``init_model`` (a path, URL or :class:`~streamsvm.model.LinearModel`),
    and the record kept with the run (``{"model": ..., "sha256": ...}``)."""
    from .model import LinearModel, load_model
    if not slv.warm_start:
        takes = ", ".join(sorted(_warm_solvers()))
        raise InvalidParameterError(
            f"init_model=... starts a primal solver ({takes}) at a model's weights; "
            f"{slv.name}'s state is one dual variable per row, which a model does not hold: "
            f"choose one of those solvers, or train {slv.name} afresh")
    source = "in-memory model"
    if not isinstance(init_model, LinearModel):
        source = os.fspath(init_model)
        init_model = load_model(source, storage_options=storage_options)
    m = init_model
    if m.labels is not None or m.task != store.task or \
            not np.array_equal(np.asarray(m.classes, dtype=np.float64), store.classes):
        raise InvalidParameterError(
            f"init_model {source}: a {m.task} model of classes "
            f"{m.user_classes.tolist()[:10]}, the store is {store.task} with classes "
            f"{store.classes.tolist()[:10]}: a warm start needs the same classes")
    if m.n_features > store.n_features:
        raise InvalidParameterError(
            f"init_model {source} has {m.n_features:,} features, the store "
            f"{store.n_features:,}: a warm start needs at most the store's features")
    rows = 1 if store.task == "binary" else len(store.classes)
    if m.coef.shape[0] != rows:
        raise InvalidParameterError(f"init_model {source} has {m.coef.shape[0]} weight "
                                    f"vectors, a {store.task} run trains {rows}")
    W = np.zeros((store.n_features + 1, rows))
    W[:m.n_features] = m.coef.T
    bias = float(slv.bias)
    if bias > 0:
        W[-1] = m.intercept / bias
    elif np.any(m.intercept != 0):
        log.warning("init_model %s has an intercept; this run has no bias feature "
                    "(bias=0): it starts without it", source)
    digest = hashlib.sha256(np.ascontiguousarray(m.coef, dtype="<f8").tobytes()
                            + np.ascontiguousarray(m.intercept, dtype="<f8").tobytes())
    return W, {"model": source, "sha256": digest.hexdigest()}


def _warm_solvers():
    from .solvers import SOLVERS
    return [name for name, cls in SOLVERS.items() if cls.warm_start]
