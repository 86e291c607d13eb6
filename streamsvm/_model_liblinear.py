"""LIBLINEAR's text model format: read (models of LIBLINEAR's ``train`` or of
:meth:`~streamsvm.model.LinearModel.to_liblinear`) and written.

LIBLINEAR lists its labels in the order they first appear in the training data and
predicts the first of two labels when ``w·x > 0``, else the second; of more, the first
label of highest score. A LinearModel's classes are sorted and a binary model's positive
class is ``classes[1]``: reading permutes the rows (negates a binary ``w`` whose first
label is the smaller), and keeps LIBLINEAR's order as ``tie_break`` where it decides
ties, so that predictions are LIBLINEAR's, ties included. The weights are parsed a block
of lines at a time into the preallocated ``coef``; a file larger than its header allows
is refused before it is read, and every value must be finite.
"""

from __future__ import annotations

import re

import numpy as np

from .exceptions import ModelError

__all__ = ["read_liblinear", "liblinear_pieces", "LIBLINEAR_LOSS"]

LIBLINEAR_LOSS = {"L2R_LR": "log", "L2R_L2LOSS_SVC_DUAL": "squared_hinge",
                  "L2R_L2LOSS_SVC": "squared_hinge", "L2R_L1LOSS_SVC_DUAL": "hinge",
                  "MCSVM_CS": "crammer_singer", "L1R_L2LOSS_SVC": "squared_hinge",
                  "L1R_LR": "log", "L2R_LR_DUAL": "log"}
"""LIBLINEAR's classification solvers and the loss each minimizes."""
_HEAD_KEYS = ("solver_type", "nr_class", "label", "nr_feature", "bias", "rho")
_BLOCK = 1 << 20
_MAX_CHARS = 64
"""Most characters a weight may take with its separator (LIBLINEAR writes ``%.17g ``: at
most 25)."""


def _solver(problem) -> str:
    """LIBLINEAR's ``solver_type`` for a problem (informational: its ``predict`` scores every
    linear model alike)."""
    if problem is None:
        return "L2R_L2LOSS_SVC_DUAL"
    if problem.layout == "joint":
        return "MCSVM_CS"
    if problem.l1:
        return "L1R_L2LOSS_SVC"
    return "L2R_L1LOSS_SVC_DUAL" if problem.loss == "hinge" else "L2R_L2LOSS_SVC_DUAL"


def liblinear_pieces(model):
    """The bytes of ``model`` as a LIBLINEAR text model, a few thousand rows at a time
    (integer labels only: raises before the first piece).

    The label order and the sign of a binary ``w`` are chosen so that LIBLINEAR predicts
    what the model does, ties included (the inverse of :func:`read_liblinear`)."""
    from .exceptions import InvalidParameterError
    labels = model.classes
    if model.labels is not None:
        raise InvalidParameterError("LIBLINEAR model files need integer class labels; this "
                                    f"model's are {model.labels.tolist()[:10]}")
    if not np.all(labels == np.round(labels)):
        raise InvalidParameterError("LIBLINEAR model files need integer class labels; "
                                    f"this model has {labels.tolist()}")
    return _pieces(model, labels)


def _pieces(model, labels):
    problem = model.problem_obj()
    bias = float(problem.bias if problem is not None else model.params.get("bias", 0.0) or 0.0)
    solver = model.params.get("solver_type") or _solver(problem)
    ties = model.tie_order()
    if model.task == "binary":          # LIBLINEAR: label[0] iff w·x > 0, ties to label[1]
        order, sign = ([1, 0], 1.0) if ties[0] == 0 else ([0, 1], -1.0)
        if solver == "MCSVM_CS":        # two columns, LIBLINEAR's predict reads the first
            sign = np.array([[sign], [-sign]])
        W, b = sign * model.coef[:1], (sign * model.intercept[:1]).reshape(-1)
    else:
        order = ties
        W, b = model.coef[order], model.intercept[order]
    head = [f"solver_type {solver}", f"nr_class {len(order)}",
            "label " + " ".join(str(int(labels[i])) for i in order),
            f"nr_feature {model.n_features}", f"bias {bias if bias > 0 else -1:.17g}", "w"]
    yield ("\n".join(head) + "\n").encode()
    step = max(1, (1 << 16) // max(1, len(order)))
    for j in range(0, model.n_features, step):
        yield "".join(" ".join(f"{v:.17g}" for v in col) + " \n"
                      for col in W[:, j:j + step].T).encode()
    if bias > 0:
        yield (" ".join(f"{v:.17g}" for v in b / bias) + " \n").encode()


def _header(f, source):
    """The header lines up to ``w``: ``({key: (values, line)}, bytes after it, line of
    the first weight)``."""
    buf, head, lineno = b"", {}, 0
    while True:
        nl = buf.find(b"\n")
        if nl < 0:
            if len(buf) > (1 << 24):
                raise ModelError("not a LIBLINEAR model: a header line of more than 16 MiB",
                                 file=source, line=lineno + 1)
            chunk = f.read(_BLOCK)
            if not chunk and not buf.strip():
                raise ModelError("incomplete LIBLINEAR model: no 'w' line", file=source)
            buf += chunk or b"\n"
            continue
        line, buf = buf[:nl], buf[nl + 1:]
        lineno += 1
        try:
            key, *rest = line.decode("ascii").split() or [""]
        except UnicodeDecodeError:
            raise ModelError("not a LIBLINEAR model: not ASCII text", file=source,
                             line=lineno) from None
        if key == "w":
            return head, buf, lineno + 1
        if key not in _HEAD_KEYS:
            raise ModelError(f"unknown text in a LIBLINEAR model: {line[:60].decode()!r}",
                             file=source, line=lineno)
        head[key] = (rest, lineno)


def read_liblinear(f, size: int, source: str) -> dict:
    """The fields of a LinearModel (``coef``, ``intercept``, ``classes``, ``task``,
    ``params``, ``summary``, ``tie_break``) from the LIBLINEAR text model in the binary
    file ``f`` of ``size`` bytes (module doc)."""
    head, rest, first_line = _header(f, source)
    missing = [k for k in ("solver_type", "nr_class", "label", "nr_feature", "bias")
               if k not in head]
    if missing:
        raise ModelError(f"incomplete LIBLINEAR model: no {missing[0]!r} line", file=source)

    def field(key, conv, n=1, low=None):
        values, line = head[key]
        try:
            if len(values) != n:
                raise ValueError(f"{len(values)} values, expected {n}")
            out = [conv(v) for v in values]
            if conv is float and not np.isfinite(out).all():
                raise ValueError("not finite")
            if low is not None and out[0] < low:
                raise ValueError(f"expected at least {low}")
        except ValueError as exc:
            raise ModelError(f"bad {key!r} line: {' '.join(values)[:80]!r} ({exc})",
                             file=source, line=line) from None
        return out[0] if n == 1 else out
    solver = field("solver_type", str)
    if solver not in LIBLINEAR_LOSS:
        raise ModelError(f"solver_type {solver} is not a classifier; streamsvm reads "
                         f"LIBLINEAR classification models ({', '.join(LIBLINEAR_LOSS)})",
                         file=source, line=head["solver_type"][1])
    nr_class, nr_feature = field("nr_class", int, low=1), field("nr_feature", int, low=0)
    if nr_class == 1:
        raise ModelError("nr_class 1: a model of a single class (it predicts that label for "
                         "every row); streamsvm reads models of two classes or more",
                         file=source, line=head["nr_class"][1])
    bias = field("bias", float)
    labels = np.asarray(field("label", float, nr_class), dtype=np.float64)
    if len(np.unique(labels)) != nr_class:
        raise ModelError(f"bad 'label' line: a label listed twice ({labels.tolist()})",
                         file=source, line=head["label"][1])
    nr_w = 1 if nr_class == 2 and solver != "MCSVM_CS" else nr_class
    n = nr_feature + (1 if bias >= 0 else 0)
    total = n * nr_w
    if size > total * _MAX_CHARS + (1 << 24):
        raise ModelError(f"{size:,} bytes, more than its header allows ({n:,} rows of "
                         f"{nr_w} weights); refused unread", file=source,
                         line=head["nr_feature"][1])
    if size < 2 * total - 1:
        raise ModelError(f"{size:,} bytes cannot hold the {total:,} weights its header "
                         f"declares (truncated?)", file=source, line=head["nr_feature"][1])
    classes = np.sort(labels)
    rows = 1 if nr_class == 2 else nr_class
    coef, b = np.empty((rows, nr_feature)), np.zeros(rows)
    if nr_class == 2:        # LIBLINEAR: labels[0] iff w·x > 0 (column 0, even for MCSVM_CS)
        flip = labels[0] < labels[1]
        dest, sign = np.array([0] + [-1] * (nr_w - 1)), -1.0 if flip else 1.0
        ties = labels[::-1].copy() if flip else None
    else:
        dest, sign = np.searchsorted(classes, labels), 1.0
        ties = None if (dest == np.arange(nr_class)).all() else labels
    _weights(f, rest, first_line, (coef, b), dest, sign, nr_w, total, source)
    return {"coef": coef, "intercept": b * bias if bias >= 0 else np.zeros(rows),
            "classes": classes, "task": "binary" if rows == 1 else "multiclass",
            "params": {"solver_type": solver, "loss": LIBLINEAR_LOSS[solver],
                       "bias": max(bias, 0.0)},
            "summary": {"format": "liblinear"}, "tie_break": ties}


def _weights(f, rest, first_line, out, dest, sign, nr_w, total, source):
    """Parse the values after ``w`` (a block of lines at a time) into ``out = (coef, b)``:
    value ``t`` is LIBLINEAR's column ``t % nr_w`` of row ``t // nr_w`` (a feature, or the
    bias); column ``c`` goes to row ``dest[c]`` (-1: dropped)."""
    coef, b = out
    nr_feature = coef.shape[1]
    t, line, buf, eof, last = 0, first_line, rest, False, first_line
    while not eof:
        chunk = f.read(_BLOCK)
        eof = not chunk
        buf += chunk
        cut = len(buf) if eof else buf.rfind(b"\n") + 1
        block, buf = buf[:cut], buf[cut:]
        if not block and not eof:
            continue
        tokens = block.split()
        if t + len(tokens) > total:
            j = total - t
            raise ModelError(f"more weights than the {total:,} its header declares",
                             file=source, line=line + _line_of(block, j))
        try:
            vals = np.array(tokens, dtype=np.float64)
        except ValueError:
            j = next(i for i, tok in enumerate(tokens) if not _is_float(tok))
            raise ModelError(f"bad weight {tokens[j][:40].decode(errors='replace')!r}",
                             file=source, line=line + _line_of(block, j)) from None
        bad = ~np.isfinite(vals)
        if bad.any():
            j = int(np.argmax(bad))
            raise ModelError(f"weight {tokens[j].decode()} is not finite: weights must be",
                             file=source, line=line + _line_of(block, j))
        idx = t + np.arange(len(vals))
        row, col = idx // nr_w, dest[idx % nr_w]
        keep = col >= 0
        feat = keep & (row < nr_feature)
        coef[col[feat], row[feat]] = sign * vals[feat]
        bias = keep & (row == nr_feature)
        b[col[bias]] = sign * vals[bias]
        t += len(vals)
        if tokens:
            last = line + block.count(b"\n", 0, len(block.rstrip()))
        line += block.count(b"\n")
    if t != total:
        raise ModelError(f"expected {total:,} weights after 'w', found {t:,}, the last on this "
                         f"line (truncated?)", file=source, line=last if t else first_line - 1)


def _is_float(tok: bytes) -> bool:
    try:
        float(tok)
        return True
    except ValueError:
        return False


def _line_of(block: bytes, j: int) -> int:
    """Lines of ``block`` before its token ``j`` (0-based)."""
    for i, m in enumerate(re.finditer(rb"\S+", block)):
        if i == j:
            return block.count(b"\n", 0, m.start())
    return block.count(b"\n")
