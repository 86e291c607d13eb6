"""What the estimators accept as ``X`` and ``y``, checked before any pass.

The messages follow scikit-learn's wording where its tools look for it (``Unknown label
type``, ``0 feature(s)``, ``requires y to be passed``), so the estimators behave as its
own do inside pipelines and searches. Labels may be numbers or any sortable hashables
(strings, booleans): non-numeric labels are trained as the codes ``0 .. k-1`` of their
sorted order and given back as themselves (:func:`user_labels`).
"""

from __future__ import annotations

import numbers
import sys
import warnings

import numpy as np

from .exceptions import DataConversionWarning, InvalidParameterError, NotFittedError

__all__ = ["check_fit_X", "check_y", "check_predict_X", "not_fitted"]


def _shape_error(X) -> None:
    rows, cols = X.shape
    if rows < 1:
        raise InvalidParameterError(f"Found array with 0 sample(s) (shape={X.shape}) while a "
                                    f"minimum of 1 is required.")
    if cols < 1:
        raise InvalidParameterError(f"0 feature(s) (shape={X.shape}) while a minimum of 1 is "
                                    f"required.")


def _as_2d(X):
    """``X`` as a sparse matrix or a 2-D float array; complex and 1-D input refused."""
    import scipy.sparse as sp
    if sp.issparse(X):
        if X.dtype.kind == "c":
            raise InvalidParameterError("Complex data not supported: X holds complex values")
        return sp.csr_matrix(X, dtype=np.float64)
    a = np.asarray(X)
    if np.iscomplexobj(a):
        raise InvalidParameterError("Complex data not supported: X holds complex values")
    if a.ndim != 2:
        raise InvalidParameterError(
            f"Expected 2D array, got {a.ndim}D array instead (shape {a.shape}). Reshape your "
            f"data with X.reshape(-1, 1) for one feature or X.reshape(1, -1) for one row.")
    try:
        return a.astype(np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"X must hold numbers: {exc}") from None


def check_fit_X(X):
    """In-memory training ``X``: 2-D, real, at least one row and one feature."""
    X = _as_2d(X)
    _shape_error(X)
    return X


def check_predict_X(X, n_features: int, owner: str):
    """``X`` to score: 2-D, real, finite, ``n_features`` columns."""
    import scipy.sparse as sp
    X = _as_2d(X)
    values = X.data if sp.issparse(X) else X
    if not np.all(np.isfinite(values)):
        raise InvalidParameterError("Input X contains NaN or infinity: every value must be a "
                                    "finite number")
    if X.shape[1] != n_features:
        raise InvalidParameterError(f"X has {X.shape[1]} features, but {owner} is expecting "
                                    f"{n_features} features as input.")
    return X


def check_y(y, n_rows: int, owner: str):
    """``(y_numeric, labels)``: the labels to train on and, for non-numeric labels, the
    user's labels in the order of their codes (else None)."""
    if y is None:
        raise InvalidParameterError(f"This {owner} estimator requires y to be passed, but the "
                                    f"target y is None (or fit on a store: it holds its "
                                    f"labels)")
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn(_bridged(DataConversionWarning)(
            "A column-vector y was passed when a 1d array was expected. Please change the "
            "shape of y to (n_samples, ), for example using ravel()."), stacklevel=3)
        y = y.ravel()
    if y.ndim != 1 or len(y) != n_rows:
        raise InvalidParameterError(f"y should be a 1d array of {n_rows} labels (one per row "
                                    f"of X), got an array of shape {y.shape}")
    if y.dtype.kind in "iuf" or (y.dtype == object and all(_real(v) for v in y)):
        y = y.astype(np.float64)
        finite = y[np.isfinite(y)]
        if not np.array_equal(finite, np.round(finite)):
            raise InvalidParameterError(
                "Unknown label type: continuous. A classifier needs class labels (integers, "
                "strings, ...); these labels have fractional values.")
        return y, None
    try:
        labels, codes = np.unique(y, return_inverse=True)
    except TypeError as exc:
        raise InvalidParameterError(f"y holds labels that cannot be ordered: {exc}") from None
    return codes.astype(np.float64), labels


def _real(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


_BRIDGED: dict = {}


def _bridged(cls: type) -> type:
    """``cls``, or when scikit-learn is in use a subclass of ``cls`` and of scikit-learn's
    class of the same name (its tools catch and filter their own classes)."""
    skl = sys.modules.get("sklearn.exceptions")
    theirs = getattr(skl, cls.__name__, None)
    if theirs is None:
        return cls
    if cls not in _BRIDGED:
        _BRIDGED[cls] = type(cls.__name__, (cls, theirs), {"__module__": cls.__module__})
    return _BRIDGED[cls]


def not_fitted(message: str) -> NotFittedError:
    """A :class:`NotFittedError` (also scikit-learn's, when it is in use)."""
    return _bridged(NotFittedError)(message)
