"""The child process of ``tools/bench.py matrix``: every cell of one data set, every solver.

    python tools/bench/matrix_worker.py JOB.json

``JOB.json`` names the store, its streamed budget (or none), the solvers, the values of C,
the losses, the modes, the tolerance and the time limits. One JSON line per run goes to
standard output (the parent keeps them as they come, so a data set cut short keeps its runs).

Each solver first trains one untimed pass per loss and mode (numba's cache loaded or compiled;
for ``auto``, each solver it may choose);
then, per cell (loss, C, mode), the solvers in the given order, each timed around ``train``
alone, to the certified ``tol`` or until its deadline: ``--cap`` seconds, or ``--factor``
times the cell's fastest certified run so far (but at least ``--floor`` seconds), whichever
comes first; ``train``'s ``should_stop`` ends a run at its deadline (status ``timeout``, its
seconds then a lower bound). Only the ``streamsvm`` package is imported: the worker runs
from any checkout (``PYTHONPATH``).
"""

from __future__ import annotations

import json
import sys
import time
import warnings


def _one(store, solver, memory, kw, deadline):
    from streamsvm._train import train
    from streamsvm.exceptions import StreamSVMError
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, res = train(store, solver=solver, memory=memory, resume=False,
                               should_stop=lambda: time.perf_counter() > deadline, **kw)
    except KeyboardInterrupt:
        return {"status": "timeout", "seconds": time.perf_counter() - t0}
    except StreamSVMError as exc:
        return {"status": "unsupported", "message": str(exc).splitlines()[0][:300]}
    secs = time.perf_counter() - t0
    out = {"status": "ok" if res.converged else "not certified", "seconds": secs,
           "passes": float(res.passes), "gap": float(res.stop_value),
           "primal": float(res.primal), "dual": float(res.dual)}
    if solver == "auto":
        out["chosen"] = model.params["solver"]
        out["chosen_because"] = model.summary.get("chosen_because")
    return out


def main(job_path: str) -> int:
    with open(job_path) as f:
        job = json.load(f)
    store = job["store"]
    modes = {"ram": job["ram_memory"], "streamed": job["streamed_memory"]}
    modes = {m: modes[m] for m in job["modes"] if modes[m]}
    from streamsvm._auto import CHOICES
    warm = [s for solver in job["solvers"] for s in (CHOICES if solver == "auto" else [solver])]
    for solver in dict.fromkeys(warm):     # numba's cache, per solver, loss and mode (auto:
        for memory in modes.values():      # every solver it may choose)
            for loss in job["losses"]:
                _one(store, solver, memory, dict(loss=loss, C=1.0, max_passes=1), 1e18)
    for loss in job["losses"]:
        for C in job["Cs"]:
            for mode, memory in modes.items():
                best = None
                for solver in job["solvers"]:
                    limit = job["cap"] if best is None else \
                        min(job["cap"], max(job["floor"], job["factor"] * best))
                    kw = dict(loss=loss, C=C, tol=job["tol"], max_passes=job["max_passes"])
                    r = _one(store, solver, memory, kw, time.perf_counter() + limit)
                    r.update(data=job["name"], loss=loss, C=C, mode=mode, memory=memory,
                             solver=solver, limit=limit)
                    if r["status"] == "ok" and (best is None or r["seconds"] < best):
                        best = r["seconds"]
                    print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
