"""The conversion benchmark's report (``tools/bench.py convert``): Markdown from its results,
nothing recomputed."""

from __future__ import annotations

from ._common import MB
from ._table import fmt, markdown_table
from .convert_process import CLI_DEFAULT_CHUNK_ROWS
from .convert_stages import ratio

__all__ = ["render_markdown", "stage_rows", "stage_table"]


STAGE_HEADERS = ["stage", "input", "s", "MB/s (text)", "CPU s", "CPU/wall"]


def stage_rows(stages) -> list[list[str]]:
    """Rows of the stage table (see :data:`STAGE_HEADERS`) from stage dicts."""
    out = []
    for st in stages:
        out.append([st["stage"], st["input"], fmt(st["seconds"], "sig3"),
                    fmt(st.get("mb_per_s"), "mb1"), fmt(st.get("cpu_s"), "sig3"),
                    fmt(ratio(st.get("cpu_s"), st["seconds"]), "cpu")])
    return out


def stage_table(stages) -> str:
    return markdown_table(STAGE_HEADERS, stage_rows(stages), "llrrrr", pad=True)


def _e2e_rows(res: dict) -> list[list[str]]:
    sk = {r["compression"]: r for r in res["runs"] if r["tool"] == "sklearn" and r.get("ok")}
    rows = []
    for r in res["runs"]:
        if not r.get("ok"):
            rows.append([r["tool"], r["compression"], fmt(r.get("chunk_rows"), "int"), "failed",
                         "", "", "", "", "", "", ""])
            continue
        s = sk.get(r["compression"])
        speed = ratio(s["wall_s"], r["wall_s"]) if (s and r["tool"] == "streamsvm") else None
        rows.append([r["tool"], r["compression"],
                     fmt(r["chunk_rows"], "int") if r["chunk_rows"] else "–",
                     fmt(r["wall_s"], "sig3"), fmt(r["mb_per_s"], "mb1"),
                     fmt(r.get("rows_per_s"), "int"), fmt(r["peak_rss_mb"], "mb1"),
                     fmt(r["cpu_s"], "sig3"), fmt(r["cpu_per_wall"], "cpu"),
                     fmt((r.get("store_bytes") or 0) / MB, "mb1") if r.get("store_bytes")
                     else "–",
                     fmt(speed, "x1")])
    return rows


def render_markdown(result: dict) -> str:
    """The report of one run (the ``result`` of :func:`tools.bench.convert.run_benchmark`)."""
    m = result["machine"]
    v = m["versions"]
    s = result["settings"]
    out = ["# streamsvm convert vs scikit-learn load_svmlight_file", "",
           "```", result["command"], "```", ""]
    mem = f", {m['memory_bytes'] / 2**30:.0f} GiB RAM" if m.get("memory_bytes") else ""
    out.append(f"Machine: {m['cpu_model']}, {m['cpus_usable']} usable cores{mem}; "
               f"Python {m['python']}, numpy {v['numpy']}, numba {v['numba']}, zarr {v['zarr']}, "
               f"numcodecs {v['numcodecs']}, scikit-learn {v['scikit-learn']}, "
               f"fsspec {v['fsspec']}, zstandard {v['zstandard']}, streamsvm {v['streamsvm']}. "
               f"Started {result['started']}, took {result['total_seconds']:.0f} s.")
    out.append("")
    out.append(f"MB = 10^6 bytes; MB/s = decompressed text MB per wall second; rows/s likewise. "
               f"End-to-end rows: each job in its own process (interpreter start-up and imports "
               f"included), median of {s['repeat']} run(s); peak RSS = `ru_maxrss` of that "
               f"process (max over runs); CPU/wall > 1 means more than one core busy. Page "
               f"cache warm. `vs sklearn` = sklearn wall / streamsvm wall on the same file. "
               f"sklearn: `load_svmlight_file(path)` defaults (float64, CSR).")
    for res in result["inputs"]:
        out += ["", f"## {res['name']}", ""]
        desc = [f"`{res['path']}`", f"{res['text_bytes'] / MB:,.1f} MB text"]
        if res.get("rows") is not None:
            desc.append(f"{res['rows']:,} rows")
        if res.get("nnz") is not None:
            desc.append(f"{res['nnz']:,} non-zeros")
        if res.get("n_features") is not None:
            desc.append(f"{res['n_features']:,} features")
        if res.get("binary_values"):
            desc.append("all values 1 (store omits `data`)")
        for k, f in res["files"].items():
            if k != "plain":
                desc.append(f".{k} {f['bytes'] / MB:,.1f} MB")
        out.append(", ".join(desc) + "." + (f" {res['note']}." if res.get("note") else ""))
        out += ["", "End to end:", ""]
        out.append(markdown_table(
            ["tool", "input", "chunk rows", "wall s", "MB/s", "rows/s", "peak RSS MB", "CPU s",
             "CPU/wall", "store MB", "vs sklearn"], _e2e_rows(res), "llrrrrrrrrr", pad=True))
        for sk in res["skipped"]:
            out.append(f"\n*{sk['tool']} ({sk['compression']}) skipped: {sk['reason']}.*")
        if res["stages"]:
            out += ["", "Where the time goes (streamsvm, each stage timed on its own, in-process, "
                        f"--chunk-rows {res['stage_chunk_rows']}):", ""]
            out.append(stage_table(res["stages"]))
            out += ["", "convert() runs (2) reading/decompressing, (3) parsing and (4) encoding "
                        "in three overlapping threads, so (5) end to end is less than "
                        "(2) + (3) + (4); (5') adds process start-up, imports and loading the "
                        "numba kernels from the on-disk cache."]
            threads = [st for st in res["stages"] if st.get("thread_cpu_s")]
            if threads:
                out += ["", "CPU seconds per thread during (5) (`streamsvm-reader`: read, "
                            "decompress, split; `MainThread`: parse; `streamsvm-writer`: "
                            "StoreWriter.append; `zarr_io`: zarr's event loop; `asyncio`: "
                            "zarr codec threads (zstd, via asyncio.to_thread)):", ""]
                names = list(dict.fromkeys(n for st in threads for n in st["thread_cpu_s"]))
                out.append(markdown_table(
                    ["input", "wall s"] + [f"`{n}`" for n in names],
                    [[st["input"], fmt(st["seconds"], "sig3")]
                     + [fmt(st["thread_cpu_s"].get(n), "sig3") for n in names]
                     for st in threads], "l" + "r" * (len(names) + 1), pad=True))
        if res["store_read"]:
            out += ["", "Reading the store back (every chunk via `open_store(url).read_chunk(i)`"
                        "; MB/s of decoded CSR: indptr + indices + data + y):", ""]
            out.append(markdown_table(
                ["chunk rows", "chunks", "s", "decoded MB", "MB/s", "rows/s", "store MB"],
                [[fmt(r["chunk_rows"], "int"), fmt(r["chunks"], "int"),
                  fmt(r["seconds"], "sig3"),
                  fmt(r["decoded_bytes"] / MB, "mb1"), fmt(r["mb_per_s"], "mb1"),
                  fmt(r["rows_per_s"], "int"), fmt(r["store_bytes"] / MB, "mb1")]
                 for r in res["store_read"]], "rrrrrrr", pad=True))
    t = result["targets"]
    out += ["", "## Targets", "",
            f"streamsvm ≥ {t['speedup_vs_sklearn']:g}× scikit-learn's end-to-end throughput "
            f"(CLI default --chunk-rows {CLI_DEFAULT_CHUNK_ROWS}); streamsvm peak RSS < "
            f"{t['peak_rss_mb']:g} MB whatever the file size (max over all chunk sizes).", ""]
    yn = {True: "yes", False: "**no**", None: "–"}
    out.append(markdown_table(
        ["input", "compression", "streamsvm MB/s", "sklearn MB/s", "speed-up", f"≥ "
         f"{t['speedup_vs_sklearn']:g}×", "streamsvm peak RSS MB", "sklearn peak RSS MB",
         f"< {t['peak_rss_mb']:g} MB"],
        [[r["input"], r["compression"], fmt(r["streamsvm_mb_per_s"], "mb1"),
          fmt(r["sklearn_mb_per_s"], "mb1") + ("" if r["sklearn_reference"] in (None, r["input"])
                                              else " ¹"),
          fmt(r["speedup"], "x1"), yn[r["speedup_ok"]],
          fmt(r["max_peak_rss_mb_any_chunk_rows"], "mb1"), fmt(r["sklearn_peak_rss_mb"], "mb1"),
          yn[r["rss_ok"]]] for r in t["results"]], "llrrrrrrr", pad=True))
    refs = {r["sklearn_reference"] for r in t["results"]
            if r["sklearn_reference"] not in (None, r["input"])}
    if refs:
        out += ["", "¹ sklearn measured on " + ", ".join(f"“{x}”" for x in sorted(refs))
                + " (same shape; the whole file is above --sklearn-max-mb); speed-up = ratio "
                  "of MB/s."]
    return "\n".join(out) + "\n"
