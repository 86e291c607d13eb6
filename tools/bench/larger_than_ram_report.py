"""The Markdown of a ``tools/bench.py larger-than-ram`` result (:mod:`.larger_than_ram`):
what was measured on which store under which limit, the runs, and the passes of the streamsvm
runs over the store against the disk's bandwidth and the kernel + decompression bound."""

from __future__ import annotations

from ._common import MB
from ._table import fmt, markdown_table

__all__ = ["ltr_tables"]


def _head(r: dict) -> list[str]:
    s, disk = r["store"], r["disk"]
    lines = [f"Store `{s['url']}`: {s['n_rows']:,} rows × {s['n_features']:,} features, "
             f"{s['nnz']:,} non-zeros, {s['bytes_on_disk'] / MB:,.0f} MB on disk "
             f"({s['decoded_bytes'] / MB:,.0f} MB decoded); hinge, C = {r['C']:g}, "
             f"tol {r['tol']:g}, at most {r['max_passes']:g} passes; streamsvm "
             f"`--memory {r['memory_bytes'] / MB:,.0f}MB`."]
    if r["limited"]:
        lines.append(f"Each run in a memory cgroup of {r['limit_bytes'] / MB:,.0f} MB (its "
                     f"process and page cache together), the page cache dropped before it.")
    else:
        lines.append(f"**NO MEMORY LIMIT** ({r['isolation_problem']}): every run could keep "
                     f"the store in the page cache; these are not larger-than-RAM numbers.")
    if disk.get("mb_per_s"):
        lines.append(f"Disk: {disk['mb_per_s']:,.0f} MB/s ({disk['method']}, "
                     f"{disk['bytes'] / MB:,.0f} MB of the store's files in "
                     f"{disk['cycles']} round(s); the first {disk['first_cycle_mb_per_s']:,.0f}"
                     f" MB/s).")
    else:
        lines.append(f"Disk bandwidth not measured: {disk.get('error')}.")
    if r.get("cpu"):
        lines.append(f"Decompressing one pass: {r['cpu']['decode_cpu_s']:.2f} CPU s "
                     f"({r['cpu']['cores']} cores).")
    if r.get("command"):
        m = r.get("machine") or {}
        lines.append(f"Command: `{r['command']}`; machine: {m.get('cpu_model')}, "
                     f"{m.get('cpus_usable')} cores, "
                     f"{(m.get('memory_bytes') or 0) / 1e9:.1f} GB.")
    return lines


def _harness_mb(r: dict) -> float:
    """The most file-backed memory the harness had mapped during a run (MB)."""
    return max([(x.get("cgroup") or {}).get("harness_mapped_file_bytes") or 0
                for x in r["runs"]] + [0]) / MB


def _run_row(x: dict) -> list:
    if x.get("status") != "ok":
        msg = (x.get("message") or "").strip().splitlines()
        return [x["method"], f"*{x.get('status')}*" + (f": {msg[-1][:90]}" if msg else "")] \
            + ["–"] * 12
    child, cg = x.get("child") or {}, x.get("cgroup") or {}
    per_pass = x["fit_s"] / x["passes"] if x.get("fit_s") and x.get("passes") else None
    rb = child.get("read_bytes")
    return [x["method"], "ok" if x.get("converged", True) else "ok, not converged",
            fmt(x.get("passes"), "passes"), fmt(child.get("wall_s"), "s"),
            fmt(x.get("fit_s"), "s"), fmt(per_pass, "s"), fmt(x.get("objective"), "obj"),
            fmt(x.get("certificate"), "gap"), fmt(x.get("gap_to_best_dual"), "gap"),
            fmt(child.get("peak_rss_mb"), "mb"),
            fmt(cg["max_usage_bytes"] / MB if cg.get("max_usage_bytes") else None, "mb"),
            fmt(rb / MB if rb is not None else None, "mb"), fmt(x.get("read_vs_data"), "x"),
            fmt(x.get("read_mb_per_s"), "mb")]


def _pass_row(x: dict, disk_mb_s) -> list:
    t = x["streamed"]
    rate = t.get("disk_mb_per_s_median")
    return [x["method"], fmt(t["store_passes"], "passes"), fmt(t["first_sweep_s"], "s"),
            fmt(t["stream_s_per_pass"], "s"), fmt(t["stream_kernel_s_per_pass"], "s"),
            fmt(t["disk_bound_s"], "s"), fmt(t.get("cpu_bound_s"), "s"),
            fmt(t["vs_bound"], "x"), fmt(rate, "mb"),
            fmt(rate / disk_mb_s if rate and disk_mb_s else None, "x")]


def ltr_tables(r: dict) -> str:
    """The Markdown of a :func:`larger_than_ram` result: the runs, then the passes of the
    streamsvm runs over the store against the disk."""
    runs = markdown_table(
        ["method", "status", "passes", "process s", "fit s", "s / pass", "objective",
         "certificate", "gap to best dual", "peak RSS MB", "cgroup peak MB",
         "read from disk MB", "read ÷ (passes × data)", "read MB/s"],
        [_run_row(x) for x in r["runs"]], "llrrrrrrrrrrrr")
    disk = r["disk"].get("mb_per_s")
    streamed = [x for x in r["runs"] if x.get("status") == "ok" and x.get("streamed")]
    parts = _head(r) + ["", runs, "",
                        "data: the store's bytes on disk (VW: its cache file); read from "
                        "disk: the process's read_bytes (start-up's libraries and spilled "
                        "state included); gap to best dual: (objective − the best dual bound "
                        "of the streamsvm runs) ÷ objective; peak RSS counts library pages "
                        "this harness keeps mapped, charged to its own cgroup (up to "
                        f"{_harness_mb(r):,.0f} MB), hence may exceed the cgroup's peak."]
    if streamed:
        parts += ["", "Passes over the store (streamsvm; medians over them):", "",
                  markdown_table(["method", "passes over store", "first pass s",
                                  "s / pass", "kernel s / pass", "disk bound s",
                                  "kernel + decode bound s", "÷ larger bound",
                                  "read MB/s (on disk)", "÷ disk MB/s"],
                                 [_pass_row(x, disk) for x in streamed])]
    return "\n".join(parts)
