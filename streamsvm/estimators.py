"""scikit-learn-style estimators wrapping the solvers.

An estimator's parameters are the run's (``memory``, ``random_state``, ``checkpoint``,
``chunk_rows``), ``solver``, and that solver's declared parameters (its table in
``solvers/``: ``LinearSVC(solver="dcd").get_params()`` lists them). ``__init__`` only stores
them; they are validated by the solver at ``fit``, before any pass. ``fit`` runs
:func:`streamsvm._train.train`, the code path of ``streamsvm train``.
"""

from __future__ import annotations

import logging
import os

import numpy as np

from ._train import train
from .exceptions import InvalidParameterError, NotFittedError
from .model import LinearModel, load_model
from .solvers import SOLVERS

__all__ = ["LinearSVC", "WestonWatkinsSVC", "train"]

log = logging.getLogger(__name__)

_RUN = {"memory": "1GB", "random_state": 0, "checkpoint": None, "chunk_rows": 65536,
        "scheduler": None}


class LinearSVC:
    """Linear SVM trained out of core (scikit-learn conventions).

    Parameters
    ----------
    solver : str, default="dcd"
        A solver of :data:`streamsvm.solvers.SOLVERS`.
    memory : str or int, default="1GB"
    random_state : int, default=0
    checkpoint : str, optional
        Checkpoint directory or URL; ``fit`` resumes from it when it holds a matching one.
    chunk_rows : int, default=65536
        Rows per chunk when fitting on in-memory ``X, y``.
    scheduler : distributed.Client or str, optional
        Fit on a dask cluster (a Client or a scheduler address): ``X`` must then be a store
        path or URL its workers can read (``streamsvm.train``'s ``scheduler``).
    **params
        The solver's parameters; for ``dcd``: ``C`` (1.0), ``loss`` ("squared_hinge" or
        "hinge"), ``bias`` (1.0), ``tol`` (1e-3), ``max_passes`` (200), ``class_weight``,
        ``shrinking``, ``slab``, ``disk_slab`` (``streamsvm train --help`` explains each).

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    n_iter_ : int
    n_passes_ : float
    converged_ : bool
    history_ : list of dict
        One entry per outer iteration (``streamsvm.solvers._driver.HISTORY_KEYS``).
    path_ : dict of float to LinearSVC
        With a path of C values (``solver="nesvm"``, ``C_path``): a fitted estimator per C
        (``coef_``, ``predict`` and the rest above are those of the last C).
    model_ : LinearModel

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, streamsvm as ss
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 1.0]]))
    >>> clf = ss.LinearSVC(C=10.0).fit(X, np.array([1, 1, -1, -1]))
    >>> clf.predict(X).tolist()
    [1.0, 1.0, -1.0, -1.0]
    """

    default_solver = "dcd"

    def __init__(self, *, solver=None, memory="1GB", random_state=0, checkpoint=None,
                 chunk_rows=65536, scheduler=None, **params):
        self.solver = self.default_solver if solver is None else solver
        self.memory = memory
        self.random_state = random_state
        self.checkpoint = checkpoint
        self.chunk_rows = chunk_rows
        self.scheduler = scheduler
        for k, v in params.items():
            setattr(self, k, v)
        self._given = set(params)

    def _table(self) -> dict:
        cls = SOLVERS.get(self.solver)
        return cls.param_table() if cls is not None else {}

    def get_params(self, deep=True) -> dict:
        """The run's parameters, ``solver`` and that solver's (defaults for those not set)."""
        out = {"solver": self.solver, **{k: getattr(self, k) for k in _RUN}}
        for name, p in self._table().items():
            out[name] = getattr(self, name, p.default)
        for name in self._given - set(out):         # unknown to the solver: fit refuses them
            out[name] = getattr(self, name)
        return out

    def set_params(self, **params):
        if "solver" in params:
            self.solver = params.pop("solver")
        valid = {"solver", *_RUN, *self._table()}
        for k, v in params.items():
            if k not in valid:
                raise InvalidParameterError(f"Invalid parameter {k!r} for estimator "
                                            f"{type(self).__name__} with solver {self.solver!r}. "
                                            f"Valid parameters are: {sorted(valid)}.")
            setattr(self, k, v)
            if k not in _RUN:
                self._given.add(k)
        return self

    def __repr__(self) -> str:
        shown = {k: v for k, v in self.get_params().items()
                 if k in ("solver", *self._given) or k in _RUN and v != _RUN[k]}
        return f"{type(self).__name__}(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    def _solver_params(self) -> dict:
        return {k: v for k, v in self.get_params().items() if k not in _RUN and k != "solver"}

    def fit(self, X, y=None):
        """Fit on a Store, a store URL, or in-memory ``X`` (sparse/dense) with ``y``."""
        from .io import InMemoryStore, StoreMeta
        if isinstance(X, (str, os.PathLike, StoreMeta)):
            if y is not None:
                raise InvalidParameterError("y must be None when X is a store (labels are in it)")
            store = X
        else:
            if y is None:
                raise InvalidParameterError("y is required when X is an in-memory matrix")
            store = InMemoryStore(X, y, chunk_rows=self.chunk_rows)
        if self.solver not in SOLVERS:
            raise InvalidParameterError(f"The 'solver' parameter of {type(self).__name__} must "
                                        f"be one of {sorted(SOLVERS)}. Got {self.solver!r} "
                                        f"instead.")
        model, result = train(store, solver=self.solver, memory=self.memory,
                              seed=self.random_state, checkpoint=self.checkpoint,
                              resume=self.checkpoint is not None, scheduler=self.scheduler,
                              **self._solver_params())
        if isinstance(model, list):            # a path of C values (nesvm's C_path)
            self.path_ = {m.params["C"]: type(self).from_model(m) for m in model}
            model = model[-1]
        self._set_model(model)
        self.n_iter_ = int(result.n_iter)
        self.n_passes_ = float(result.passes)
        self.converged_ = bool(result.converged)
        self.history_ = result.history
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
        p = dict(model.params)
        solver = p.pop("solver", cls.default_solver)
        table = SOLVERS[solver].param_table() if solver in SOLVERS else {}
        est = cls(solver=solver, **{k: v for k, v in p.items() if k in table})
        est._set_model(model)
        s = model.summary
        est.n_iter_, est.n_passes_ = s.get("n_iter"), s.get("passes")
        est.converged_ = s.get("converged")
        return est

    def _check_fitted(self):
        if not hasattr(self, "model_"):
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet. Call "
                                 f"'fit' first.")

    def _check_n_features(self, X):
        """``X`` as an array or sparse matrix with ``n_features_in_`` columns."""
        import scipy.sparse as sp
        X = X if sp.issparse(X) else np.atleast_2d(np.asarray(X, dtype=np.float64))
        if X.ndim != 2:
            raise InvalidParameterError(f"Expected a 2-D X, got an array of shape {X.shape}.")
        if X.shape[1] != self.n_features_in_:
            raise InvalidParameterError(f"X has {X.shape[1]} features, but "
                                        f"{type(self).__name__} is expecting "
                                        f"{self.n_features_in_} features as input.")
        return X

    def decision_function(self, X):
        """Scores of in-memory ``X``, or of the rows of a store / libsvm file (features
        beyond the model's then weigh 0, with one warning)."""
        self._check_fitted()
        from .io import StoreMeta
        if isinstance(X, (str, os.PathLike, StoreMeta)):
            from ._evaluate import UnseenFeatures, _scores, iter_labelled_blocks
            unseen = UnseenFeatures(self.n_features_in_)
            W = np.ascontiguousarray(self.model_.coef.T)
            out = [_scores(self.model_, W, *b[:3])
                   for b in iter_labelled_blocks(X, unseen=unseen)]
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


class WestonWatkinsSVC(LinearSVC):
    """The Weston–Watkins multiclass SVM (one joint model; ``solver="ww"``), trained out of
    core by dual block coordinate descent with the exact Walrus subproblem solver.

    Parameters as :class:`LinearSVC`'s, the solver's being ``C`` (1.0), ``bias`` (0.0: none,
    the paper's setting), ``tol`` (1e-3, on the relative duality gap), ``gap_decay``
    (0.0009: also stop at this share of the first pass's gap), ``max_passes`` (200),
    ``class_weight`` and ``slab`` (``streamsvm train --solver ww --help``). On two classes
    it trains the binary hinge SVM with ``2C``.

    Examples
    --------
    >>> import numpy as np, streamsvm as ss
    >>> X = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [-1.0, -1.0]])
    >>> clf = ss.WestonWatkinsSVC(C=10.0, bias=1.0).fit(X, np.array([0, 0, 1, 1, 2]))
    >>> clf.predict(X).tolist()
    [0.0, 0.0, 1.0, 1.0, 2.0]
    """

    default_solver = "ww"
