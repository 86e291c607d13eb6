"""The one driver every solver runs under (DESIGN.md §5).

:func:`run` owns what no solver should write again: the loop over outer iterations, the
stopping rule on the certificate (an exact certificate at most ``tol``), ``max_passes``
with a ``ConvergenceWarning`` (and one exact check when the last certificate was an
estimate, so what is reported is never an estimate), checkpoints every N passes or T
seconds and on a stop request (SIGINT/SIGTERM in the CLI), resume, the progress bar, one
log line per iteration and the history, one entry per outer iteration with the keys of
:data:`HISTORY_KEYS`:

``iteration``
    1, 2, ... (the driver's count of outer iterations)
``kind``
    what the iteration swept: ``"stream"`` (the store), ``"disk"`` (resident rows on scratch
    disk), ``"slab"`` (resident rows in RAM), ``"check"`` (a read-only pass for an exact
    certificate), or a solver's own word
``passes``, ``seconds``
    rows visited / n_rows, and wall seconds since the start, at the end of the iteration
``primal``, ``dual``, ``gap``, ``exact``
    the objectives, the certificate (named by ``Solver.certificate``) and whether it is
    exact or an estimate
``active``
    rows (or features) the solver still works on
``mb_read``, ``kernel_seconds``, ``wait_seconds``
    decoded MB read, seconds inside kernels and seconds waiting for data, in the iteration
``disk_mb``, ``disk_mb_s``
    MB read from the store's files as stored (compressed: what the disk or the network
    delivered; 0 on a dask cluster, whose workers read), and that over the iteration's
    wall seconds

plus the solver's own numbers named in ``Solver.history_extras`` (floats, checkpointed too).
"""

from __future__ import annotations

import contextlib
import logging
import reprlib
import time
import warnings

import numpy as np

from ..exceptions import CheckpointError, ConvergenceWarning, WorkerLostError
from ._base import SolveResult

__all__ = ["run", "HISTORY_KEYS", "iteration_seconds"]

log = logging.getLogger(__name__)

HISTORY_KEYS = ("iteration", "kind", "passes", "seconds", "primal", "dual", "gap", "exact",
                "active", "mb_read", "kernel_seconds", "wait_seconds", "disk_mb", "disk_mb_s")
_FLOAT_KEYS = ("passes", "seconds", "primal", "dual", "gap", "mb_read", "kernel_seconds",
               "wait_seconds", "disk_mb", "disk_mb_s")
_ADDED_KEYS = ("disk_mb", "disk_mb_s")     # absent from older checkpoints: read as 0
_CHECKPOINT_VERSION = 1
_SNAPSHOT_EVERY = 10        # on a dask cluster: snapshot the run (per-row state gathered
                            # from the workers) every 10 iterations, to resume from when a
                            # worker is lost


class _Run:
    """The driver's own resumable state."""

    def __init__(self):
        self.history: list[dict] = []
        self.done = self.converged = False
        self.saved_passes = 0.0          # sched.passes at the last checkpoint
        self.saved_time = time.monotonic()
        self.seconds0 = 0.0              # wall seconds of the runs before a resume


def run(solver, sched, *, state=None, callback=None, checkpoint=None, every_passes=0.0,
        every_seconds=0.0, should_stop=None, progress=False) -> SolveResult:
    """Run ``solver`` on ``sched`` until its certificate reaches ``solver.tol`` or
    ``solver.max_passes`` (module doc).

    Parameters
    ----------
    solver : Solver
    sched : PassScheduler
    state : tuple (arrays, meta), optional
        A checkpoint to continue (from ``CheckpointManager.load_latest``).
    callback : callable, optional
        Called with each history entry.
    checkpoint : callable, optional
        ``checkpoint(arrays, meta)`` saves a snapshot.
    every_passes, every_seconds : float
        Save a snapshot each time this many more passes over the data, or seconds, are
        done (0: only at the end and when stopped).
    should_stop : callable, optional
        Polled after every iteration; when it returns True a snapshot is saved and
        ``KeyboardInterrupt`` raised.
    progress : bool
        Show a progress bar over the passes (to ``max_passes``).
    """
    solver.start(sched)
    r = _Run()
    if state is not None:
        _restore(solver, sched, r, *state)
    t0 = time.perf_counter() - r.seconds0
    bar = _Bar(solver, sched) if progress else None
    checked, extra = "", 0.0              # said in the ConvergenceWarning
    remote = sched.remote
    snapshot = _snapshot(solver, sched, r, t0) if remote else None
    try:
        while not r.done:                 # a checkpoint of a finished run resumes as finished
            try:
                _iterate(solver, sched, r, solver.step, t0, callback, bar)
                if not r.done and sched.passes >= solver.max_passes:
                    r.done = True
                    # an estimate, or an exact certificate of an older iterate than the newest
                    if not r.history[-1]["exact"] or solver.stale:
                        before = sched.passes
                        _iterate(solver, sched, r, solver.final_check, t0, callback, bar)
                        extra = sched.passes - before
                        checked = (f" (+{extra:g} certifying pass{'' if extra == 1 else 'es'}: "
                                   f"an exact check of the newest weights)")
                if remote and not r.done and len(r.history) % _SNAPSHOT_EVERY == 0:
                    snapshot = _snapshot(solver, sched, r, t0)
            except WorkerLostError as exc:
                if snapshot is None:
                    raise
                _recover(solver, sched, r, snapshot, exc)
                continue
            if r.done:
                break
            due = (every_passes and sched.passes - r.saved_passes >= every_passes) or \
                (every_seconds and time.monotonic() - r.saved_time >= every_seconds)
            if checkpoint is not None and due:
                _save(solver, sched, r, t0, checkpoint)
            if should_stop is not None and should_stop():
                if checkpoint is not None:
                    _save(solver, sched, r, t0, checkpoint)
                raise KeyboardInterrupt("training interrupted; checkpoint saved")
        if checkpoint is not None:
            _save(solver, sched, r, t0, checkpoint)
    finally:
        if bar is not None:
            bar.close()
    last = r.history[-1] if r.history else {"gap": float("inf"), "primal": np.nan,
                                             "dual": np.nan}
    coef, intercept = solver.coef()
    n_iter = solver.n_iter if solver.n_iter >= 0 else len(r.history)
    if not r.converged:
        warnings.warn(f"{solver.name} reached max_passes={solver.max_passes:g} after "
                      f"{sched.passes - extra:g} passes{checked} with {solver.certificate} "
                      f"{last['gap']:.3g} > tol={solver.tol:g}; increase max_passes or tol.",
                      ConvergenceWarning, stacklevel=3)
    return SolveResult(coef, intercept, n_iter, sched.passes, r.converged, float(last["gap"]),
                       float(last["primal"]), float(last["dual"]), list(r.history))


def _iterate(solver, sched, r, step, t0, callback, bar) -> None:
    """One outer iteration (``step``: the solver's step or final check) into the history."""
    before = (time.perf_counter(), sched.mb_read, sched.kernel_seconds, sched.wait_seconds,
              sched.disk_mb)
    out = step(sched)
    took = time.perf_counter() - before[0]
    disk = sched.disk_mb - before[4]
    entry = {"iteration": len(r.history) + 1, "kind": out["kind"], "passes": sched.passes,
             "seconds": time.perf_counter() - t0, "primal": float(out["primal"]),
             "dual": float(out["dual"]), "gap": float(out["gap"]), "exact": bool(out["exact"]),
             "active": int(out["active"]), "mb_read": sched.mb_read - before[1],
             "kernel_seconds": sched.kernel_seconds - before[2],
             "wait_seconds": sched.wait_seconds - before[3], "disk_mb": disk,
             "disk_mb_s": disk / took if took > 0 else 0.0}
    for key in solver.history_extras:
        entry[key] = float(out[key])
    r.history.append(entry)
    # converged: the certificate at tol, or the solver's own exact rule (ww's gap decay)
    if entry["exact"] and (entry["gap"] <= solver.tol or out.get("stop", False)):
        r.done = r.converged = True
    log.info("iter %4d %-6s passes %8.2f primal %.6e dual %.6e %s %.2e%s active %d %.2fs "
             "(kernels %.2fs, waiting for data %.2fs) %.1f MB decoded, %.1f MB from storage "
             "(%.0f MB/s)", entry["iteration"],
             entry["kind"], entry["passes"], entry["primal"], entry["dual"], "gap",
             entry["gap"], "" if entry["exact"] else " (estimate)", entry["active"],
             took, entry["kernel_seconds"], entry["wait_seconds"],
             entry["mb_read"], entry["disk_mb"], entry["disk_mb_s"])
    if bar is not None:
        bar.update(entry)
    if callback is not None:
        callback(entry)


def iteration_seconds(history: list) -> list:
    """Wall seconds of each iteration (the history's ``seconds`` are cumulative)."""
    out, prev = [], 0.0
    for h in history:
        out.append(h["seconds"] - prev)
        prev = h["seconds"]
    return out


# -- checkpoints ---------------------------------------------------------------------------

def _recover(solver, sched, r, snapshot, exc) -> None:
    """A worker left: the blocks spread over the workers left and the run restored from
    ``snapshot`` (again if another one leaves meanwhile; raises when none is left)."""
    while True:
        sched.rebalance()
        log.warning("%s; resuming from the snapshot after iteration %d (pass %.2f) on the %d "
                    "workers left", exc, len(snapshot[0]["history.kind"]),
                    snapshot[1]["driver"]["saved_passes"], len(sched.workers))
        try:
            r.done = r.converged = False
            _restore(solver, sched, r, *snapshot)
            return
        except WorkerLostError as again:
            exc = again


def _snapshot(solver, sched, r, t0) -> tuple:
    """``(arrays, meta)``: everything a resume needs (a checkpoint's content), copied."""
    import copy
    arrays, meta = solver.state_dict()
    out = {f"solver.{k}": np.array(v, copy=True) for k, v in arrays.items()}
    out.update({f"state.{name}": st.to_array() for name, st in sched.states.items()})
    out.update(_history_to_arrays(r.history, solver.history_extras))
    return out, {"solver": solver.name, "version": _CHECKPOINT_VERSION,
                 "solver_meta": copy.deepcopy(meta), "sched": sched.state_dict(),
                 "driver": {"done": r.done, "converged": r.converged,
                            "saved_passes": sched.passes,
                            "seconds": time.perf_counter() - t0},
                 "kinds": sorted({h["kind"] for h in r.history})}


def _save(solver, sched, r, t0, checkpoint) -> None:
    r.saved_passes = sched.passes
    r.saved_time = time.monotonic()
    checkpoint(*_snapshot(solver, sched, r, t0))


def _restore(solver, sched, r, arrays: dict, meta: dict) -> None:
    """Continue the run a checkpoint (or snapshot) holds: every field the resume uses is
    checked first; a checkpoint whose fields have the wrong type, shape or layout for this
    run, or contradict each other, raises :class:`CheckpointError` naming the field (never
    a ``KeyError``/``TypeError``/``IndexError`` from deep inside)."""
    if not isinstance(meta, dict) or meta.get("solver") != solver.name or \
            meta.get("version") != _CHECKPOINT_VERSION:
        got = meta if isinstance(meta, dict) else {}
        raise CheckpointError(f"checkpoint is not a {solver.name} checkpoint of this version "
                              f"(solver {got.get('solver')!r}, version {got.get('version')!r})")
    d = _meta_field(meta, "driver", dict)
    for key in ("done", "converged"):
        _meta_field(d, key, bool, "driver.")
    for key in ("saved_passes", "seconds"):
        value = _meta_field(d, key, (int, float), "driver.")
        if isinstance(value, bool) or not np.isfinite(value) or value < 0:
            raise CheckpointError(f"checkpoint field driver.{key} is {value!r}, not a "
                                  f"non-negative number")
    kinds = _meta_field(meta, "kinds", list)
    if not all(isinstance(k, str) for k in kinds):
        raise CheckpointError(f"checkpoint field kinds is {kinds!r}, not a list of names")
    history = _checked_history(arrays, kinds, solver.history_extras)
    for name, st in sched.states.items():
        with _field(f"array state.{name}"):
            st.load_array(arrays["state." + name])
    with _field("sched"):
        sched.load_state_dict(_meta_field(meta, "sched", dict))
    with _field("solver_meta"):
        solver.load_state_dict({k[len("solver."):]: v for k, v in arrays.items()
                                if k.startswith("solver.")},
                               _meta_field(meta, "solver_meta", dict))
    # what the driver's own fields claim, against what the checkpoint holds besides
    if d["saved_passes"] != sched.passes:
        raise CheckpointError(f"checkpoint field driver.saved_passes is {d['saved_passes']!r} "
                              f"but its scheduler state is at pass {sched.passes!r}")
    if d["converged"] and not (d["done"] and history and history[-1]["exact"]):
        raise CheckpointError("checkpoint field driver.converged is true, but the run is not "
                              "done or its last certificate is not exact")
    if d["done"] and not d["converged"] and sched.passes < solver.max_passes:
        raise CheckpointError(f"checkpoint field driver.done is true, but the run neither "
                              f"converged nor reached max_passes={solver.max_passes:g} (it is "
                              f"at pass {sched.passes:.2f})")
    r.history = history
    r.done, r.converged = d["done"], d["converged"]
    r.saved_passes = float(d["saved_passes"])
    r.seconds0 = float(d["seconds"])


def _meta_field(meta: dict, key: str, kind, prefix: str = ""):
    """``meta[key]``, which must be present and of type ``kind``."""
    if key not in meta:
        raise CheckpointError(f"checkpoint field {prefix}{key} is missing")
    value = meta[key]
    if not isinstance(value, kind):
        raise CheckpointError(f"checkpoint field {prefix}{key} is {reprlib.repr(value)}, "
                              f"not a {kind.__name__ if isinstance(kind, type) else 'number'}")
    return value


@contextlib.contextmanager
def _field(where: str):
    """Turn what a malformed checkpoint field makes a loader raise into a CheckpointError
    naming the field (the key missing, or the error)."""
    try:
        yield
    except CheckpointError:
        raise
    except KeyError as exc:
        raise CheckpointError(f"checkpoint field {where} lacks {exc.args[0]!r}") from None
    except (TypeError, IndexError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"checkpoint field {where} does not fit this run: "
                              f"{type(exc).__name__}: {exc}") from None


def _checked_history(arrays: dict, kinds: list, extras) -> list:
    """The history columns, each present, 1-D, of one length and of its kind of dtype."""
    columns = {f"history.{k}": np.float64 for k in _FLOAT_KEYS + tuple(extras)}
    columns.update({"history.active": np.int64, "history.exact": np.bool_,
                    "history.kind": np.int32})            # as _history_to_arrays writes them
    n = None
    arrays = dict(arrays)
    n_rows = len(arrays.get("history.kind", ()))
    for key in _ADDED_KEYS:
        arrays.setdefault(f"history.{key}", np.zeros(n_rows))
    for name, dtype in columns.items():
        a = arrays.get(name)
        if a is None:
            raise CheckpointError(f"checkpoint array {name} is missing")
        if a.ndim != 1 or a.dtype != dtype or (n is not None and len(a) != n):
            raise CheckpointError(f"checkpoint array {name} has shape {a.shape} and dtype "
                                  f"{a.dtype}; expected one {np.dtype(dtype)} per iteration "
                                  f"({n if n is not None else 'as the others'})")
        n = len(a)
    k = arrays["history.kind"]
    if n and (k.min() < 0 or k.max() >= len(kinds)):
        raise CheckpointError(f"checkpoint array history.kind holds {int(k.max())}, outside "
                              f"the {len(kinds)} kinds recorded")
    return _history_from_arrays(arrays, kinds, extras)


def _history_to_arrays(history: list, extras=()) -> dict:
    """The history as numeric columns (cheap to checkpoint every pass)."""
    kinds = sorted({h["kind"] for h in history})
    out = {f"history.{k}": np.array([h[k] for h in history], dtype=np.float64)
           for k in _FLOAT_KEYS + tuple(extras)}
    out["history.active"] = np.array([h["active"] for h in history], dtype=np.int64)
    out["history.exact"] = np.array([h["exact"] for h in history], dtype=bool)
    out["history.kind"] = np.array([kinds.index(h["kind"]) for h in history], dtype=np.int32)
    return out


def _history_from_arrays(arrays: dict, kinds: list, extras=()) -> list:
    n = len(arrays["history.kind"])
    rows = []
    for j in range(n):
        h = {"iteration": j + 1, "kind": kinds[int(arrays["history.kind"][j])]}
        for k in _FLOAT_KEYS + tuple(extras):
            h[k] = float(arrays[f"history.{k}"][j])
        h["exact"] = bool(arrays["history.exact"][j])
        h["active"] = int(arrays["history.active"][j])
        rows.append({k: h[k] for k in HISTORY_KEYS + tuple(extras)})
    return rows


# -- progress ------------------------------------------------------------------------------

class _Bar:
    """Progress over the passes, with the certificate, objectives and throughput: a bar on
    a terminal, plain lines elsewhere (``_progress.py``)."""

    def __init__(self, solver, sched):
        from .._progress import progress_bar
        self.sched, self.max = sched, float(solver.max_passes)
        self.bar = progress_bar(total=self.max, unit="pass", desc=solver.name, cap=True,
                                bar_format="{desc}: {n:.2f}/{total:g} passes "
                                           "[{elapsed}<{remaining}] {postfix}")
        self.last = (time.perf_counter(), sched.passes, sched.mb_read)

    def update(self, entry: dict) -> None:
        now = time.perf_counter()
        t, passes, mb = self.last
        if now - t < 0.5 and not entry["exact"]:
            return
        dt = max(now - t, 1e-9)
        rate = (entry["passes"] - passes) * self.sched.n_rows / dt
        self.last = (now, entry["passes"], self.sched.mb_read)
        gap = f"gap {entry['gap']:.2e}" if entry["exact"] else f"gap~{entry['gap']:.2e}"
        self.bar.set_postfix_str(f"{gap} primal {entry['primal']:.6g} dual {entry['dual']:.6g} "
                                 f"active {entry['active']:,} {rate:,.0f} rows/s "
                                 f"{(self.sched.mb_read - mb) / dt:.0f} MB/s", refresh=False)
        self.bar.update(min(entry["passes"], self.max) - self.bar.n)

    def close(self) -> None:
        from .._progress import LogLines
        # a bar stops at its end; a summary line says every pass (a final check goes past)
        cap = np.inf if isinstance(self.bar, LogLines) else self.max
        self.bar.n = min(self.sched.passes, cap)
        self.bar.close()
