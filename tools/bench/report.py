"""Markdown tables and PNG plots of a solver-suite results document (``tools/bench.py suite``,
``tools/bench.py render``).

Only numbers present in the results JSON are printed (formatted, never recomputed from
anything else); a missing value prints as ``–``.
"""

from __future__ import annotations

import math
import os

from ._table import GAP_FLOOR, fmt, markdown_table

__all__ = ["render", "render_markdown", "problem_tables", "io_table", "targets_tables",
           "curves", "plot_group"]

PROBLEMS = (("Binary, hinge loss", "binary", ("hinge",)),
            ("Binary, squared hinge loss", "binary", ("squared_hinge",)),
            ("Multiclass (one-vs-rest hinge / squared hinge; Crammer–Singer: accuracy only)",
             "multiclass", ("hinge", "squared_hinge", "crammer_singer")),
            ("Multiclass, Weston–Watkins (one joint model; Crammer–Singer: accuracy only)",
             "multiclass", ("ww",)))
LOSS_SHORT = {"hinge": "hinge", "squared_hinge": "sq. hinge", "crammer_singer": "C–S",
              "ww": "W–W"}


def _passes(value, kind) -> str:
    if value is None:
        return "–"
    prefix = {"upper bound": "≤", "approx": "≈"}.get(kind, "")
    return prefix + fmt(float(value), "passes")


def _setting(run) -> str:
    i = run.get("headline")
    if i is None or not run.get("steps"):
        return ""
    s = run["steps"][i]
    label = s.get("label", "")
    if run["family"] == "liblinear" and s.get("default"):
        label += " (default)"
    if s.get("max_iter_warning"):
        label += ", max iter"
    if run["family"] == "streamsvm" and run.get("converged") is False:
        label += ", not converged"
    return label


def _row(run, multi_c: bool, multi_loss: bool, *, to_target: bool = False) -> list[str]:
    head = [run["dataset"]] + ([fmt(run["C"])] if multi_c else [])
    head += [LOSS_SHORT.get(run["loss"], run["loss"])] if multi_loss else []
    if run["status"] != "ok":
        msg = (run.get("message") or "").splitlines()[0][:70] if run.get("message") else ""
        return head + [run["label"], f"*{run['status']}*{': ' + msg if msg else ''}"] + ["–"] * 8
    if to_target:
        t = run.get("to_target")
        target = f"{run.get('target_gap', 1e-3):.0e}".replace("e-0", "e-")    # 1e-3
        if t is None:
            return head + [run["label"], f"never within {target} of best"] + ["–"] * 8
        return head + [run["label"], f"{t['label']} (first within {target})",
                       _passes(t.get("passes"), t.get("passes_kind")),
                       fmt(t.get("fit_seconds"), "s"),
                       fmt(t.get("process_seconds"), "s"), fmt(run.get("peak_rss_mb"), "mb"),
                       fmt(t.get("primal"), "obj"), fmt(t.get("rel_gap"), "gap"),
                       fmt(t.get("train_accuracy"), "acc"), fmt(t.get("test_accuracy"), "acc")]
    return head + [run["label"], _setting(run), _passes(run.get("passes"), run.get("passes_kind")),
                   fmt(run.get("fit_seconds"), "s"), fmt(run.get("process_seconds"), "s"),
                   fmt(run.get("peak_rss_mb"), "mb"), fmt(run.get("primal"), "obj"),
                   fmt(run.get("rel_gap"), "gap"), fmt(run.get("train_accuracy"), "acc"),
                   fmt(run.get("test_accuracy"), "acc")]


def problem_tables(res) -> list[tuple[str, str]]:
    """One (title, markdown) per problem class that has runs."""
    order = {d["name"]: i for i, d in enumerate(res["datasets"])}
    out = []
    multi_c = len({r["C"] for r in res["runs"]}) > 1
    for title, task, losses in PROBLEMS:
        runs = [r for r in res["runs"] if r["task"] == task and r["loss"] in losses]
        if not runs:
            continue
        runs.sort(key=lambda r: (order.get(r["dataset"], 99), r["C"],
                                 losses.index(r["loss"])))
        multi_loss = len({r["loss"] for r in runs}) > 1
        headers = (["data"] + (["C"] if multi_c else []) + (["loss"] if multi_loss else [])
                   + ["method", "setting", "passes", "fit s", "process s", "peak RSS MB",
                      "primal", "gap to best", "train acc", "test acc"])
        rows = []
        for r in runs:
            rows.append(_row(r, multi_c, multi_loss))
            if r["family"] == "liblinear" and r["status"] == "ok" and "to_target" in r:
                t = r.get("to_target")
                h = r["steps"][r["headline"]] if r.get("headline") is not None else {}
                if t is None or t.get("label") != h.get("label"):
                    rows.append(_row(r, multi_c, multi_loss, to_target=True))
        n_left = len(headers) - 10
        out.append((title, markdown_table(headers, rows, ["l"] * (n_left + 2) + ["r"] * 8)))
    return out


def io_table(io: dict) -> str:
    rows, rss_rows = [], []
    for name, r in io.items():
        rows.append([name, f"{r['n_rows']:,}", fmt(r["decoded_bytes"] / 1e6, "mb"),
                     fmt(r["bytes_on_disk"] / 1e6, "mb"), fmt(r["read_chunk_loop_s"], "s"),
                     fmt(r["scheduler_pass_s"], "s"), fmt(r.get("scheduler_pass_cpu_s"), "s"),
                     fmt(r.get("one_reader_pass_s"), "s"),
                     fmt(r["floor_s"], "s"), fmt(r["decoded_mb_per_s"], "mb")])
        if r.get("rss"):
            x = r["rss"]
            rss_rows.append([name, fmt(x.get("import_mb"), "mb"), fmt(x.get("runtime_mb"), "mb"),
                             fmt(x.get("read_chunk_loop_mb"), "mb"),
                             fmt(x.get("scheduler_pass_mb"), "mb"),
                             fmt(x.get("scheduler_budget_bytes", 0) / 1e6, "mb"),
                             fmt(x.get("runtime_pass_mb"), "mb")])
    out = markdown_table(["store", "rows", "decoded MB", "on disk MB", "read_chunk loop s",
                          "scheduler pass s (read-ahead, no compute)", "its CPU s (all threads)",
                          "same, one read-ahead thread s", "I/O floor s", "decoded MB/s"], rows)
    if rss_rows:
        out += "\n\nPeak RSS of the reading path alone (fresh processes):\n\n" + markdown_table(
            ["store", "import + open_store MB", "+ dcd kernels loaded MB",
             "+ read_chunk loop MB",
             "+ scheduler pass MB", "scheduler cache budget MB",
             "kernels loaded + scheduler pass, no cache, no state MB"], rss_rows)
    return out


def targets_tables(res) -> str:
    """Issue 3's targets, as the harness judged them (``results['targets']``)."""
    t = res.get("targets") or []
    parts = []
    mem = [v for v in t if v["target"].startswith("in-memory")]
    if mem:
        rows = [[v["dataset"], LOSS_SHORT[v["loss"]], fmt(v["streamsvm_fit_s"], "s"),
                 f"{v['peer']} {v['peer_setting'] or ''}".strip(), fmt(v["peer_fit_s"], "s"),
                 fmt(v["ratio"], "x"), _met(v["met"])] for v in mem]
        parts.append("**In memory: dcd solver time to its certified gap ≤ 1e-3 vs LIBLINEAR's "
                     "first -e whose objective is within 1e-3 of the best**\n\n" + markdown_table(
                         ["data", "loss", "dcd fit s", "LIBLINEAR (to 1e-3)", "LIBLINEAR fit s",
                          "ratio", "target ≤ 1×"], rows, list("llrlrrl")))
    rss = [v for v in t if "RSS" in v["target"]]
    if rss:
        rows = [[v["dataset"], LOSS_SHORT[v["loss"]], fmt(v["budget_mb"], "mb"),
                 fmt(v["model_mb"], "mb"), fmt(v["peak_rss_mb"], "mb"),
                 fmt(v.get("peak_rss_anon_mb"), "mb"), fmt(v.get("peak_rss_file_mb"), "mb"),
                 fmt(v.get("import_floor_mb"), "mb"), _met(v.get("met")),
                 _met(v.get("met_net_of_import_floor"))] for v in rss]
        parts.append("**Out of core: peak RSS (`streamsvm train` process) vs budget + model** "
                     "(anonymous / file-backed: the split of the largest RSS sampled every "
                     "20 ms)\n\n"
                     + markdown_table(["data", "loss", "budget MB", "model MB", "peak RSS MB",
                                       "of which anonymous MB", "file-backed MB",
                                       "runtime floor MB", "≤ budget + model",
                                       "≤ budget + model + runtime floor"], rows,
                                      list("llrrrrrrll")))
    ps = [v for v in t if "pass" in v["target"]]
    if ps:
        rows = [[v["dataset"], LOSS_SHORT[v["loss"]], fmt(v["io_floor_s"], "s"),
                 fmt(v["first_sweep_s"], "s"), fmt(v.get("first_sweep_s_ratio"), "x"),
                 fmt(v["stream_s_per_pass"], "s"), fmt(v.get("stream_s_per_pass_ratio"), "x"),
                 fmt(v["exact_s_per_pass"], "s"), fmt(v.get("exact_s_per_pass_ratio"), "x"),
                 fmt(v["overall_s_per_pass"], "s"), fmt(v.get("overall_s_per_pass_ratio"), "x"),
                 fmt(v.get("one_reader_s"), "s"),
                 fmt(v.get("stream_s_per_pass_vs_one_reader"), "x"), _met(v["met"])]
                for v in ps]
        bound_rows = [[v["dataset"], LOSS_SHORT[v["loss"]], str(v.get("cores") or "–"),
                       fmt(v.get("decode_cpu_s"), "s"), fmt(v.get("first_kernel_s"), "s"),
                       fmt(v.get("first_bound_s"), "s"), fmt(v.get("first_bound_ratio"), "x"),
                       fmt(v.get("first_vs_bound"), "x"),
                       fmt(v.get("stream_kernel_s_per_pass"), "s"),
                       fmt(v.get("stream_bound_s"), "s"), fmt(v.get("stream_bound_ratio"), "x"),
                       fmt(v.get("stream_vs_bound"), "x"), fmt(v.get("stream_vs_own_bound"), "x")]
                      for v in ps if v.get("stream_bound_s") or v.get("first_bound_s")]
        disk_rows = [[v["dataset"], LOSS_SHORT[v["loss"]], str(v.get("stream_sweeps", "–")),
                      str(v.get("disk_sweeps", "–")), fmt(v.get("disk_sweep_s"), "s"),
                      fmt(v.get("disk_sweep_s_ratio"), "x"), fmt(v.get("disk_s_per_pass"), "s"),
                      fmt(v.get("disk_s_per_pass_ratio"), "x")]
                     for v in ps if v.get("disk_sweeps")]
        parts.append("**Out of core: seconds per pass vs the I/O floor (read + decompress once)**"
                     "\n\n" + markdown_table(
                         ["data", "loss", "I/O floor s", "1st sweep s", "×floor",
                          "median streamed sweep s/pass", "×floor", "exact-check s/pass",
                          "×floor", "fit s / passes", "×floor", "one-reader read s",
                          "streamed sweep ÷ one-reader read", "target ≤ 1.25× (streamed)"],
                         rows, list("ll") + ["r"] * 11 + ["l"]))
        if bound_rows:
            parts.append("**Out of core: the least a pass can take on this machine** — the "
                         "solver's kernel runs on one thread (dual CD is sequential), "
                         "decompression needs the I/O floor's CPU seconds, both share the "
                         "cores: bound = max(kernel, (decompression CPU + kernel) / cores)"
                         "\n\n" + markdown_table(
                             ["data", "loss", "cores", "decompression CPU s",
                              "1st sweep kernel s", "1st sweep bound s", "bound ×floor",
                              "measured ÷ bound", "streamed kernel s/pass",
                              "streamed bound s/pass", "bound ×floor", "measured ÷ bound",
                              "median of each streamed sweep ÷ its own bound"],
                             bound_rows, list("ll") + ["r"] * 11))
        if disk_rows:
            parts.append("**Out of core: sweeps over dcd's disk slab** (the active rows' "
                         "uncompressed copy on scratch disk; not a pass over the store)\n\n"
                         + markdown_table(["data", "loss", "streamed sweeps", "disk sweeps",
                                           "median disk sweep s", "×floor",
                                           "disk sweep s / passes of rows visited", "×floor"],
                                          disk_rows, list("ll") + ["r"] * 6))
    return "\n\n".join(parts)


def _met(v) -> str:
    return "–" if v is None else ("**met**" if v else "**missed**")


# -- curves ----------------------------------------------------------------------------------

def curves(runs) -> list[dict]:
    """Plot series for one (data set, C, loss) group: label, passes, seconds, gaps, kind."""
    out = []
    for r in runs:
        if r["status"] != "ok" or r.get("objective_loss") is None:
            continue
        steps = [s for s in r["steps"] if s.get("role") in ("headline", "curve", "ladder")
                 and s.get("rel_gap") is not None and s.get("passes") is not None]
        if r["family"] == "streamsvm" and r.get("history"):
            h = r["history"]
            out.append({"label": f"{r['label']} (solver certificate (P−D)/P per sweep)",
                        "passes": [e["passes"] for e in h], "seconds": [e["seconds"] for e in h],
                        "gap": [e["gap"] for e in h], "exact": [bool(e.get("exact")) for e in h],
                        "kind": "certificate"})
        if r["family"] == "streamsvm" and not any(s["role"] == "curve" for s in steps):
            steps = [s for s in steps if s["role"] == "headline"]
        if not steps:
            continue
        steps.sort(key=lambda s: (s["passes"], s.get("fit_seconds") or 0))
        suffix = {"liblinear": " (-e ladder)", "streamsvm": " (true objective, max_passes re-runs)"
                  if len(steps) > 1 else " (true objective)"}.get(r["family"], "")
        out.append({"label": r["label"] + suffix,
                    "passes": [s["passes"] for s in steps],
                    "seconds": [s.get("fit_seconds") for s in steps],
                    "gap": [s["rel_gap"] for s in steps], "exact": [True] * len(steps),
                    "kind": "objective"})
    return out


def gap_floor(series: list[dict]) -> float:
    """Where gaps of 0 (the best run itself) are drawn: a decade below the smallest positive
    gap, within [1e-9, 1e-5]."""
    pos = [g for s in series for g in s["gap"] if g is not None and g > 0]
    if not pos:
        return 1e-6
    return min(1e-5, max(GAP_FLOOR, 10 ** (math.floor(math.log10(min(pos))) - 1)))


def plot_group(series: list[dict], path: str, title: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # noqa: BLE001
        return False
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.2))
    markers = "osD^v<>px*h"
    floor = gap_floor(series)
    for i, s in enumerate(series):
        g = [max(v, floor) for v in s["gap"]]
        style = "--" if s["kind"] == "certificate" else "-"
        for ax, x in zip(axes, (s["passes"], s["seconds"])):
            pts = [(a, b) for a, b in zip(x, g) if a is not None and a > 0]
            if not pts:
                continue
            xs, ys = zip(*pts)
            line, = ax.plot(xs, ys, style, marker=markers[i % len(markers)], ms=4,
                            label=s["label"], alpha=0.9)
            if s["kind"] == "certificate":
                ex = [(a, b) for a, b, e in zip(x, g, s["exact"]) if e and a and a > 0]
                if ex:
                    ax.plot(*zip(*ex), "D", color=line.get_color(), ms=8, mfc="none")
    from matplotlib.ticker import NullFormatter
    for ax, xl in zip(axes, ("passes over the data", "seconds (fit, in-process)")):
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_yscale("log")
        ax.set_xlabel(xl)
        ax.axhline(1e-3, color="grey", lw=0.8, ls=":")
        ax.axhline(floor, color="black", lw=0.6, ls="-", alpha=0.4)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("(P(w) − P*) / P*   [certificate: (P − D) / P]")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7.5, frameon=False)
    fig.suptitle(title + f"   (gap 0 = the best objective found, drawn on the line at "
                         f"{floor:g}; dotted: 1e-3; ◇ = exact check of the certificate)",
                 fontsize=9)
    fig.tight_layout(rect=(0, 0.11, 1, 1))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def render_plots(res, plots_dir: str) -> list[tuple[str, str]]:
    groups = {}
    for r in res["runs"]:
        groups.setdefault((r["dataset"], r["C"], r["loss"]), []).append(r)
    made = []
    for (ds, C, loss), runs in groups.items():
        if loss == "crammer_singer":
            continue
        series = curves(runs)
        if not series:
            continue
        name = f"{res['suite']}_{ds}_{loss}_C{C:g}.png"
        path = os.path.join(plots_dir, name)
        title = f"{ds}, {loss.replace('_', ' ')}, C = {C:g}  [{res['suite']} suite]"
        if plot_group(series, path, title):
            made.append((f"{ds}, {loss}, C={C:g}", path))
    return made


# -- the document ----------------------------------------------------------------------------

def render_markdown(res, plots=None, rel_to=None) -> str:
    m = res["machine"]
    v = res["versions"]
    lines = [f"### `{res['command']}`", "",
             f"Machine: {m.get('cpu_model')}, {m.get('cpu_count')} CPUs "
             f"({m.get('cpus_usable')} usable), "
             + (f"{m['memory_bytes'] / 2**30:.0f} GiB RAM, " if m.get("memory_bytes") else "")
             + f"{m.get('platform')}, Python {m.get('python')}; load average at start "
             f"{', '.join(f'{x:.2f}' for x in (m.get('loadavg_at_start') or []))}. "
             f"Run {res['created']}"
             + (f", {res['suite_seconds']:.0f} s in all" if res.get("suite_seconds") else "")
             + ".", "",
             "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()
                                      if k not in ("commit", "vowpalwabbit_importable",
                                                   "streamsvm_source_sha256") and val)
             + (f"; commit {v['commit'][:12]}" if v.get("commit") else "")
             + (f" (streamsvm/ sources sha256 {v['streamsvm_source_sha256'][:12]}"
                + ("" if res.get("streamsvm_source_sha256_at_end") in
                   (None, v["streamsvm_source_sha256"]) else ", **changed during the run**")
                + ")" if v.get("streamsvm_source_sha256") else "")
             + ("" if v.get("vowpalwabbit_importable") is True
                else f"; **vowpalwabbit not importable** ({v.get('vowpalwabbit_importable')})")
             + f". streamsvm solvers registered: {', '.join(res.get('solvers_registered', []))}.",
             ""]
    ds_rows = []
    for d in res["datasets"]:
        ds_rows.append([d["name"], d["task"], f"{d['n_rows']:,}", f"{d['n_features']:,}",
                        f"{d['nnz']:,}", fmt(d["decoded_bytes"] / 1e6, "mb"),
                        (fmt(d["budget_bytes"] / 1e6, "mb") + " MB" if d.get("budget_bytes")
                         else res["config"].get("memory", "")),
                        "yes" if d.get("test_text") else "no"])
    lines += ["Data sets (stores converted with `--shuffle --seed 0`):", "",
              markdown_table(["data", "task", "rows", "features", "non-zeros", "decoded MB",
                              "streamsvm memory budget", "test split"], ds_rows), ""]
    for title, table in problem_tables(res):
        lines += [f"#### {title}", "", table, ""]
    best_rows = []
    for key, b in res["best"].items():
        if b.get("best_primal") is None:
            continue
        ds, C, loss = key.split("|")
        best_rows.append([ds, C, LOSS_SHORT.get(loss, loss), fmt(b["best_primal"], "obj"),
                          b.get("best_by") or "–", fmt(b.get("best_dual"), "obj"),
                          fmt(b.get("certified_gap"), "gap") if b.get("certified_gap") is not None
                          else "–"])
    if best_rows:
        lines += ["#### Best objective P* per problem (the reference of every gap)", "",
                  markdown_table(["data", "C", "loss", "P* (best primal found)", "found by",
                                  "best dual (lower bound)", "(P* − dual) / P*"], best_rows,
                                 list("lll") + ["r", "l", "r", "r"]), ""]
    if res.get("io_baseline"):
        lines += ["#### I/O floor: read + decompress the store once (median of 3)", "",
                  io_table(res["io_baseline"]), ""]
    tt = targets_tables(res)
    if tt:
        lines += ["#### Issue 3 targets (dcd)", "", tt, ""]
    if plots:
        lines += ["#### Plots", ""]
        for label, path in plots:
            rel = os.path.relpath(path, rel_to) if rel_to else path
            lines.append(f"- [{label}]({rel})")
        lines.append("")
    lines += ["Columns: *passes* — passes over the data (streamsvm: rows visited / n including "
              "exact-check passes; LIBLINEAR dual and LinearSVC: ≤ iterations summed over "
              "one-vs-rest models, each iteration sweeps only unshrunk rows; LIBLINEAR -s 2: ≈ "
              "1 + Σ(CG steps + 2); SGD: epochs; VW: --passes). *fit s* — in-process time of "
              "the fitting call(s), the fastest of the repeated fits (`--repeat`: 9 in the dcd suite, 3 in the others) when the first is under 2 s. *process s* — streamsvm: "
              "the `streamsvm train` CLI from spawn to exit; others: worker start-up, imports "
              "and data loading + fit. *peak RSS* — that process's ru_maxrss. *primal* — "
              "Σ_c ½‖w_c‖² + ½b_c² + C Σ loss, computed by the harness from each method's "
              "weights on the same data. *gap to best* — (primal − P*) / P*. streamsvm's "
              "*fit s* and *process s* come from two separate runs (the worker with the "
              "callback, then the CLI), so on long runs process s can be the smaller one.", ""]
    return "\n".join(lines)


def render(res, out_dir: str, plots_dir: str | None, md_path: str | None = None) -> str:
    """Write the plots and ``results.md`` (or ``md_path``, links relative to its folder)."""
    plots = render_plots(res, plots_dir) if plots_dir else []
    path = md_path or os.path.join(out_dir, "results.md")
    md = render_markdown(res, plots, rel_to=os.path.dirname(os.path.abspath(path)))
    with open(path, "w") as f:
        f.write(md + "\n")
    return path
