"""scikit-learn-style estimators wrapping the solvers.

An estimator's parameters are written out in its ``__init__`` signature, as scikit-learn
reads them (:mod:`streamsvm._estimator_params`): the run's (``memory``, ``random_state``,
``checkpoint``, ``chunk_rows``, ``scheduler``), ``solver``, and the parameters of every solver
(None: the chosen solver's own default). ``__init__`` only stores them; they are validated
by the solver at ``fit``, before any pass. ``fit`` runs :func:`streamsvm._train.train`, the
code path of ``streamsvm train``.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os

import numpy as np

from ._estimator_input import check_fit_X, check_predict_X, check_y, not_fitted
from ._auto import AUTO
from ._estimator_params import RUN_PARAMS, estimator_signature, is_default, solver_kwargs
from ._train import train
from .exceptions import InvalidParameterError
from .model import LinearModel, load_model
from .solvers import SOLVERS
from .solvers._base import REGISTER_HOOKS

__all__ = ["LinearSVC", "WestonWatkinsSVC", "train"]

log = logging.getLogger(__name__)


def _init_for(cls):
    """Give ``cls`` an ``__init__`` whose signature lists its parameters (module doc)."""
    signature, defaults = estimator_signature(cls.solvers or sorted(SOLVERS),
                                              cls.default_solver,
                                              with_solver=cls.solvers is None)

    def __init__(self, **params):
        for name in params:
            if name not in defaults:
                near = difflib.get_close_matches(name, defaults, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise TypeError(f"{cls.__name__}() got an unexpected keyword argument "
                                f"{name!r}{hint}; its parameters: {', '.join(defaults)}")
        for name, default in defaults.items():
            setattr(self, name, params.get(name, default))

    __init__.__signature__ = signature
    __init__.__qualname__ = f"{cls.__name__}.__init__"
    cls.__init__ = __init__
    cls._defaults = defaults
    return cls


class LinearSVC:
    """Linear SVM trained out of core (scikit-learn conventions).

    Parameters
    ----------
    solver : str, default="auto"
        A solver of :data:`streamsvm.solvers.SOLVERS`, or "auto": chosen at ``fit`` from the
        data and the parameters (``streamsvm train --solver auto``; ``model_.params["solver"]``
        is the one chosen, ``model_.summary["chosen_because"]`` says why).
    memory : str or int, default="1GB"
    random_state : int, default=0
    checkpoint : str, optional
        Checkpoint directory or URL (the rule of ``streamsvm train --checkpoint``): ``fit``
        continues the run whose checkpoints it holds; another run's are refused
        (``CheckpointError`` naming the difference) unless ``overwrite_checkpoint``.
    resume : bool, default=True
        False: start afresh, refused where checkpoints already are unless
        ``overwrite_checkpoint``.
    overwrite_checkpoint : bool, default=False
        Delete the checkpoints already in ``checkpoint`` and start afresh.
    warm_start : bool, default=False
        A second ``fit`` begins at the weights of the first (``streamsvm train
        --init-model``): the primal solvers (newton, nesvm, alm) only; y must have the
        same classes.
    chunk_rows : int, default=65536
        Rows per chunk when fitting on in-memory ``X, y``.
    scheduler : distributed.Client or str, optional
        Fit on a dask cluster (a Client or a scheduler address): ``X`` must then be a store
        path or URL its workers can read (``streamsvm.train``'s ``scheduler``).
    C, loss, bias, tol, max_passes, class_weight, ... : the solvers' parameters
        Every parameter of every solver is in the signature: ``C`` (1.0) and ``tol`` (1e-3)
        and ``loss`` ("squared_hinge") and ``bias`` (1.0) are the same for all; a parameter
        whose default differs by solver (``max_passes``: 200, or 3000 for alm and nesvm,
        ...) defaults to None, the chosen solver's own. ``fit`` refuses a
        parameter the chosen solver does not take unless it is left at its default;
        ``streamsvm train --solver S --help`` explains each, and ``model_.params`` holds the
        values the solver used.

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

    default_solver = "auto"
    solvers = None                    # every solver of SOLVERS; ``solver`` is a parameter

    def _solver_name(self) -> str:
        return getattr(self, "solver", self.default_solver)

    def get_params(self, deep=True) -> dict:
        """Every parameter of the signature and its value (None: the solver's default)."""
        return {k: getattr(self, k) for k in self._defaults}

    def set_params(self, **params):
        for k, v in params.items():
            if k not in self._defaults:
                raise InvalidParameterError(f"Invalid parameter {k!r} for estimator "
                                            f"{type(self).__name__}. Valid parameters are: "
                                            f"{sorted(self._defaults)}.")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        shown = {k: v for k, v in self.get_params().items()
                 if k == "solver" or not is_default(v, self._defaults[k])}
        return f"{type(self).__name__}(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    def fit(self, X, y=None):
        """Fit on a Store, a store URL, or in-memory ``X`` (sparse/dense) with ``y``: numeric
        labels or any sortable ones (strings, booleans), given back by ``predict``."""
        from .io import InMemoryStore, StoreMeta
        labels = None
        if isinstance(X, (str, os.PathLike, StoreMeta)):
            if y is not None:
                raise InvalidParameterError("y must be None when X is a store (labels are in it)")
            store = X
        else:
            X = check_fit_X(X)
            y, labels = check_y(y, X.shape[0], type(self).__name__)
            store = InMemoryStore(X, y, chunk_rows=self.chunk_rows)
        solver = self._solver_name()
        if solver not in SOLVERS and (solver != AUTO or type(self).solvers is not None):
            raise InvalidParameterError(f"The 'solver' parameter of {type(self).__name__} must "
                                        f"be 'auto' or one of {sorted(SOLVERS)}. Got {solver!r} "
                                        f"instead.")
        params = solver_kwargs(self, self._defaults, solver)
        if labels is not None and isinstance(params.get("class_weight"), dict):
            params["class_weight"] = _coded_weights(params["class_weight"], labels)
        init = self._warm_model(labels) if self.warm_start else None
        model, result = train(store, solver=solver, memory=self.memory, init_model=init,
                              seed=self.random_state, checkpoint=self.checkpoint,
                              resume=self.resume,
                              overwrite_checkpoint=self.overwrite_checkpoint,
                              scheduler=self.scheduler,
                              **params)
        if labels is not None:
            model = ([dataclasses.replace(m, labels=labels) for m in model]
                     if isinstance(model, list) else dataclasses.replace(model, labels=labels))
        if isinstance(model, list):            # a path of C values (nesvm's C_path)
            self.path_ = {m.params["C"]: type(self).from_model(m) for m in model}
            model = model[-1]
        self._set_model(model)
        self.n_iter_ = int(result.n_iter)
        self.n_passes_ = float(result.passes)
        self.converged_ = bool(result.converged)
        self.history_ = result.history
        return self

    def _warm_model(self, labels):
        """The fitted model to start from (``warm_start``), its labels checked against
        ``y``'s (both are trained as the same codes), or None before the first fit."""
        prev = getattr(self, "model_", None)
        if prev is None or (prev.labels is None and labels is None):
            return prev
        if prev.labels is None or labels is None or not np.array_equal(prev.labels, labels):
            raise InvalidParameterError(
                f"warm_start=True starts at the fitted model, of labels "
                f"{prev.user_classes.tolist()[:10]}; y has {np.asarray(labels).tolist()[:10]}")
        return dataclasses.replace(prev, labels=None)

    def _set_model(self, model: LinearModel):
        self.model_ = model
        self.coef_ = model.coef
        self.intercept_ = model.intercept
        self.classes_ = model.user_classes
        self.n_features_in_ = model.n_features

    @classmethod
    def from_model(cls, model: LinearModel | str) -> "LinearSVC":
        """An estimator around a saved or in-memory :class:`LinearModel`."""
        if not isinstance(model, LinearModel):
            model = load_model(model)
        p = dict(model.params)
        solver = p.pop("solver", cls.default_solver)
        kw = {k: v for k, v in p.items() if k in cls._defaults and k not in RUN_PARAMS}
        if "solver" in cls._defaults:
            kw["solver"] = solver
        est = cls(**kw)
        est._set_model(model)
        s = model.summary
        est.n_iter_, est.n_passes_ = s.get("n_iter"), s.get("passes")
        est.converged_ = s.get("converged")
        return est

    def __sklearn_tags__(self):
        """scikit-learn's estimator tags (read by its utilities; needs scikit-learn)."""
        from sklearn.utils import ClassifierTags, InputTags, Tags, TargetTags
        return Tags(estimator_type="classifier", target_tags=TargetTags(required=True),
                    classifier_tags=ClassifierTags(), input_tags=InputTags(sparse=True))

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "model_")

    def _check_fitted(self):
        if not hasattr(self, "model_"):
            raise not_fitted(f"This {type(self).__name__} instance is not fitted yet. Call "
                             f"'fit' first.")

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
        X = check_predict_X(X, self.n_features_in_, type(self).__name__)
        return self.model_.decision_function(X)

    def predict(self, X):
        self._check_fitted()
        return self.model_.user_classes[self.model_.predict_encoded(self.decision_function(X))]

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


def _coded_weights(class_weight: dict, labels: np.ndarray) -> dict:
    """``class_weight`` keyed by the user's labels, keyed by their codes instead."""
    index = {label: i for i, label in enumerate(labels.tolist())}
    out = {}
    for k, w in class_weight.items():
        key = k.item() if isinstance(k, np.generic) else k
        if key not in index:
            raise InvalidParameterError(f"The 'class_weight' parameter names {k!r}, not a "
                                        f"label of y ({labels.tolist()[:10]})")
        out[index[key]] = w
    return out


class WestonWatkinsSVC(LinearSVC):
    """The Weston–Watkins multiclass SVM (one joint model; ``solver="ww"``), trained out of
    core by dual block coordinate descent with the exact Walrus subproblem solver.

    Parameters as :class:`LinearSVC`'s, the solver's being ``C`` (1.0), ``bias`` (1.0, as
    every solver; 0: none, the paper's setting), ``tol`` (1e-3, on the relative duality gap),
    ``gap_decay`` (0.0009: also stop at this share of the first pass's gap), ``max_passes``
    (200), ``class_weight`` and ``slab`` (``streamsvm train --solver ww --help``). On two
    classes it trains the binary hinge SVM with the same ``C``.

    Examples
    --------
    >>> import numpy as np, streamsvm as ss
    >>> X = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [-1.0, -1.0]])
    >>> clf = ss.WestonWatkinsSVC(C=10.0).fit(X, np.array([0, 0, 1, 1, 2]))
    >>> clf.predict(X).tolist()
    [0.0, 0.0, 1.0, 1.0, 2.0]
    """

    default_solver = "ww"
    solvers = ("ww",)                 # ``solver`` is not a parameter: always ww


_init_for(LinearSVC)
_init_for(WestonWatkinsSVC)
REGISTER_HOOKS.append(lambda: _init_for(LinearSVC))     # a solver registered later
