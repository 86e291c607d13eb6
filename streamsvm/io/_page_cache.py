"""Whether a store can stay in the page cache: when it cannot (a store larger than the memory
available, or than the process's memory cgroup, which charges its page cache), the direct
reader drops what it read (``POSIX_FADV_DONTNEED``) instead of leaving the kernel to reclaim
it. Measured on the 4.24 GB store in a 2 GB cgroup (dcd, 6 passes, alternating runs): 42.5 s
and 40.9 s against 46.1 s and 47.3 s, the cgroup never at its limit (4.2 million failed
charges otherwise); a store that fits keeps its pages for the next pass."""

from __future__ import annotations

__all__ = ["page_cache_room", "store_outgrows_page_cache"]


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_limit() -> int | None:
    """The memory limit of this process's cgroup (v1 ``memory`` or v2), or None."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        controllers, path = parts[1].split(","), parts[2]
        if "memory" in controllers:
            return _read_int(f"/sys/fs/cgroup/memory{path}/memory.limit_in_bytes")
        if parts[0] == "0" and parts[1] == "":
            return _read_int(f"/sys/fs/cgroup{path}/memory.max")
    return None


def page_cache_room() -> int | None:
    """The most page cache this process can hold: ``MemAvailable``, or its cgroup's limit
    when smaller (None when neither is known)."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    limit = _cgroup_limit()
    known = [v for v in (avail, limit) if v is not None and v > 0]
    return min(known) if known else None


def store_outgrows_page_cache(store_bytes: int) -> bool:
    """A store of ``store_bytes`` on disk cannot stay in the page cache between passes."""
    room = page_cache_room()
    return room is not None and store_bytes > room
