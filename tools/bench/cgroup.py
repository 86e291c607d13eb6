"""Holding a benchmark's child process to less memory than its data: a cgroup v1 ``memory``
cgroup around it, and the page cache dropped before it starts.

The limit (``memory.limit_in_bytes``, and ``memory.memsw.limit_in_bytes`` where swap is
accounted) holds the process's own memory and the page cache it faults in together: a store
larger than the limit cannot stay cached, so every pass reads it from disk again. The cgroup is
made inside this process's own memory cgroup (read from ``/proc/self/cgroup``; the root of the
hierarchy when that one refuses), one per run, and removed after it; the child joins it before
it runs (:func:`tools.bench._timed.run_child`'s ``cgroup``). Both need root; where either
cannot be had, :func:`isolation_problem` says why and the benchmark refuses (or runs without,
saying so in its results).
"""

from __future__ import annotations

import os
import time

__all__ = ["V1_ROOT", "MemoryCgroup", "own_cgroup", "parse_keyed", "drop_caches",
           "isolation_problem", "mapped_file_bytes"]

#: Where the cgroup v1 ``memory`` controller is mounted.
V1_ROOT = "/sys/fs/cgroup/memory"


def own_cgroup(proc_cgroup: str, controller: str = "memory") -> str | None:
    """The path of this process's cgroup of ``controller`` within its hierarchy, from the text
    of ``/proc/self/cgroup`` (lines ``ID:CONTROLLERS:PATH``); None if it has no such line."""
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and controller in parts[1].split(","):
            return parts[2]
    return None


def parse_keyed(text: str) -> dict:
    """``memory.stat`` and ``memory.oom_control``: lines ``KEY VALUE`` → {key: int}."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path: str, value) -> None:
    try:
        with open(path, "w") as f:
            f.write(str(value))
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write {value} to {path}: {exc.strerror}") from exc


def _parents(root: str) -> list[str]:
    """Directories to make a cgroup in: this process's own memory cgroup, then the root."""
    try:
        mine = own_cgroup(_read("/proc/self/cgroup"))
    except OSError:
        mine = None
    out = [os.path.join(root, mine.lstrip("/"))] if mine and mine != "/" else []
    return out + [root]


class MemoryCgroup:
    """A cgroup v1 memory cgroup of ``limit`` bytes named ``name`` (``with`` removes it).

    Raises ``OSError`` (naming the file) when it cannot be made or limited.
    """

    def __init__(self, name: str, limit: int, root: str = V1_ROOT):
        self.limit = int(limit)
        errors = []
        for parent in _parents(root):
            path = os.path.join(parent, name)
            try:
                os.mkdir(path)
            except OSError as exc:
                errors.append(f"{path}: {exc.strerror or exc}")
                continue
            self.path = path
            try:
                self._limit()
            except OSError:
                self.remove()
                raise
            return
        raise OSError(f"cannot make a memory cgroup: {'; '.join(errors)}")

    def _limit(self) -> None:
        _write(self._file("memory.limit_in_bytes"), self.limit)
        got = int(_read(self._file("memory.limit_in_bytes")))
        if got > self.limit + (1 << 16):          # the kernel rounds down to a page
            raise OSError(f"{self._file('memory.limit_in_bytes')} reads {got} after "
                          f"writing {self.limit}")
        self.limit = got
        if os.path.exists(self._file("memory.memsw.limit_in_bytes")):
            _write(self._file("memory.memsw.limit_in_bytes"), self.limit)   # no swapping out

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def stats(self) -> dict:
        """Peak usage (``memory.max_usage_in_bytes``: the process's memory and its page
        cache), how often the limit was hit (``failcnt``), OOM kills, the limit."""
        oom = parse_keyed(_read(self._file("memory.oom_control")))
        stat = parse_keyed(_read(self._file("memory.stat")))
        return {"limit_bytes": self.limit,
                "max_usage_bytes": int(_read(self._file("memory.max_usage_in_bytes"))),
                "failcnt": int(_read(self._file("memory.failcnt"))),
                "oom_kills": oom.get("oom_kill"), "under_oom": oom.get("under_oom"),
                "pgmajfault": stat.get("total_pgmajfault")}

    def remove(self, tries: int = 50) -> None:
        """Remove the cgroup (its pages go to the parent); waits a little for exiting
        processes to leave it."""
        for i in range(tries):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                if i == tries - 1:
                    raise
                time.sleep(0.1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def drop_caches() -> None:
    """Write dirty pages back and drop the page cache, dentries and inodes (root only)."""
    os.sync()
    _write("/proc/sys/vm/drop_caches", 3)


def mapped_file_bytes(status: str | None = None) -> int | None:
    """This process's file-backed resident pages (``RssFile`` of ``/proc/self/status``, or of
    the text ``status``): the libraries it keeps mapped cannot be dropped from the page cache
    and stay charged to its own cgroup, so a child mapping the same files uses them without
    being charged for them (its RSS may then exceed its cgroup's limit by up to this)."""
    try:
        text = _read("/proc/self/status") if status is None else status
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1]) * 1024
    return None


def isolation_problem(limit: int, root: str = V1_ROOT) -> str | None:
    """Why runs cannot be held to ``limit`` bytes with a cold page cache here, or None:
    makes and removes a cgroup and drops the caches once."""
    if not os.path.isdir(root):
        return f"no cgroup v1 memory controller at {root}"
    try:
        with MemoryCgroup(f"streamsvm-bench-probe-{os.getpid()}", limit, root):
            pass
    except OSError as exc:
        return str(exc)
    try:
        drop_caches()
    except OSError as exc:
        return f"cannot drop the page cache (/proc/sys/vm/drop_caches): {exc.strerror or exc}"
    return None
