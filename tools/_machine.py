"""Facts about the machine a benchmark ran on (shared by tools/bench*.py)."""

from __future__ import annotations

import os
import platform

__all__ = ["machine_info"]


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
