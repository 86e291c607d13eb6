"""The worker of the solver suite: trains one method on one data set in a fresh process
(``tools/bench.py worker SPEC``, started by :func:`tools.bench.suite_runs.run_method`).

Each method runs in its own child process so that its peak RSS and start-up cost are its own.
The worker loads the data the way that method's users do, times only the fitting calls
(:func:`tools.bench._timed.timed`: ``time.perf_counter`` around them), and writes

* ``result.json``: status, timestamps (``t_start``: the worker's first line, ``t_ready``: data
  loaded, just before the first timed fit), and one entry per *step* (a fit, or a point of a
  curve: ``max_passes`` re-runs, LIBLINEAR ``-e`` ladder, SGD epochs, VW ``--passes``);
* ``weights.npz``: the weights ``W`` (k, d) and intercepts ``b`` (k,) of every step, named by
  the step's ``weights`` key. The parent evaluates them all with one objective
  (:mod:`tools.bench.evaluate`), so no method grades itself.

streamsvm's solvers are here; the other methods in :mod:`tools.bench.peers`. Conventions
shared by every method: bias = 1 as a regularized constant feature (LIBLINEAR ``-B 1``),
labels encoded as in the store (binary ±1 with the larger original label positive;
multiclass a class index into the sorted original labels).
"""

from __future__ import annotations

import json
import os
import time
import traceback
import warnings

import numpy as np

from ._timed import timed
from .peers import PEER_FUNCS

__all__ = ["run_worker", "METHOD_FUNCS", "solver_params", "trains"]


class _Out:
    """Collects steps and weights of one worker run."""

    def __init__(self, spec):
        self.spec = spec
        self.steps = []
        self.arrays = {}
        self.extra = {}
        self.t_ready = None

    def ready(self):
        if self.t_ready is None:
            self.t_ready = time.time()

    def add(self, role, label, param, fit_seconds, passes=None, passes_kind=None, W=None, b=None,
            **info):
        key = None
        if W is not None:
            key = f"s{len(self.steps)}"
            self.arrays[key + ".W"] = np.asarray(W, dtype=np.float64)
            self.arrays[key + ".b"] = np.asarray(b, dtype=np.float64)
        fs = list(fit_seconds) if isinstance(fit_seconds, (list, tuple)) else [fit_seconds]
        step = {"role": role, "label": label, "param": param, "fit_seconds_all": fs,
                # the fastest of the repeats: noise on a shared VM only ever adds time
                "fit_seconds": float(np.min(fs)) if fs and fs[0] is not None else None,
                "passes": None if passes is None else float(passes), "passes_kind": passes_kind,
                "weights": key}
        step.update(info)
        self.steps.append(step)
        return step


# streamsvm ----------------------------------------------------------------------------------

def m_streamsvm(spec, out: _Out):
    from streamsvm import InMemoryStore, open_store
    from streamsvm._train import train
    from streamsvm.exceptions import ConvergenceWarning, InvalidParameterError
    warnings.simplefilter("ignore", ConvergenceWarning)
    ds = spec["dataset"]
    store = open_store(ds["store"])
    solver = spec["solver"]
    params = solver_params(solver, C=spec["C"], loss=spec["loss"], tol=spec["tol"],
                           max_passes=spec["max_passes"])
    common = dict(solver=solver, memory=spec["memory"], seed=spec["seed"],
                  readers=spec.get("readers"))
    # warm-up on a few rows (loads numba's on-disk cache of every kernel: not solver time)
    t0 = time.perf_counter()
    part = store.read_rows(0, min(store.n_rows, 2000))
    import scipy.sparse as sp
    Xw = sp.csr_matrix((part.data, part.indices, part.indptr),
                       shape=(part.n_rows, store.n_features))
    try:
        train(InMemoryStore(Xw, part.y, chunk_rows=500, dtype=store.dtype,
                            task=store.task if len(np.unique(part.y)) > 2 else "auto"),
              **common, **dict(params, max_passes=3, tol=0.5))
    except InvalidParameterError as exc:
        out.extra["unsupported"] = str(exc)
        return "unsupported", str(exc)
    except Exception as exc:  # the warm-up data may not suit the solver; the real run decides
        out.extra["warmup_error"] = f"{type(exc).__name__}: {exc}"
    out.extra["warmup_seconds"] = time.perf_counter() - t0
    history = []

    def callback(entry):
        history.append({k: (v.item() if hasattr(v, "item") else v) for k, v in entry.items()})

    def fit():
        history.clear()
        return train(store, callback=callback, **common, **params)

    out.ready()
    try:
        (model, res), times = timed(fit, spec["repeat"], spec["repeat_under"])
    except InvalidParameterError as exc:
        return "unsupported", str(exc)
    out.extra["history"] = list(history)
    out.add("headline", f"tol={spec['tol']:g}", {"tol": spec["tol"]}, times, res.passes, "exact",
            model.coef, model.intercept, n_iter=int(res.n_iter), converged=bool(res.converged),
            certificate=float(res.stop_value), solver_primal=float(res.primal),
            solver_dual=float(res.dual))
    if spec.get("curve") == "rerun":
        mp = 1.0
        while mp < res.passes and mp <= spec["max_passes"]:
            t0 = time.perf_counter()
            m2, r2 = train(store, **common, **dict(params, max_passes=mp))
            dt = time.perf_counter() - t0
            out.add("curve", f"max_passes={mp:g}", {"max_passes": mp}, dt, r2.passes, "exact",
                    m2.coef, m2.intercept, certificate=float(r2.stop_value),
                    converged=bool(r2.converged))
            mp *= 2
    if spec.get("reference_tol"):
        t0 = time.perf_counter()
        m3, r3 = train(store, **common, **dict(params, tol=spec["reference_tol"],
                                               max_passes=spec.get("reference_max_passes", 2000)))
        out.add("reference", f"tol={spec['reference_tol']:g}", {"tol": spec["reference_tol"]},
                time.perf_counter() - t0, r3.passes, "exact", m3.coef, m3.intercept,
                certificate=float(r3.stop_value), solver_dual=float(r3.dual),
                solver_primal=float(r3.primal), converged=bool(r3.converged))
    return "ok", None


METHOD_FUNCS = {"streamsvm": m_streamsvm, **PEER_FUNCS}


def run_worker(spec_path: str) -> int:
    """Entry point of ``tools/bench.py worker SPEC``: run, then write result.json and
    weights.npz."""
    t_start = time.time()
    with open(spec_path) as f:
        spec = json.load(f)
    out = _Out(spec)
    try:
        status, message = METHOD_FUNCS[spec["kind"]](spec, out)
    except Exception as exc:  # noqa: BLE001  (reported, not raised: the parent goes on)
        status, message = "error", f"{type(exc).__name__}: {exc}"
        out.extra["traceback"] = traceback.format_exc()[-4000:]
    outdir = spec["outdir"]
    if out.arrays:
        np.savez(os.path.join(outdir, "weights.npz"), **out.arrays)
    result = {"status": status, "message": message, "t_start": t_start, "t_ready": out.t_ready,
              "t_end": time.time(), "vm_hwm_mb": _vm_hwm_mb(), "steps": out.steps,
              "extra": out.extra}
    with open(os.path.join(outdir, "result.json"), "w") as f:
        json.dump(result, f, default=_json_default)
    return 0 if status != "error" else 1


def _vm_hwm_mb():
    """This process's peak RSS from /proc (a cross-check of the parent's rusage)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return None


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def _param_table(name: str) -> dict:
    from streamsvm.solvers import SOLVERS
    cls = SOLVERS[name]
    return cls.param_table() if hasattr(cls, "param_table") else {"loss": None}


def trains(name: str, loss: str) -> bool:
    """Whether solver ``name`` trains problems of this loss at all: one-vs-rest losses (it
    declares ``loss``), or the Weston–Watkins problem ``"ww"`` (it does not)."""
    return ("loss" in _param_table(name)) != (loss == "ww")


def solver_params(name: str, *, C: float, loss: str, tol: float, max_passes: float) -> dict:
    """The parameters a streamsvm solver gets for one (C, loss) problem of the benchmark.
    ``loss="ww"`` is the Weston–Watkins problem (solver ``ww``, with its gap-decay stop off
    so that ``tol`` alone decides, as for every other solver)."""
    from streamsvm.exceptions import InvalidParameterError
    table = _param_table(name)
    has_loss = "loss" in table
    if not trains(name, loss):
        raise InvalidParameterError(f"{name} does not train the {loss!r} problem")
    params = dict(C=C, tol=tol, max_passes=max_passes, bias=1.0)
    if has_loss:
        params["loss"] = loss
    if "gap_decay" in table:
        params["gap_decay"] = 0.0
    if "free_bias" in table:        # the benchmark's problem: the bias a regularized feature
        params["free_bias"] = False
    return params
