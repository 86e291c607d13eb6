"""``streamsvm info MODEL``: what a model is, what it weighs on, and how it was trained."""

from __future__ import annotations

import numpy as np

__all__ = ["model_info", "model_info_text"]

TOP = 10                # the largest weights listed


def model_info(model, path: str, top: int = TOP) -> dict:
    """The description of ``model`` (read from ``path``) as a JSON-ready dict: task,
    classes, features, the non-zero weights, the ``top`` largest by magnitude (feature ids
    as in the libsvm file, 1-based), the bias, and the training summary when the model
    records one (a LIBLINEAR model records only its solver type)."""
    coef = model.coef
    nz = np.count_nonzero(coef, axis=1)
    flat = np.abs(coef).ravel()
    order = np.argsort(-flat, kind="stable")[:min(top, np.count_nonzero(flat))]
    names = _row_names(model)
    largest = [{"feature": int(j % coef.shape[1]) + 1, "model": names[j // coef.shape[1]],
                "weight": float(coef.flat[j])} for j in order]
    info = {"model": path, "task": model.task, "classes": [_label(c) for c in model.user_classes],
            "n_features": model.n_features, "n_models": int(coef.shape[0]),
            "nonzero_weights": int(nz.sum()), "nonzero_per_model": dict(zip(names, map(int, nz))),
            "intercept": [float(v) for v in model.intercept], "largest_weights": largest}
    info["training"] = _training(model)
    return info


def _training(model) -> dict | None:
    s, p = model.summary or {}, dict(model.params or {})
    if "passes" not in s:               # a LIBLINEAR model: its solver type only
        return {"solver": p.pop("solver", None) or "LIBLINEAR", "params": p} if p else None
    history = s.get("history") or []
    out = {"solver": p.pop("solver", None), "params": p}
    for key in ("chosen_because", "passes", "n_iter", "primal", "dual", "gap", "converged",
                "n_rows", "store"):
        if key in s:
            out[key] = s[key]
    out["gap_exact"] = bool(history and history[-1].get("exact"))
    tol = p.get("tol")
    # certified: an exact gap within the tolerance (ww may also stop on its gap-decay rule)
    out["certified"] = bool(out["gap_exact"] and tol is not None and s.get("gap") is not None
                            and s["gap"] <= tol)
    return out


def _row_names(model) -> list[str]:
    if model.task == "binary":
        return [f"{_label(model.user_classes[1])} vs {_label(model.user_classes[0])}"]
    if (model.problem or {}).get("layout") == "joint":     # ww: one vector per class
        return [f"class {_label(c)}" for c in model.user_classes]
    return [f"{_label(c)} vs rest" for c in model.user_classes]


def _label(c) -> int | float | str | bool:
    if isinstance(c, (str, np.str_, bool, np.bool_)):
        return c.item() if isinstance(c, np.generic) else c
    c = float(c)
    return int(c) if c.is_integer() else c


def model_info_text(info: dict) -> str:
    """``info`` as the CLI prints it (aligned ``name  value`` lines)."""
    lines = [("model", info["model"]), ("task", info["task"]),
             ("classes", ", ".join(map(str, info["classes"]))),
             ("features", f"{info['n_features']:,}"),
             ("non-zeros", f"{info['nonzero_weights']:,} of "
                           f"{info['n_features'] * info['n_models']:,} weights" +
              ("" if info["n_models"] == 1 else " (" + ", ".join(
                  f"{k}: {v:,}" for k, v in info["nonzero_per_model"].items()) + ")")),
             ("intercept", ", ".join(f"{v:.6g}" for v in info["intercept"]))]
    t = info["training"]
    if t is not None:
        if t.get("solver"):
            lines.append(("solver", t["solver"]))
        if t.get("chosen_because"):         # --solver auto: why this one
            lines.append(("chosen by auto", t["chosen_because"]))
        lines.append(("parameters", ", ".join(f"{k}={v}" for k, v in t["params"].items())))
        if "passes" in t:
            gap = t.get("gap")
            state = "certified (exact gap within tol)" if t["certified"] else \
                "NOT converged" if not t.get("converged") else \
                "converged by the solver's own rule, gap above tol" if t["gap_exact"] else \
                "converged (estimated gap)"
            lines.append(("trained", f"{t.get('n_iter', '?')} iterations, {t['passes']:.2f} "
                                     f"passes, primal {t['primal']:.6f}, dual {t['dual']:.6f}, "
                                     f"relative gap {gap:.2e}, {state}"))
        if "store" in t or t.get("n_rows"):
            rows = f"{t['n_rows']:,} rows" if t.get("n_rows") else "rows unknown"
            st = t.get("store")
            where = "in-memory data" if not st else \
                f"store {st.get('store_id') or '(no id)'}, converted from " + \
                (", ".join(st.get("converted_from") or []) or "(unknown)")
            lines.append(("trained on", f"{where} ({rows})"))
    width = max(len(k) for k, _ in lines) + 2
    out = [f"{k:<{width}}{v}" for k, v in lines]
    if info["largest_weights"]:
        more = ", model" if info["n_models"] > 1 else ""
        out.append(f"largest weights (feature id: weight{more}):")
        for w in info["largest_weights"]:
            where = f"  [{w['model']}]" if info["n_models"] > 1 else ""
            out.append(f"  {w['feature']:>10}: {w['weight']: .6g}{where}")
    return "\n".join(out)
