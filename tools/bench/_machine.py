"""Facts about the machine and the code a benchmark ran on: CPU, cores, memory, platform,
package versions, the commit and a digest of streamsvm's sources."""

from __future__ import annotations

import hashlib
import os
import platform

from ._common import ROOT, command_line, write_json

__all__ = ["machine_info", "package_versions", "versions", "source_digest", "save_stamped"]

#: The packages the solver suite reports.
SUITE_PACKAGES = ("streamsvm", "numpy", "scipy", "numba", "zarr", "numcodecs", "scikit-learn",
                  "liblinear-official", "vowpalwabbit", "matplotlib", "psutil", "fsspec")


def machine_info() -> dict:
    """CPU model, logical/physical/usable cores, memory, platform, Python, load average."""
    cpu = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import psutil
        mem = psutil.virtual_memory().total
        physical = psutil.cpu_count(logical=False)
    except Exception:  # noqa: BLE001 - psutil missing or unsupported platform
        mem = physical = None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {"cpu_model": cpu or platform.processor() or None, "cpu_count": os.cpu_count(),
            "cpu_physical": physical, "cpus_usable": usable, "memory_bytes": mem,
            "platform": platform.platform(), "python": platform.python_version(),
            "loadavg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}


def package_versions(dists) -> dict:
    """``{distribution: installed version or None}``."""
    from importlib import metadata
    out = {}
    for d in dists:
        try:
            out[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            out[d] = None
    return out


def versions() -> dict:
    """The solver suite's packages, whether Vowpal Wabbit imports, the commit and the
    digest of streamsvm's sources."""
    out = package_versions(SUITE_PACKAGES)
    try:
        import vowpalwabbit  # noqa: F401
        out["vowpalwabbit_importable"] = True
    except Exception as exc:  # noqa: BLE001
        out["vowpalwabbit_importable"] = f"{type(exc).__name__}: {exc}"
    out["commit"] = _commit()
    out["streamsvm_source_sha256"] = source_digest()
    return out


def source_digest() -> str:
    """sha256 over streamsvm/**/*.py (the working tree may differ from the commit)."""
    h = hashlib.sha256()
    base = os.path.join(ROOT, "streamsvm")
    for dirpath, dirnames, files in sorted(os.walk(base)):
        dirnames.sort()
        for fn in sorted(files):
            if fn.endswith(".py"):
                p = os.path.join(dirpath, fn)
                h.update(os.path.relpath(p, base).encode())
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def _commit():
    """The checked-out commit, read from .git (no git command is run)."""
    try:
        with open(os.path.join(ROOT, ".git", "HEAD")) as f:
            head = f.read().strip()
        if head.startswith("ref: "):
            ref = os.path.join(ROOT, ".git", head[5:])
            if os.path.exists(ref):
                with open(ref) as f:
                    return f.read().strip()
            with open(os.path.join(ROOT, ".git", "packed-refs")) as f:
                for line in f:
                    if line.strip().endswith(head[5:]):
                        return line.split()[0]
            return None
        return head
    except OSError:
        return None


def save_stamped(r: dict, argv, out_dir: str, name: str) -> None:
    """A side measurement's result ``r`` stamped with its command (``argv`` of
    ``tools/bench.py``), the machine and the versions, written to ``out_dir/name``."""
    r.update(command=command_line(argv), machine=machine_info(), versions=versions())
    os.makedirs(out_dir, exist_ok=True)
    write_json(r, os.path.join(out_dir, name))
