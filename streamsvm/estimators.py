"""scikit-learn-style estimators wrapping the solvers, and :func:`train` (used by the CLI).

``train`` connects the pieces: store → :class:`PassScheduler` → solver (from the registry)
→ :class:`LinearModel`, with checkpoints through :class:`CheckpointManager`.
"""

from __future__ import annotations

import logging
import numbers
import os
import time

import numpy as np

from ._outputs import check_writable_dir
from .exceptions import InvalidParameterError, NotFittedError
from .model import LinearModel, load_model
from .solvers import SOLVERS

__all__ = ["LinearSVC", "train"]

log = logging.getLogger(__name__)


def _store_identity(store) -> dict:
    """What a checkpoint records of its store: counts plus the ``store_id`` written at
    conversion (the same wherever the store is and whatever path names it); stores
    converted before ids existed fall back to their source's CRC, in-memory stores to a
    content fingerprint."""
    meta = store.meta
    ident = {"n_rows": int(meta["n_rows"]), "n_features": int(meta["n_features"]),
             "nnz": int(meta["nnz"])}
    if meta.get("store_id"):
        ident["store_id"] = meta["store_id"]
    elif hasattr(store, "fingerprint"):
        ident["fingerprint"] = store.fingerprint
    else:
        ident["crc32"] = (meta.get("source") or {}).get("crc32")
    return ident


def train(store, *, solver="dcd", memory="1GB", seed=0, checkpoint=None,
          checkpoint_every=0, resume=False, storage_options=None, callback=None,
          should_stop=None, block_rows=None, prefetch=8, readers=None, scratch_dir=None,
          **params):
    """Train a model on a store (or store URL) and return ``(LinearModel, SolveResult)``.

    Parameters
    ----------
    store : Store, InMemoryStore or str
    solver : str
        A name in :data:`streamsvm.solvers.SOLVERS`.
    memory : str or int
        Budget for cached chunks, per-row state and the RAM slab.
    seed : int
    checkpoint : str, optional
        Directory or URL for checkpoints (any fsspec URL).
    checkpoint_every : float
        Passes over the data between checkpoints (0: only at the end or when interrupted).
    resume : bool
        Continue from the newest valid checkpoint in ``checkpoint``.
    scratch_dir : str, optional
        Local directory for spilled per-row state and dcd's disk slab (default: the system
        temporary directory).
    block_rows, prefetch, readers : int, optional
        Rows per block (default: several hundred blocks a pass), blocks read ahead, and
        the threads reading them (:class:`~streamsvm.schedule.PassScheduler`).
    **params
        Solver parameters (``C``, ``loss``, ``bias``, ``tol``, ``max_passes``, ...).

    Raises
    ------
    InvalidParameterError
        Before the first pass: a bad parameter, or a store with a single class.
    OutputNotWritableError
        Before the first pass: ``checkpoint`` or ``scratch_dir`` cannot be written.
    CheckpointError
        On resume, a checkpoint of another run (every differing parameter named); during
        training, a checkpoint that cannot be written (the last good one named).
    """
    from .checkpoint import CheckpointManager
    from .io import open_store
    from .schedule import PassScheduler
    if solver not in SOLVERS:
        raise InvalidParameterError(f"The 'solver' parameter must be one of "
                                    f"{sorted(SOLVERS)}. Got {solver!r} instead.")
    if isinstance(params.get("class_weight"), dict):    # JSON-able keys, for checkpoints
        from .io._labels import label_key
        params["class_weight"] = {label_key(k) if isinstance(k, numbers.Real) else k: v
                                  for k, v in params["class_weight"].items()}
    slv = SOLVERS[solver](**params)          # validates every parameter before any pass
    if resume and checkpoint is None:
        raise InvalidParameterError("resume=True needs a checkpoint location")
    if not hasattr(store, "read_chunk"):
        store = open_store(store, storage_options=storage_options)
    if len(store.classes) < 2:
        raise InvalidParameterError(
            f"The number of classes has to be greater than one; got {len(store.classes)} "
            f"class (label {', '.join(store.label_counts) or 'none'} in "
            f"{'y' if store.url == 'memory' else f'store {store.url!r}'})")
    if checkpoint is not None:
        check_writable_dir(checkpoint, what="checkpoint directory",
                           storage_options=storage_options)
    if scratch_dir is not None:
        check_writable_dir(scratch_dir, what="scratch directory")
    n_rows = store.n_rows
    if block_rows is None:    # several hundred blocks per pass (spec_003 §3.6)
        block_rows = int(min(store.chunk_rows, max(256, -(-n_rows // 512))))
    sched = PassScheduler(store, memory=memory, seed=seed, block_rows=block_rows,
                          prefetch=prefetch, readers=readers, scratch_dir=scratch_dir)
    manager = state = None
    identity = {"store": _store_identity(store) if checkpoint is not None else None,
                **slv.params(), "seed": seed, "block_rows": block_rows}
    if checkpoint is not None:
        manager = CheckpointManager(checkpoint, storage_options=storage_options)
        if resume:
            state = manager.load_latest(expect={"identity": identity})
            if state is None:
                log.warning("no checkpoint under %s: starting from scratch", checkpoint)
            else:
                log.info("resuming from checkpoint %s (sweep %d)", manager.list()[0],
                         state[1]["n_iter"])
    save = None
    if manager is not None:
        def save(arrays, meta):
            manager.save(arrays, dict(meta, identity=identity))
    t0 = time.perf_counter()
    try:
        result = slv.solve(sched, state=state, callback=callback, checkpoint=save,
                           checkpoint_every=checkpoint_every, should_stop=should_stop)
    finally:
        sched.close()
    seconds = time.perf_counter() - t0
    summary = dict(result.summary(), block_rows=block_rows, n_rows=n_rows, seed=seed)
    model = LinearModel(result.coef, np.asarray(result.intercept, dtype=np.float64),
                        store.classes, store.task, slv.params(), summary)
    log.info("%s finished: %d sweeps, %.2f passes, gap %.3g, converged %s, %.2fs", solver,
             result.n_iter, result.passes, result.stop_value, result.converged, seconds)
    return model, result


class LinearSVC:
    """Linear SVM trained out of core (scikit-learn conventions).

    Parameters
    ----------
    solver : str, default="dcd"
    loss : {"squared_hinge", "hinge"}, default="squared_hinge"
    C : float, default=1.0
    tol : float, default=1e-3
        Relative duality gap at which training stops.
    max_passes : float, default=200
    bias : float, default=1.0
        Value of the regularized constant bias feature (LIBLINEAR ``-B``); 0 disables it.
    class_weight : dict, "balanced" or None
    memory : str or int, default="1GB"
    random_state : int, default=0
    checkpoint : str, optional
        Checkpoint directory or URL; ``fit`` resumes from it when it holds a matching one.
    chunk_rows : int, default=65536
        Rows per chunk when fitting on in-memory ``X, y``.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    n_iter_ : int
    n_passes_ : float
    converged_ : bool
    model_ : LinearModel

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, streamsvm as ss
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 1.0]]))
    >>> clf = ss.LinearSVC(C=10.0).fit(X, np.array([1, 1, -1, -1]))
    >>> clf.predict(X).tolist()
    [1.0, 1.0, -1.0, -1.0]
    """

    def __init__(self, *, solver="dcd", loss="squared_hinge", C=1.0, tol=1e-3, max_passes=200,
                 bias=1.0, class_weight=None, memory="1GB", random_state=0, checkpoint=None,
                 chunk_rows=65536):
        self.solver = solver
        self.loss = loss
        self.C = C
        self.tol = tol
        self.max_passes = max_passes
        self.bias = bias
        self.class_weight = class_weight
        self.memory = memory
        self.random_state = random_state
        self.checkpoint = checkpoint
        self.chunk_rows = chunk_rows

    def get_params(self, deep=True) -> dict:
        return {k: getattr(self, k) for k in ("solver", "loss", "C", "tol", "max_passes", "bias",
                                              "class_weight", "memory", "random_state",
                                              "checkpoint", "chunk_rows")}

    def set_params(self, **params):
        valid = self.get_params()
        for k, v in params.items():
            if k not in valid:
                raise InvalidParameterError(f"Invalid parameter {k!r} for estimator LinearSVC. "
                                            f"Valid parameters are: {sorted(valid)}.")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        return "LinearSVC(" + ", ".join(f"{k}={v!r}" for k, v in self.get_params().items()) + ")"

    def fit(self, X, y=None):
        """Fit on a Store, a store URL, or in-memory ``X`` (sparse/dense) with ``y``."""
        from .io import InMemoryStore
        if isinstance(X, (str, os.PathLike)) or hasattr(X, "read_chunk"):
            if y is not None:
                raise InvalidParameterError("y must be None when X is a store (labels are in it)")
            store = X
        else:
            if y is None:
                raise InvalidParameterError("y is required when X is an in-memory matrix")
            store = InMemoryStore(X, y, chunk_rows=self.chunk_rows)
        model, result = train(store, solver=self.solver, memory=self.memory,
                              seed=self.random_state, checkpoint=self.checkpoint,
                              resume=self.checkpoint is not None, loss=self.loss, C=self.C,
                              tol=self.tol, max_passes=self.max_passes, bias=self.bias,
                              class_weight=self.class_weight)
        self._set_model(model)
        self.n_iter_ = int(result.n_iter)
        self.n_passes_ = float(result.passes)
        self.converged_ = bool(result.converged)
        return self

    def _set_model(self, model: LinearModel):
        self.model_ = model
        self.coef_ = model.coef
        self.intercept_ = model.intercept
        self.classes_ = model.classes
        self.n_features_in_ = model.n_features

    @classmethod
    def from_model(cls, model: LinearModel | str) -> "LinearSVC":
        """An estimator around a saved or in-memory :class:`LinearModel`."""
        if not isinstance(model, LinearModel):
            model = load_model(model)
        p = model.params
        est = cls(solver=p.get("solver", "dcd"), loss=p.get("loss", "squared_hinge"),
                  C=p.get("C", 1.0), tol=p.get("tol", 1e-3), bias=p.get("bias", 1.0))
        est._set_model(model)
        s = model.summary
        est.n_iter_, est.n_passes_ = s.get("n_iter"), s.get("passes")
        est.converged_ = s.get("converged")
        return est

    def _check_fitted(self):
        if not hasattr(self, "model_"):
            raise NotFittedError("This LinearSVC instance is not fitted yet. Call 'fit' first.")

    def _check_n_features(self, X):
        """``X`` as an array or sparse matrix with ``n_features_in_`` columns."""
        import scipy.sparse as sp
        X = X if sp.issparse(X) else np.atleast_2d(np.asarray(X, dtype=np.float64))
        if X.ndim != 2:
            raise InvalidParameterError(f"Expected a 2-D X, got an array of shape {X.shape}.")
        if X.shape[1] != self.n_features_in_:
            raise InvalidParameterError(f"X has {X.shape[1]} features, but LinearSVC is "
                                        f"expecting {self.n_features_in_} features as input.")
        return X

    def decision_function(self, X):
        """Scores of in-memory ``X``, or of the rows of a store / libsvm file (features
        beyond the model's then weigh 0, with one warning)."""
        self._check_fitted()
        if isinstance(X, (str, os.PathLike)) or hasattr(X, "read_chunk"):
            from ._evaluate import UnseenFeatures, _scores, iter_labelled_blocks
            unseen = UnseenFeatures(self.n_features_in_)
            out = [_scores(self.model_, *b[:3]) for b in iter_labelled_blocks(X, unseen=unseen)]
            unseen.warn()
            s = np.concatenate(out)
            return s[:, 0] if self.model_.task == "binary" else s
        return self.model_.decision_function(self._check_n_features(X))

    def predict(self, X):
        self._check_fitted()
        return self.model_.classes[self.model_.predict_encoded(self.decision_function(X))]

    def score(self, X, y=None):
        """Mean accuracy on ``X, y`` (or on a store / libsvm file when ``y`` is None)."""
        self._check_fitted()
        if y is None:
            from ._evaluate import evaluate
            return evaluate(self.model_, X)["accuracy"]
        return float(np.mean(self.predict(X) == np.asarray(y)))

    def save(self, path):
        self._check_fitted()
        self.model_.save(path)
