"""The solver suite's runs: which methods run on a problem (:func:`plan_methods`), one run
of one method in its worker process and its grading (:func:`run_method`), streamsvm's CLI run
(whole-process seconds, peak RSS), and the best objective, the gaps and the headline fields of
a group of runs (:func:`finalize_groups`).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time

from ._common import LAUNCHER
from ._timed import run_child, tail
from .evaluate import best_objective, first_within, rel_gap
from .suites import IN_MEMORY_METHODS, OOC, TARGET_GAP
from .worker import solver_params, trains

__all__ = ["streamsvm_solvers", "solver_supported", "plan_methods", "select_methods",
           "run_method", "run_worker_spec", "run_cli", "finalize_groups"]


def streamsvm_solvers() -> list[str]:
    """Names of every registered streamsvm solver (the registry decides, not this file)."""
    from streamsvm.solvers import SOLVERS
    return sorted(SOLVERS)


def solver_supported(name: str, *, C: float, loss: str, tol: float, max_passes: float):
    """(True, None) if solver ``name`` accepts the common parameters, else (False, why)."""
    from streamsvm.exceptions import InvalidParameterError
    from streamsvm.solvers import SOLVERS
    try:
        SOLVERS[name](**solver_params(name, C=C, loss=loss, tol=tol, max_passes=max_passes))
    except (InvalidParameterError, TypeError) as exc:
        return False, f"{type(exc).__name__}: {exc}"
    return True, None


def plan_methods(task: str, loss: str, *, ooc: bool, solvers=None) -> list[dict]:
    """The methods run for one (task, loss), in table order.

    Each entry: ``id``, ``label``, ``kind`` (worker function), ``family`` and the method's
    settings. In-memory methods on an out-of-core data set are planned with ``skip``.
    """
    solvers = streamsvm_solvers() if solvers is None else solvers
    out = [{"id": f"streamsvm-{s}", "label": f"streamsvm {s}", "kind": "streamsvm",
            "family": "streamsvm", "solver": s} for s in solvers if trains(s, loss)]
    if loss == "ww":               # Weston–Watkins: no other tool here trains it (LIBLINEAR's
        return out                 # joint multiclass SVM, -s 4, is in the hinge table)
    if loss == "hinge":
        out.append({"id": "liblinear-s3", "label": "LIBLINEAR -s 3", "kind": "liblinear",
                    "family": "liblinear", "s": 3})
    else:
        out.append({"id": "liblinear-s1", "label": "LIBLINEAR -s 1", "kind": "liblinear",
                    "family": "liblinear", "s": 1})
        out.append({"id": "liblinear-s2", "label": "LIBLINEAR -s 2", "kind": "liblinear",
                    "family": "liblinear", "s": 2})
    if task == "multiclass" and loss == "hinge":
        out.append({"id": "liblinear-s4", "label": "LIBLINEAR -s 4 (Crammer–Singer)",
                    "kind": "liblinear", "family": "liblinear", "s": 4,
                    "objective": None})
    out.append({"id": "sklearn-linearsvc", "label": "sklearn LinearSVC", "kind": "linearsvc",
                "family": "sklearn"})
    if loss == "hinge":
        out.append({"id": "sklearn-sgd", "label": "sklearn SGD (partial_fit)", "kind": "sgd",
                    "family": "sklearn"})
        out.append({"id": "vw", "label": "Vowpal Wabbit", "kind": "vw", "family": "vw",
                    **({"objective": None} if task == "multiclass" else {})})
    for m in out:
        if ooc and m["kind"] in IN_MEMORY_METHODS:
            m["skip"] = "needs the whole data set in memory (out-of-core data set)"
    return out


def select_methods(methods: list[dict], patterns) -> list[dict]:
    if not patterns:
        return methods
    return [m for m in methods if any(p == m["id"] or p in m["id"] for p in patterns)]


def build_spec(m: dict, ds: dict, C: float, loss: str, cfg: dict, outdir: str) -> dict:
    ooc = ds.get("ooc", False)
    spec = {"kind": m["kind"], "method": m["id"], "C": C, "loss": loss, "seed": cfg["seed"],
            "outdir": outdir, "repeat": OOC["repeat"] if ooc else cfg["repeat"],
            "repeat_under": cfg["repeat_under"],
            "dataset": {k: ds.get(k) for k in ("name", "store", "train_text", "test_text",
                                               "vw_train", "vw_test", "n_rows", "n_features",
                                               "task", "classes", "ooc")}}
    if m["kind"] == "streamsvm":
        spec.update(solver=m["solver"], tol=cfg["tol"], max_passes=cfg["max_passes"],
                    memory=ds.get("budget", cfg["memory"]), readers=cfg.get("readers"),
                    curve="callback" if ooc else "rerun",
                    reference_tol=None if ooc else cfg["reference_tol"])
    elif m["kind"] == "liblinear":
        s = m["s"]
        if s == 4:
            spec.update(s=4, eps=[0.1], default_eps=0.1)
        else:
            ladder = cfg["eps_primal"] if s == 2 else cfg["eps_dual"]
            spec.update(s=s, eps=ladder, default_eps=0.01 if s == 2 else 0.1,
                        ladder_budget=cfg["ladder_budget"])
    elif m["kind"] == "linearsvc":
        spec.update(tol=1e-4, max_iter=1000)
    elif m["kind"] == "sgd":
        spec.update(epochs=OOC["sgd_epochs"] if ooc else cfg["sgd_epochs"])
    elif m["kind"] == "vw":
        spec.update(passes=OOC["vw_passes"] if ooc else cfg["vw_passes"],
                    workdir=os.path.join(outdir, "vw"))
    return spec


def run_method(m: dict, ds: dict, C: float, loss: str, cfg: dict, evaluator) -> dict:
    """Spawn the worker for one method, grade its weights, return the run record."""
    outdir = os.path.join(cfg["out"], "runs", ds["name"], f"C{C:g}", loss, m["id"])
    os.makedirs(outdir, exist_ok=True)
    objective_loss = m.get("objective", loss)
    run = {"dataset": ds["name"], "task": ds["task"], "C": C,
           "loss": loss if m["id"] != "liblinear-s4" else "crammer_singer",
           "objective_loss": objective_loss, "method": m["id"], "label": m["label"],
           "family": m["family"], "status": None, "message": None, "steps": [],
           "outdir": os.path.relpath(outdir, cfg["out"])}
    if m.get("skip"):
        run.update(status="skipped", message=m["skip"])
        return run
    if m["kind"] == "streamsvm":
        ok, why = solver_supported(m["solver"], C=C, loss=loss, tol=cfg["tol"],
                                   max_passes=cfg["max_passes"])
        if not ok:
            run.update(status="unsupported", message=why)
            return run
    spec = build_spec(m, ds, C, loss, cfg, outdir)
    run["spec"] = {k: v for k, v in spec.items() if k not in ("dataset", "outdir")}
    res = run_worker_spec(run, spec, outdir, timeout=cfg["timeout"], evaluator=evaluator,
                          C=C, objective_loss=objective_loss)
    if res is None:
        return run
    if m["kind"] == "streamsvm" and res["status"] == "ok" and cfg.get("cli", True):
        run["cli"] = run_cli(m["solver"], ds, C, loss, cfg, outdir)
    return run


def run_worker_spec(run: dict, spec: dict, outdir: str, *, timeout, evaluator, C: float,
                    objective_loss, cgroup: str | None = None) -> dict | None:
    """Run the worker on ``spec`` (written to ``outdir/spec.json``) in a child process (in
    the memory cgroup ``cgroup`` if one is given), then grade the weights of its steps with
    ``evaluator`` on ``objective_loss``. Fills ``run`` (``child``, ``status``, ``message``,
    ``extra``, ``history``, ``steps``, ``eval_seconds``); returns the worker's result, or
    None when it wrote none (``run`` then says why: timeout or error)."""
    import numpy as np
    spec_path = os.path.join(outdir, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f, indent=1)
    for name in ("result.json", "weights.npz"):
        if os.path.exists(os.path.join(outdir, name)):
            os.remove(os.path.join(outdir, name))
    child = run_child([sys.executable, LAUNCHER, "worker", spec_path],
                      timeout=timeout, stdout_path=os.path.join(outdir, "stdout.txt"),
                      stderr_path=os.path.join(outdir, "stderr.txt"), cgroup=cgroup)
    run["child"] = child
    res_path = os.path.join(outdir, "result.json")
    if not os.path.exists(res_path):
        run.update(status="timeout" if child["timed_out"] else "error",
                   message=("killed after %.0f s" % timeout) if child["timed_out"]
                   else tail(os.path.join(outdir, "stderr.txt"), 800))
        return None
    with open(res_path) as f:
        res = json.load(f)
    run.update(status=res["status"], message=res["message"], extra=res.get("extra", {}))
    history = run["extra"].pop("history", None)
    if history is not None:
        run["history"] = history
    child["vm_hwm_mb"] = res.get("vm_hwm_mb")
    if res.get("t_ready") and child.get("t_spawn"):
        child["startup_s"] = res["t_ready"] - child["t_spawn"]
    steps = res["steps"]
    weights = []
    if steps and any(s.get("weights") for s in steps):
        with np.load(os.path.join(outdir, "weights.npz")) as z:
            for s in steps:
                if s.get("weights"):
                    weights.append((s, (z[s["weights"] + ".W"], z[s["weights"] + ".b"])))
    if weights:
        t0 = time.perf_counter()
        graded = evaluator.evaluate([w for _, w in weights], C, objective_loss)
        run["eval_seconds"] = time.perf_counter() - t0
        for (s, _), g in zip(weights, graded):
            s.update({k: v for k, v in g.items() if not (k == "primal" and v is None)})
    run["steps"] = steps
    return res


def run_cli(solver: str, ds: dict, C: float, loss: str, cfg: dict, outdir: str) -> dict:
    """The user's path: ``streamsvm train`` in a fresh process (whole-process time, peak RSS),
    on the problem the worker trains (:func:`tools.bench.worker.solver_params`), in the
    memory cgroup ``cfg["cgroup"]`` when there is one."""
    model = os.path.join(outdir, "cli-model.json")
    argv = [sys.executable, "-m", "streamsvm.cli", "train", ds["store"], "-o", model, "--json",
            "-q", "--solver", solver, "-C", repr(C), "--tol", repr(cfg["tol"]),
            "--max-passes", repr(cfg["max_passes"]),
            "--memory", str(ds.get("budget", cfg["memory"])), "--seed", str(cfg["seed"])]
    params = solver_params(solver, C=C, loss=loss, tol=cfg["tol"], max_passes=cfg["max_passes"])
    if "loss" in params:
        argv += ["--loss", loss]
    if "gap_decay" in params:
        argv += ["--gap-decay", repr(params["gap_decay"])]
    argv += ["--bias", repr(params["bias"])]        # the worker's problem: a regularized bias
    if params.get("free_bias") is False:
        argv += ["--no-free-bias"]
    if cfg.get("readers"):
        argv += ["--readers", str(cfg["readers"])]
    child = run_child(argv, timeout=cfg["timeout"], stdout_path=os.path.join(outdir, "cli.out"),
                      stderr_path=os.path.join(outdir, "cli.err"), cgroup=cfg.get("cgroup"))
    out = {"argv": " ".join(shlex.quote(a) for a in argv[1:]), **child}
    try:
        with open(os.path.join(outdir, "cli.out")) as f:
            lines = [ln for ln in f.read().splitlines() if ln.startswith("{")]
        out["summary"] = json.loads(lines[-1])
    except (OSError, IndexError, ValueError):
        out["error"] = tail(os.path.join(outdir, "cli.err"), 800)
    if os.path.exists(model):
        os.remove(model)
    return out


def group_key(run: dict) -> tuple:
    return (run["dataset"], float(run["C"]), run["loss"])


def _headline_index(run: dict):
    steps = run.get("steps") or []
    for i, s in enumerate(steps):
        if s.get("role") == "headline":
            return i
    for i, s in enumerate(steps):
        if s.get("default"):
            return i
    return 0 if steps else None


def finalize_groups(runs: list[dict], target: float = TARGET_GAP) -> dict:
    """Best objective per (data set, C, loss); gaps of every step; headline fields of every run.

    Returns ``{"dataset|C|loss": {"best_primal", "best_by", "best_dual", "best_dual_by",
    "certified_gap"}}`` where ``certified_gap = (best_primal − best_dual) / best_primal`` bounds
    how far the best objective found can be from the true optimum (the dual of a streamsvm run
    is a lower bound).
    """
    groups: dict[tuple, list] = {}
    for r in runs:
        groups.setdefault(group_key(r), []).append(r)
    best = {}
    for key, rs in groups.items():
        cands, duals = [], []
        for r in rs:
            for s in r.get("steps", []):
                if s.get("primal") is not None and r.get("objective_loss") is not None:
                    cands.append((s["primal"], f"{r['method']} {s.get('label', '')}".strip()))
                if s.get("solver_dual") is not None:
                    duals.append((s["solver_dual"], f"{r['method']} {s.get('label', '')}".strip()))
        p = best_objective([c[0] for c in cands])
        entry = {"best_primal": p, "best_by": None, "best_dual": None, "best_dual_by": None,
                 "certified_gap": None}
        if p is not None:
            entry["best_by"] = next(c[1] for c in cands if c[0] == p)
        if duals:
            dmax = max(duals)
            entry["best_dual"], entry["best_dual_by"] = dmax
            if p:
                entry["certified_gap"] = (p - dmax[0]) / abs(p)
        best["|".join(map(str, key))] = entry
        for r in rs:
            for s in r.get("steps", []):
                s["rel_gap"] = rel_gap(s.get("primal"), p)
            _headline(r, target)
    return best


def _headline(run: dict, target: float) -> None:
    i = _headline_index(run)
    run["headline"] = i
    run["target_gap"] = target
    fields = ("fit_seconds", "passes", "passes_kind", "primal", "rel_gap", "train_accuracy",
              "test_accuracy", "converged", "certificate")
    if i is None:
        for k in fields + ("process_seconds", "process_kind", "peak_rss_mb"):
            run.setdefault(k, None)
        return
    s = run["steps"][i]
    for k in fields:
        run[k] = s.get(k)
    child = run.get("child") or {}
    cli = run.get("cli") or {}
    if cli.get("summary") and cli.get("rc") == 0:
        run["process_seconds"], run["process_kind"] = cli["wall_s"], "measured (CLI)"
        src = cli
    else:
        st, fit = child.get("startup_s"), s.get("fit_seconds")
        run["process_seconds"] = st + fit if st is not None and fit is not None else None
        run["process_kind"] = "start-up + load + fit"
        src = child
    for k in ("peak_rss_mb", "peak_rss_anon_mb", "peak_rss_file_mb"):
        run[k] = src.get(k)
    ladder = [x for x in run["steps"] if x.get("role") == "ladder"]
    if ladder and run.get("objective_loss") is not None:
        hit = first_within(ladder, target)
        run["to_target"] = None if hit is None else {
            k: hit.get(k) for k in ("label", "param", "fit_seconds", "passes", "passes_kind",
                                    "primal", "rel_gap", "train_accuracy", "test_accuracy")}
        if hit is not None and child.get("startup_s") is not None:
            run["to_target"]["process_seconds"] = child["startup_s"] + hit["fit_seconds"]
