"""The peers of the solver suite, each trained the way its users do, in the worker process
(``tools/bench.py worker``, :mod:`tools.bench.worker`): LIBLINEAR (``liblinear-official``),
scikit-learn's ``LinearSVC`` and ``SGDClassifier`` (``partial_fit`` over the store's chunks),
Vowpal Wabbit; and what translates their parameters and weights into the benchmark's one
problem (bias = 1 as a regularized constant feature, labels encoded as in the store).
"""

from __future__ import annotations

import math
import os
import re
import time
import warnings

import numpy as np

from ._timed import timed

__all__ = ["PEER_FUNCS", "encode_labels", "liblinear_weights", "parse_liblinear_output",
           "parse_vw_readable_model", "vw_bits", "vw_lambda", "sgd_alpha", "vw_cache",
           "vw_passes_used", "VW_CONSTANT_HASH"]

#: VW's hash of the constant (bias) feature before masking (``constant`` in VW's source).
VW_CONSTANT_HASH = 11650396


def encode_labels(y, classes, task):
    """Original labels → the store's encoding (binary ±1, multiclass class index)."""
    y = np.asarray(y, dtype=np.float64)
    classes = np.asarray(classes, dtype=np.float64)
    if task == "binary":
        return np.where(y == classes[-1], 1.0, -1.0)
    idx = np.searchsorted(classes, y)
    bad = (idx >= len(classes)) | (classes[np.minimum(idx, len(classes) - 1)] != y)
    if bad.any():
        raise ValueError(f"labels {np.unique(y[bad])[:5]} are not among the training classes")
    return idx.astype(np.float64)


def sgd_alpha(C: float, n_rows: int) -> float:
    """SGDClassifier's alpha for ½‖w‖² + C Σ loss: (1/n)Σ loss + α/2‖w‖², times C·n."""
    return 1.0 / (C * n_rows)


def vw_lambda(C: float, n_rows: int) -> float:
    """VW's ``--l2`` for the same objective: VW minimizes Σ_i [loss_i + λ/2‖w‖²] / n."""
    return 1.0 / (C * n_rows)


def vw_bits(n_features: int) -> int:
    """Hash bits such that feature names 1..d map to themselves and miss the constant."""
    bits = max(18, (n_features + 1).bit_length())
    while (VW_CONSTANT_HASH & ((1 << bits) - 1)) <= n_features:
        bits += 1
    return bits


def parse_vw_readable_model(text: str, n_features: int, bits: int):
    """Weights of a binary VW model written by ``--readable_model``.

    Feature names are the 1-based libsvm indices in VW's default namespace, whose hash is the
    number itself, so weight index ``j`` is feature ``j - 1`` of the store; the constant is at
    ``VW_CONSTANT_HASH & mask``. With ``--l2`` VW keeps the weights as ``raw × contraction`` (a
    lazily applied weight decay), the contraction written as ``l2_state`` in the header: the
    weights returned are ``raw × l2_state`` (checked against VW's own predictions in the
    tests). Returns ``(W (1, d), b (1,))``.
    """
    mask = (1 << bits) - 1
    const = VW_CONSTANT_HASH & mask
    W = np.zeros((1, n_features))
    b = 0.0
    scale = 1.0
    for line in text.splitlines():
        if line.startswith("l2_state "):
            scale = float(line.split()[1])
            continue
        m = re.match(r"^(\d+):(\S+)", line)
        if not m:
            continue
        idx, val = int(m.group(1)), float(m.group(2))
        if idx == const:
            b = val
        elif 1 <= idx <= n_features:
            W[0, idx - 1] = val
        elif val != 0.0:
            raise ValueError(f"VW weight index {idx} is neither a feature (1..{n_features}) nor "
                             f"the constant ({const})")
    return W * scale, np.array([b * scale])


def parse_liblinear_output(text: str, solver: int) -> dict:
    """Iteration counts from LIBLINEAR's (non-quiet) output.

    Dual solvers (-s 1, 3, 4) print ``optimization finished, #iter = N`` once per binary
    subproblem: each iteration is one sweep over the active (unshrunk) rows, so the sum is an
    upper bound on passes over the data. The primal Newton solver (-s 2) prints one line per
    Newton iteration with its CG steps; a pass count is estimated as 1 (initial function and
    gradient) + Σ (CG steps + 2) (the line search's function value and the new gradient).
    LIBLINEAR 2.50 stops dual CD after 300 iterations ("reaching max number of iterations");
    ``-s 1`` then switches to ``-s 2`` from the dual solution ("Switching to use -s 2"), whose
    Newton passes are added.
    """
    iters = [int(v) for v in re.findall(r"#iter\s*=\s*(\d+)", text)]
    newton = [int(v) for v in re.findall(r"^iter\s+\d+.*?CG\s+(\d+)", text, flags=re.M)]
    n_init = len(re.findall(r"^init f", text, flags=re.M))
    newton_passes = n_init + sum(c + 2 for c in newton)
    out = {"max_iter_warning": "reaching max number of" in text,
           "switched_to_primal": "Switching to use -s 2" in text}
    if solver == 2:
        out["newton_iters"] = len(newton)
        out["cg_steps"] = sum(newton)
        out["passes"] = float(max(newton_passes, 1))
        out["passes_kind"] = "approx"
    else:
        out["iters"] = iters
        out["passes"] = float(sum(iters)) if iters else None
        out["passes_kind"] = "upper bound"
        if newton:      # LIBLINEAR >= 2.4x: -s 1 falls back to -s 2 after max iterations
            out["newton_iters"] = len(newton)
            out["cg_steps"] = sum(newton)
            out["passes"] = (out["passes"] or 0.0) + newton_passes
    return out


def liblinear_weights(model, n_features: int, task: str, n_classes: int, bias: float = 1.0):
    """``(W, b)`` in the store's convention from a LIBLINEAR model.

    ``model.w`` holds ``(nr_feature + 1) × nr_w`` doubles, feature-major; binary models
    (``nr_w = 1``) score ``label[0]`` positive, so the sign flips when ``label[0] != +1``.
    """
    nr_class, nr_feature = int(model.nr_class), int(model.nr_feature)
    solver = int(model.param.solver_type)
    nr_w = 1 if (nr_class == 2 and solver != 4) else nr_class
    has_bias = model.bias >= 0
    n = nr_feature + (1 if has_bias else 0)
    w = np.ctypeslib.as_array(model.w, shape=(n * nr_w,)).reshape(n, nr_w).copy()
    labels = [int(v) for v in model.get_labels()]
    d = min(nr_feature, n_features)
    if task == "binary" and nr_w == 1:
        sign = 1.0 if labels[0] == 1 else -1.0
        W = np.zeros((1, n_features))
        W[0, :d] = sign * w[:d, 0]
        b = np.array([sign * w[nr_feature, 0] * model.bias if has_bias else 0.0])
        return W, b
    k = 1 if task == "binary" else n_classes
    W = np.zeros((k, n_features))
    b = np.zeros(k)
    for j, lab in enumerate(labels):
        c = (0 if lab == 1 else None) if task == "binary" else lab
        if c is None:
            continue
        W[c, :d] = w[:d, j]
        b[c] = w[nr_feature, j] * model.bias if has_bias else 0.0
    return W, b


def _load_text(path, n_features, classes, task):
    from sklearn.datasets import load_svmlight_file
    X, y = load_svmlight_file(path, n_features=n_features, dtype=np.float64)
    X = X.tocsr()
    if X.nnz < 2**31 - 1:     # scikit-learn's liblinear wrapper wants 32-bit indices
        X.indices = X.indices.astype(np.int32)
        X.indptr = X.indptr.astype(np.int32)
    return X, encode_labels(y, classes, task)


# LIBLINEAR -----------------------------------------------------------------------------------

def _libc_srand(seed: int) -> None:
    """Reset the C library's ``rand()`` stream (LIBLINEAR's coordinate orders) where libc is
    loadable."""
    import ctypes
    import ctypes.util
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or None).srand(seed)
    except (OSError, AttributeError):
        pass


def m_liblinear(spec, out):
    from liblinear import liblinear as ll
    from liblinear import liblinearutil as lu
    ds = spec["dataset"]
    X, y = _load_text(ds["train_text"], ds["n_features"], ds["classes"], ds["task"])
    prob = ll.problem(y, X)
    prob.set_bias(1.0)
    s = int(spec["s"])
    k = 1 if ds["task"] == "binary" else len(ds["classes"])
    lines = []
    printer = ll.PRINT_STRING_FUN(lambda msg: lines.append(msg.decode(errors="replace")))
    out.ready()
    for e in spec["eps"]:
        def fit(e=e):
            lines.clear()
            _libc_srand(1)      # LIBLINEAR draws its orders from libc's rand(): the same
            #                     stream in every fit, whatever ran in this process before
            param = ll.parameter(f"-s {s} -c {spec['C']!r} -B 1 -e {e!r}")
            param.print_func = printer
            return lu.train(prob, param)
        model, times = timed(fit, spec["repeat"], spec["repeat_under"])
        info = parse_liblinear_output("".join(lines), s)
        W, b = liblinear_weights(model, ds["n_features"], ds["task"], k)
        out.add("ladder", f"-e {e:g}", {"e": e}, times, info.pop("passes"),
                info.pop("passes_kind"), W, b, default=(e == spec["default_eps"]), **info)
        del model
        if times[0] > spec.get("ladder_budget", math.inf):
            out.extra["ladder_stopped"] = f"-e {e:g} took {times[0]:.1f}s > ladder budget"
            break
    return "ok", None


# scikit-learn --------------------------------------------------------------------------------

def m_linearsvc(spec, out):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.svm import LinearSVC
    ds = spec["dataset"]
    X, y = _load_text(ds["train_text"], ds["n_features"], ds["classes"], ds["task"])
    k = 1 if ds["task"] == "binary" else len(ds["classes"])

    def fit():
        clf = LinearSVC(C=spec["C"], loss=spec["loss"], dual=True, tol=spec["tol"],
                        max_iter=spec["max_iter"], fit_intercept=True, intercept_scaling=1.0,
                        random_state=spec["seed"])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            clf.fit(X, y)
        return clf, any(issubclass(w.category, ConvergenceWarning) for w in caught)

    out.ready()
    (clf, warned), times = timed(fit, spec["repeat"], spec["repeat_under"])
    n_iter = int(np.max(clf.n_iter_))
    out.add("headline", f"tol={spec['tol']:g}", {"tol": spec["tol"]}, times, n_iter * k,
            "upper bound", clf.coef_, clf.intercept_, n_iter=n_iter, max_iter_warning=warned)
    return "ok", None


def m_sgd(spec, out):
    import scipy.sparse as sp
    from sklearn.linear_model import SGDClassifier
    from streamsvm import open_store
    ds = spec["dataset"]
    store = open_store(ds["store"])
    d, n = store.n_features, store.n_rows
    classes = np.array([-1.0, 1.0]) if ds["task"] == "binary" else np.arange(len(ds["classes"]))
    alpha = sgd_alpha(spec["C"], n)
    out.extra["alpha"] = alpha
    out.extra["chunks"] = store.n_chunks

    def fit(snap=None):
        clf = SGDClassifier(loss=spec["loss"], alpha=alpha, fit_intercept=True,
                            learning_rate="optimal", random_state=spec["seed"])
        t0 = time.perf_counter()
        for ep in range(spec["epochs"]):
            for i in range(store.n_chunks):
                ch = store.read_chunk(i)
                X = sp.csr_matrix((ch.data, ch.indices, ch.indptr), shape=(ch.n_rows, d))
                clf.partial_fit(X, ch.y, classes=classes)
            if snap is not None:
                snap.append((time.perf_counter() - t0, clf.coef_.copy(), clf.intercept_.copy()))
        return clf

    out.ready()
    snaps = []
    clf, times = timed(lambda: fit(snaps if not snaps else None), spec["repeat"],
                        spec["repeat_under"])
    for ep, (t, W, b) in enumerate(snaps[:-1], start=1):
        out.add("curve", f"epoch {ep}", {"epochs": ep}, t, ep, "exact", W, b)
    out.add("headline", f"{spec['epochs']} epochs", {"epochs": spec["epochs"]}, times,
            spec["epochs"], "exact", clf.coef_, clf.intercept_)
    return "ok", None


# Vowpal Wabbit ------------------------------------------------------------------------------

def vw_cache(vw_text: str, cache: str, bits: int, reduction: str = "") -> float:
    """Build Vowpal Wabbit's binary cache of the VW text file ``vw_text`` at ``cache`` (one
    pass over the text, hinge loss, ``bits`` hash bits, ``reduction`` e.g. ``" --oaa 5"``),
    replacing one there; returns its seconds."""
    import vowpalwabbit
    t0 = time.perf_counter()
    if os.path.exists(cache):
        os.remove(cache)
    ws = vowpalwabbit.Workspace(f"-d {vw_text} --cache_file {cache} --passes 1 "
                                f"--holdout_off -b {bits} --quiet --loss_function hinge"
                                f"{reduction}")
    ws.finish()
    return time.perf_counter() - t0


def vw_passes_used(log: str) -> int | None:
    """The passes a VW run made (``passes used = N`` of its summary; with its holdout, it
    stops before ``--passes`` once the holdout loss stops improving)."""
    m = re.search(r"passes used\s*=\s*(\d+)", log)
    return int(m.group(1)) if m else None


def m_vw(spec, out):
    """VW ``--passes P`` for each ``P`` of ``spec["passes"]``, from its cache file: built here
    from ``dataset.vw_train`` (and removed after) unless ``spec["cache"]`` names one already
    built (:func:`vw_cache`, kept); ``spec["holdout"]``: VW's own holdout stop on (every 10th
    row held out, the passes it used reported), else ``--holdout_off`` and ``P`` passes."""
    try:
        import vowpalwabbit
    except Exception as exc:  # noqa: BLE001  (the import may fail in many ways)
        return "unavailable", f"vowpalwabbit does not import: {type(exc).__name__}: {exc}"
    ds = spec["dataset"]
    work = spec["workdir"]
    os.makedirs(work, exist_ok=True)
    bits = vw_bits(ds["n_features"])
    multi = ds["task"] == "multiclass"
    k = len(ds["classes"])
    red = f" --oaa {k}" if multi else ""
    own_cache = spec.get("cache") is None
    cache = os.path.join(work, "train.vw.cache") if own_cache else spec["cache"]
    lam = vw_lambda(spec["C"], ds["n_rows"])
    holdout = bool(spec.get("holdout"))
    out.extra.update(bits=bits, l2=lam, cache=cache, holdout=holdout)
    if own_cache:       # text → binary cache, not timed
        out.extra["prep_seconds"] = vw_cache(ds["vw_train"], cache, bits, red)
    data = f"-d {ds['vw_train']} " if ds.get("vw_train") else ""   # else the cache alone
    out.ready()
    passes = list(spec["passes"])
    for i, P in enumerate(passes):
        model = os.path.join(work, f"model.{P}.vw")
        readable = os.path.join(work, f"model.{P}.txt")
        args = (f"{data}--cache_file {cache} --passes {P}"
                f"{'' if holdout else ' --holdout_off'} --loss_function hinge --l2 {lam!r} "
                f"-b {bits} {'' if holdout else '--quiet '}-f {model}{red}"
                + ("" if multi else f" --readable_model {readable}"))

        def fit(args=args):
            w = vowpalwabbit.Workspace(args, enable_logging=holdout)
            w.finish()
            return "".join(w.get_log()) if holdout else ""
        log, times = timed(fit, spec["repeat"], spec["repeat_under"])
        used = vw_passes_used(log) if holdout else P
        role = "headline" if i == len(passes) - 1 else "curve"
        if multi:
            acc = {"train_accuracy": _vw_accuracy(vowpalwabbit, model, ds["vw_train"], work),
                   "test_accuracy": (_vw_accuracy(vowpalwabbit, model, ds["vw_test"], work)
                                     if ds.get("vw_test") else None)}
            out.add(role, f"--passes {P}", {"passes": P}, times, used, "exact", **acc)
        else:
            with open(readable) as f:
                W, b = parse_vw_readable_model(f.read(), ds["n_features"], bits)
            out.add(role, f"--passes {P}", {"passes": P}, times, used, "exact", W, b)
        for f in (model, readable):
            if os.path.exists(f):
                os.remove(f)
    if own_cache:
        os.remove(cache)      # as large as the data: do not leave it in the results tree
    return "ok", None


def _vw_accuracy(vowpalwabbit, model, data, work):
    pred = os.path.join(work, "pred.txt")
    w = vowpalwabbit.Workspace(f"-t -i {model} -d {data} -p {pred} --quiet")
    w.finish()
    with open(pred) as f:
        p = np.array([float(line.split()[0]) for line in f if line.strip()])
    with open(data) as f:
        t = np.array([float(line.split("|", 1)[0]) for line in f if line.strip()])
    return float(np.mean(p == t))


#: Worker function of each peer ``kind``: ``f(spec, out) -> (status, message)``, ``out`` the
#: worker's collector of steps and weights (:class:`tools.bench.worker._Out`).
PEER_FUNCS = {"liblinear": m_liblinear, "linearsvc": m_linearsvc, "sgd": m_sgd, "vw": m_vw}
