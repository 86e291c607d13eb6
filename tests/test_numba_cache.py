"""numba's compiled-kernel cache lives in a user cache directory, never in the package."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile

import streamsvm
from streamsvm._numba_cache import kernel_sources_key, numba_cache_dir

PACKAGE = pathlib.Path(streamsvm.__file__).resolve().parent

CALL_A_KERNEL = """
import numpy as np
import streamsvm
from streamsvm.kernels import row_sq_norms
out = np.zeros(2)
row_sq_norms((np.array([0, 1, 2]), np.array([0, 1], np.int32), np.array([3.0, 4.0])), 0.0, out)
assert out.tolist() == [9.0, 16.0], out
import numba
print(numba.config.CACHE_DIR)
"""


def _cache_files(root: pathlib.Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in root.rglob("*.nb[ic]")}


def _run(code: str, **env) -> str:
    base = {k: v for k, v in os.environ.items()
            if k not in ("NUMBA_CACHE_DIR", "STREAMSVM_CACHE_DIR")}
    base["PYTHONPATH"] = os.pathsep.join([str(PACKAGE.parent)]
                                         + ([base["PYTHONPATH"]] if "PYTHONPATH" in base else []))
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def test_kernel_cache_goes_to_streamsvm_cache_dir_not_the_package(tmp_path):
    before = _cache_files(PACKAGE)
    assert _run(CALL_A_KERNEL, STREAMSVM_CACHE_DIR=str(tmp_path)) == str(
        tmp_path / f"src-{kernel_sources_key()}")
    assert list(tmp_path.rglob("*row_sq_norms*.nbi")), sorted(tmp_path.rglob("*"))
    assert list(tmp_path.rglob("*row_sq_norms*.nbc"))
    assert _cache_files(PACKAGE) == before


def test_users_numba_cache_dir_wins(tmp_path):
    mine = tmp_path / "numba"
    got = _run(CALL_A_KERNEL, NUMBA_CACHE_DIR=str(mine),
               STREAMSVM_CACHE_DIR=str(tmp_path / "streamsvm"))
    assert got == str(mine)
    assert list(mine.rglob("*.nbi")) and not (tmp_path / "streamsvm").exists()


def test_cache_dir_candidates(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    assert numba_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == str(
        tmp_path / "streamsvm" / "numba")
    assert numba_cache_dir({"STREAMSVM_CACHE_DIR": str(tmp_path / "c"),
                            "XDG_CACHE_HOME": str(tmp_path)}) == str(tmp_path / "c")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    fallback = numba_cache_dir({"STREAMSVM_CACHE_DIR": str(blocker / "sub")})
    assert fallback is not None and fallback.startswith(str(tmp_path / "tmp"))
    assert os.access(fallback, os.W_OK)


def test_cache_key_follows_every_kernel_source(tmp_path):
    """An edit of an inlined helper in one file must not leave kernels of another file
    compiled against the old helper: the key covers every file that defines kernels."""
    pkg = tmp_path / "pkg"
    (pkg / "kernels").mkdir(parents=True)
    helper = pkg / "kernels" / "_csr.py"
    helper.write_text("@kernel_inline\ndef row_dot(x):\n    return x\n")
    (pkg / "kernels" / "_dcd.py").write_text("@kernel\ndef sweep(x):\n    return row_dot(x)\n")
    cli = pkg / "cli.py"
    cli.write_text("def main():\n    pass\n")
    key = kernel_sources_key(pkg)
    cli.write_text("def main():\n    return 0\n")
    assert kernel_sources_key(pkg) == key        # no kernel there: no recompilation
    helper.write_text("@kernel_inline\ndef row_dot(x):\n    return 2 * x\n")
    assert kernel_sources_key(pkg) != key
