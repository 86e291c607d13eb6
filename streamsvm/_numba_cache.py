"""Where numba keeps streamsvm's compiled kernels: a user cache directory, never the package.

The kernels are ``@njit(cache=True)``. By default numba writes their cache files
(``*.nbi``, ``*.nbc``) into ``__pycache__`` next to the source, that is into site-packages
for an installed streamsvm. pip does not know those files, so ``pip uninstall`` leaves
``site-packages/streamsvm/`` behind without ``__init__.py``: a namespace package that
shadows a later editable install (``ImportError: cannot import name '__version__'``).

Imported by ``streamsvm/__init__.py`` before any kernel is defined, this module points
numba's cache at the first of:

1. ``NUMBA_CACHE_DIR`` (numba's own setting), when the user set it: left alone;
2. ``$STREAMSVM_CACHE_DIR``;
3. ``$XDG_CACHE_HOME/streamsvm/numba``, else ``~/.cache/streamsvm/numba``;
4. ``<temporary directory>/streamsvm-<user>/numba``, when the above is not writable.

numba picks a function's cache location when ``@njit(cache=True)`` decorates it, so setting
``numba.config.CACHE_DIR`` here is enough. numba has a single cache directory per process:
other ``cache=True`` functions decorated after ``import streamsvm`` use it too.

Inside that directory the kernels go to ``src-<key>``, ``key`` a hash of every package
source file that defines kernels. numba keys a cached kernel on its own file's timestamp
only, so an edit of an inlined helper in another file (``kernels/_csr.py``'s ``row_dot``,
used by ``kernels/_dcd.py``) left the old machine code in use, silently, in an editable
install. With the key, any change to a kernel source compiles every kernel afresh once.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import pathlib
import tempfile

import numba

__all__ = ["numba_cache_dir", "kernel_sources_key"]


def _candidates(environ) -> list[pathlib.Path]:
    """Cache directories to try, best first, for the environment ``environ``."""
    if environ.get("STREAMSVM_CACHE_DIR"):
        first = pathlib.Path(environ["STREAMSVM_CACHE_DIR"])
    else:
        xdg = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        first = pathlib.Path(xdg) / "streamsvm" / "numba"
    try:
        user = getpass.getuser()
    except Exception:  # no user name (some containers): still a private-ish directory
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    return [first, pathlib.Path(tempfile.gettempdir()) / f"streamsvm-{user}" / "numba"]


def _writable(path: pathlib.Path) -> bool:
    """Whether ``path`` exists or can be created, and accepts a new file (numba's own test)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def numba_cache_dir(environ=None) -> str | None:
    """The first writable directory of steps 2-4 above, created if missing.

    Parameters
    ----------
    environ : mapping, optional
        Environment variables (default ``os.environ``).

    Returns
    -------
    str or None
        None when no candidate is writable (numba then falls back to its own locations).
    """
    environ = os.environ if environ is None else environ
    for path in _candidates(environ):
        if _writable(path):
            return str(path)
    return None


def kernel_sources_key(root=None) -> str:
    """A hash of the package's source files that define numba kernels (module doc).

    Parameters
    ----------
    root : path, optional
        The package directory (default: this package).
    """
    root = pathlib.Path(__file__).resolve().parent if root is None else pathlib.Path(root)
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        text = path.read_bytes()
        if b"njit" in text or b"@kernel" in text:
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + text + b"\0")
    return h.hexdigest()[:16]


if not numba.config.CACHE_DIR:      # the user's NUMBA_CACHE_DIR wins
    _base = numba_cache_dir()
    numba.config.CACHE_DIR = os.path.join(_base, f"src-{kernel_sources_key()}") if _base else ""
