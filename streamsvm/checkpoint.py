"""Atomic, checksummed solver-state checkpoints on any fsspec URL (DESIGN.md §6).

A checkpoint is a flat dict of named numpy arrays plus a JSON-able ``meta`` dict. Under the
checkpoint directory each save writes two files, in this order:

1. the payload ``ckpt-<seq:08d>-<uuid8>.bin``: the arrays' raw C-order bytes, each starting on
   a 64-byte boundary (no pickle, no compression; loading is one read and zero copies);
2. the manifest ``manifest-<seq:08d>.json``: format version, seq, payload name, byte size and
   sha256, each array's name/dtype/shape/offset, ``meta``, the creation time, and
   ``manifest_sha256``: the sha256 of the manifest's canonical JSON (sorted keys, no
   spaces) without that field.

Crash safety. The payload always goes under a fresh name, so no write ever touches a file a
reader may trust. The manifest is written last, and locally both files go to ``<name>.partial``
first and are then ``os.replace``-d (after ``fsync``); on object stores a PUT is all-or-nothing.
Readers trust only manifests that parse, pass their own checksum, have every field of the
right type and shape (array dtypes are parsed from a strict pattern, never evaluated), and
whose payload has the recorded size and sha256. A crash therefore leaves, at worst, an orphan
payload or ``.partial`` file that no manifest names: ``load_latest`` never sees it and the
next ``save`` deletes it. Any damaged checkpoint (torn or bit-flipped manifest, missing,
truncated or corrupted payload) is logged and the previous one is used; when none is valid,
:class:`~streamsvm.exceptions.CheckpointError`. Manifests of format 1 (no checksum) are not
read. The checksum finds damage and hand edits, not a forger who re-seals it; what the rest of
a checkpoint contradicts (driver, scheduler and solver fields) is checked on resume by the
driver. One writer per directory is assumed: ``train`` holds an
:class:`~streamsvm.io.OutputLock` on the directory (``.streamsvm.lock`` inside it) while it runs.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import re
import reprlib
import uuid

import numpy as np

from .exceptions import CheckpointError, InvalidParameterError
from .io import join_url, url_to_fs

__all__ = ["CheckpointManager", "FORMAT_VERSION", "differences", "parse_manifest"]

FORMAT_VERSION = 2      # 2: manifest_sha256 (format 1 manifests had no checksum)
_ALIGN = 64
_KINDS = "biufc"  # bool, signed/unsigned int, float, complex
_FILE = re.compile(r"(?:manifest-(\d+)\.json|ckpt-(\d+)-[0-9a-f]{8}\.bin)(\.partial)?")
_PAYLOAD = re.compile(r"ckpt-(\d+)-[0-9a-f]{8}\.bin")
_DTYPE = re.compile(r"[<>|][biufc][1-9][0-9]?")   # what ndarray.dtype.str gives for _KINDS
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CHECKSUM = "manifest_sha256"
logger = logging.getLogger(__name__)


class _Damaged(ValueError):
    """A checkpoint that cannot be trusted; the message says why."""


class CheckpointManager:
    """Save and restore solver states under one directory URL.

    Parameters
    ----------
    url : str or path-like
        Checkpoint directory (local path or fsspec URL such as ``s3://bucket/run/ckpt``);
        created if missing.
    storage_options : dict, optional
        Passed to fsspec.
    keep : int, default=2
        Number of newest valid checkpoints kept after each save.

    Examples
    --------
    >>> import numpy as np
    >>> mgr = CheckpointManager("memory://doctest-ckpt", keep=1)
    >>> mgr.save({"w": np.arange(3.0)}, {"pass": 4})
    'manifest-00000001.json'
    >>> arrays, meta = mgr.load_latest(expect={"pass": 4})
    >>> arrays["w"], meta["pass"]
    (array([0., 1., 2.]), 4)
    """

    def __init__(self, url, *, storage_options=None, keep=2):
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise InvalidParameterError(f"The 'keep' parameter of CheckpointManager must be an "
                                        f"int in the range [1, inf). Got {keep!r} instead.")
        from fsspec.implementations.local import LocalFileSystem
        self.url, self.keep = os.fspath(url), keep
        self._fs, self._dir = url_to_fs(self.url, storage_options)
        self._local = isinstance(self._fs, LocalFileSystem)
        self._fs.makedirs(self._dir, exist_ok=True)

    def save(self, arrays, meta) -> str:
        """Write a new checkpoint, then prune old ones; return its id (the manifest name).

        Parameters
        ----------
        arrays : dict of str to ndarray
            Numeric or bool arrays of any shape (0-d and empty included); restored bit for bit.
        meta : dict
            JSON-able values only (str, int, float, bool, None, lists, str-keyed dicts), so
            that they come back equal; anything else raises ``TypeError`` before any write.
        """
        if not isinstance(meta, dict):
            raise TypeError(f"meta must be a dict, got {type(meta).__name__}")
        for key, value in meta.items():
            _check_json(value, f"meta[{key!r}]")
        specs, pieces, pos = [], [], 0
        for name, a in arrays.items():
            a = np.asarray(a)
            if not isinstance(name, str) or a.dtype.kind not in _KINDS:
                raise TypeError(f"checkpoint array {name!r} must have a str name and a bool or "
                                f"numeric dtype, got dtype {a.dtype}")
            off = -(-pos // _ALIGN) * _ALIGN
            pieces.append(bytes(off - pos))
            flat = (a if a.flags.c_contiguous else a.copy(order="C")).reshape(-1).view(np.uint8)
            pieces.append(memoryview(flat))
            specs.append({"name": name, "dtype": a.dtype.str, "shape": list(a.shape),
                          "offset": off})
            pos = off + a.nbytes
        seq = 1 + max((f[0] for f in self._scan()), default=0)
        payload = f"ckpt-{seq:08d}-{uuid.uuid4().hex[:8]}.bin"
        name = f"manifest-{seq:08d}.json"
        try:
            digest = self._write(payload, pieces)
            manifest = {"format": FORMAT_VERSION, "seq": seq, "payload": payload, "size": pos,
                        "sha256": digest, "arrays": specs, "meta": meta,
                        "created": datetime.datetime.now(datetime.timezone.utc).isoformat()}
            manifest[_CHECKSUM] = _manifest_digest(manifest)
            self._write(name, [json.dumps(manifest, indent=1).encode()], put=True)
        except OSError as exc:    # e.g. a full disk: drop what this save began, keep the rest
            for leftover in (name, name + ".partial", payload, payload + ".partial"):
                try:
                    self._rm(leftover)
                except OSError:
                    pass
            last = self.list()
            raise CheckpointError(
                f"cannot write checkpoint {name} under {self.url}: "
                f"{exc.strerror or exc} (nothing of it is kept); " +
                (f"the last good checkpoint is {last[0]}: continue from it with --resume "
                 f"(resume=True) once the problem is fixed" if last else
                 "no checkpoint was written before")) from exc
        logger.info("checkpoint %s written under %s (%d bytes)", name, self.url, pos)
        self._prune()
        return name

    def load_latest(self, *, expect=None):
        """Arrays and meta of the newest valid checkpoint, or None if there is none.

        Parameters
        ----------
        expect : dict, optional
            Values ``meta`` must hold (e.g. store identity, solver name, C); a tuple here
            matches the list JSON gives back.

        Returns
        -------
        (dict of str to ndarray, dict) or None
            Writable arrays (views of one aligned buffer) and the meta dict.

        Raises
        ------
        CheckpointError
            If the newest valid checkpoint does not match ``expect``, or if checkpoints
            exist but none is valid.
        """
        names, problems = self.list(), []
        for name in names:
            try:
                manifest = self._manifest(name)
                arrays = self._payload(manifest)
            except (OSError, ValueError) as exc:
                reason = str(exc) if isinstance(exc, _Damaged) else f"{type(exc).__name__} {exc}"
                logger.warning("checkpoint %s under %s is damaged, skipped: %s",
                               name, self.url, reason)
                problems.append(f"{name}: {reason}")
                continue
            meta = manifest["meta"]
            diffs = differences(meta, expect or {})
            if diffs:
                raise CheckpointError(f"checkpoint {name} under {self.url} was written by a run "
                                      f"with {diffs} — resume with the same data and "
                                      f"parameters or use another --checkpoint directory")
            logger.info("resuming from checkpoint %s under %s", name, self.url)
            return arrays, meta
        if names:
            raise CheckpointError(f"all {len(names)} checkpoints under {self.url} are damaged: "
                                  + "; ".join(problems))
        return None

    def newest(self):
        """``(id, meta)`` of the newest checkpoint whose manifest passes its checks (its
        payload is not read), or None."""
        for name in self.list():
            try:
                return name, self._manifest(name)["meta"]
            except (OSError, ValueError):
                continue
        return None

    def clear(self) -> int:
        """Delete every checkpoint under the directory (manifests first, then payloads and
        ``.partial`` files; other files are left alone); return the checkpoints deleted."""
        files = sorted(self._scan(), key=lambda f: f[2] != "manifest")
        for _, name, _, _ in files:
            self._rm(name)
        return sum(f[2] == "manifest" for f in files)

    def list(self) -> list[str]:
        """Ids (manifest file names) of the checkpoints present, newest first."""
        return [n for _, n, kind, _ in sorted(self._scan(), reverse=True) if kind == "manifest"]

    def _scan(self):
        """``(seq, name, kind, size)`` of our files; kind: 'manifest', 'payload' or 'partial'."""
        self._fs.invalidate_cache(self._dir)
        try:
            infos = self._fs.ls(self._dir, detail=True)
        except FileNotFoundError:  # empty prefix on an object store
            return []
        out = []
        for info in infos:
            name = info["name"].rstrip("/").rsplit("/", 1)[-1]
            if m := _FILE.fullmatch(name):
                kind = "partial" if m[3] else "manifest" if m[1] else "payload"
                out.append((int(m[1] or m[2]), name, kind, info.get("size")))
        return out

    def _write(self, name, pieces, *, put=False) -> str:
        """Write byte pieces to ``name`` atomically; return their sha256 (hex)."""
        h, path = hashlib.sha256(), join_url(self._dir, name)
        if put and not self._local:  # the small manifest: one all-or-nothing PUT
            h.update(pieces[0])
            self._fs.pipe_file(path, pieces[0])
            return h.hexdigest()
        # object stores show a streamed key only once complete; locally we rename .partial
        with open(path + ".partial", "wb") if self._local else self._fs.open(path, "wb") as f:
            for p in pieces:
                h.update(p)
                f.write(p)
            if self._local:
                f.flush()
                os.fsync(f.fileno())
        if self._local:
            os.replace(path + ".partial", path)
            if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable
                fd = os.open(self._dir, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        return h.hexdigest()

    def _manifest(self, name) -> dict:
        """Manifest ``name``, checked (:func:`parse_manifest`); raises ``_Damaged``."""
        try:
            data = self._fs.cat_file(join_url(self._dir, name))
        except FileNotFoundError:
            raise _Damaged(f"manifest {name} is missing") from None
        return parse_manifest(data, name)

    def _payload(self, man) -> dict:
        """The arrays of a (checked) manifest's payload, after size and sha256 checks."""
        size, name = man["size"], man["payload"]
        path = join_url(self._dir, name)
        try:
            actual = self._fs.size(path)
            f = self._fs.open(path, "rb")
        except FileNotFoundError:
            raise _Damaged(f"payload {name} is missing") from None
        if actual != size:        # before allocating what the manifest claims
            f.close()
            raise _Damaged(f"payload {name} is truncated: {actual} of {size} bytes"
                           if actual < size else
                           f"payload {name} is longer than the {size} bytes recorded")
        buf = np.empty(size, np.uint8)
        view, got = memoryview(buf), 0
        with f:
            while got < size and (k := f.readinto(view[got:])):
                got += k
            if got < size:
                raise _Damaged(f"payload {name} is truncated: {got} of {size} bytes")
            if f.read(1):
                raise _Damaged(f"payload {name} is longer than the {size} bytes recorded")
        if hashlib.sha256(view).hexdigest() != man["sha256"]:
            raise _Damaged(f"payload {name} fails its sha256 check")
        arrays = {}
        for spec in man["arrays"]:
            dtype, shape, off = np.dtype(spec["dtype"]), tuple(spec["shape"]), spec["offset"]
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            arrays[spec["name"]] = buf[off:off + nbytes].view(dtype).reshape(shape)
        return arrays

    def _prune(self):
        """Keep the newest ``keep`` valid checkpoints; delete the rest and orphan files.

        "Valid" here is the cheap test (the manifest passes its checksum and checks, its
        payload is present with the recorded size); payload checksums are verified only on
        load, so a save never re-reads old payloads.
        """
        files = self._scan()
        sizes = {n: size for _, n, k, size in files if k == "payload"}
        manifests = sorted(((s, n) for s, n, k, _ in files if k == "manifest"), reverse=True)
        newest, kept = manifests[0][0], set()
        for _, name in manifests:
            try:
                man = self._manifest(name)
                valid = sizes.get(man["payload"]) == man["size"]
            except (OSError, ValueError):
                valid = False
            if valid and len(kept) < self.keep:
                kept.add(man["payload"])
            else:
                self._rm(name)  # manifest before its payload
        for seq, name, kind, _ in files:
            if kind != "manifest" and name not in kept and seq <= newest:
                self._rm(name)

    def _rm(self, name):
        try:
            self._fs.rm_file(join_url(self._dir, name))
        except FileNotFoundError:
            pass


_MISSING = object()


def _canonical(obj) -> bytes:
    """The bytes a manifest's checksum covers: sorted keys, no spaces, ASCII."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _manifest_digest(manifest: dict) -> str:
    """sha256 (hex) of ``manifest``'s canonical JSON without its own checksum field."""
    return hashlib.sha256(_canonical({k: v for k, v in manifest.items()
                                      if k != _CHECKSUM})).hexdigest()


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _dtype(text):
    """The numpy dtype ``text`` spells exactly as ``ndarray.dtype.str`` does, else None
    (the string is matched against a pattern first: numpy never parses anything else)."""
    if not isinstance(text, str) or not _DTYPE.fullmatch(text):
        return None
    try:
        dtype = np.dtype(text)
    except TypeError:               # e.g. '<f3'
        return None
    return dtype if dtype.str == text and dtype.kind in _KINDS else None


def parse_manifest(data: bytes, name: str) -> dict:
    """The manifest in ``data`` (the file ``name``), after every check a reader relies on.

    It must parse as a JSON object of this format, match its ``manifest_sha256``, and have
    every field of the right type: ``seq`` (the name's), ``payload`` (a payload name of that
    seq), ``size``, ``sha256``, ``arrays`` (unique names, dtypes as ``ndarray.dtype.str``
    gives them, non-negative shapes, laid out one after another at aligned offsets exactly
    as :meth:`CheckpointManager.save` writes them, ending at ``size``) and ``meta``.

    Raises
    ------
    ValueError
        (``_Damaged``) naming what is wrong.
    """
    try:
        man = json.loads(data)
    except ValueError as exc:          # JSONDecodeError, UnicodeDecodeError
        raise _Damaged(f"manifest {name} does not parse: {type(exc).__name__} {exc}") from None
    except RecursionError:
        raise _Damaged(f"manifest {name} does not parse: nested too deeply") from None
    if not isinstance(man, dict):
        raise _Damaged(f"manifest {name} is not a JSON object")
    if man.get("format") != FORMAT_VERSION:
        raise _Damaged(f"manifest {name} has format {reprlib.repr(man.get('format'))}; this "
                       f"streamsvm reads format {FORMAT_VERSION}" +
                       (" (format 1 manifests carry no checksum and are not trusted)"
                        if man.get("format") == 1 else ""))
    if not isinstance(man.get(_CHECKSUM), str) or man[_CHECKSUM] != _manifest_digest(man):
        raise _Damaged(f"manifest {name} fails its checksum ({_CHECKSUM})")

    def bad(field, why):
        return _Damaged(f"manifest {name}: field {field} {why}")

    m = _FILE.fullmatch(name)
    seq = man.get("seq")
    if not _int(seq) or (m is not None and m[1] is not None and seq != int(m[1])):
        raise bad("seq", f"is {reprlib.repr(seq)}, not the file name's sequence number")
    payload = man.get("payload")
    pm = _PAYLOAD.fullmatch(payload) if isinstance(payload, str) else None
    if pm is None or int(pm[1]) != seq:
        raise bad("payload", f"is {reprlib.repr(payload)}, not a payload name of checkpoint "
                             f"{seq}")
    size = man.get("size")
    if not _int(size) or size < 0:
        raise bad("size", f"is {reprlib.repr(size)}, not a byte count")
    if not isinstance(man.get("sha256"), str) or not _SHA256.fullmatch(man["sha256"]):
        raise bad("sha256", "is not a sha256 hex digest")
    if not isinstance(man.get("meta"), dict):
        raise bad("meta", "is not a JSON object")
    specs = man.get("arrays")
    if not isinstance(specs, list):
        raise bad("arrays", "is not a list")
    names, end = set(), 0
    for i, spec in enumerate(specs):
        where = f"arrays[{i}]"
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) \
                or spec["name"] in names:
            raise bad(where, "is not an object with a name of its own")
        names.add(spec["name"])
        where = f"arrays[{i}] ({spec['name']!r})"
        dt = spec.get("dtype")
        if _dtype(dt) is None:
            raise bad(where + ".dtype", f"is {reprlib.repr(dt)}, not a bool or numeric dtype")
        shape = spec.get("shape")
        if not isinstance(shape, list) or not all(_int(n) and n >= 0 for n in shape):
            raise bad(where + ".shape", f"is {reprlib.repr(shape)}, not a list of sizes")
        off, nbytes = spec.get("offset"), np.dtype(dt).itemsize
        for n in shape:
            nbytes *= n
        want = -(-end // _ALIGN) * _ALIGN        # save() lays the arrays out in order
        if not _int(off) or off != want or off + nbytes > size:
            raise bad(where + ".offset", f"is {reprlib.repr(off)}: the array ({nbytes} bytes) "
                                         f"does not follow the previous one at offset {want} "
                                         f"inside the {size}-byte payload")
        end = off + nbytes
    if end != size:
        raise bad("size", f"is {size}, but the arrays end at byte {end}")
    return man


def differences(meta: dict, expect: dict) -> str:
    """Where ``meta`` differs from ``expect`` (compared as JSON gives them back, nested
    dicts named inside their group): ``"C=1.0, seed=0; this run has C=2.0, seed=3"``, or
    ``""`` when they agree."""
    diffs = []
    for key, want in expect.items():
        want = json.loads(json.dumps(want))
        found = meta.get(key, _MISSING)
        if isinstance(want, dict) and isinstance(found, dict):
            diffs += _differences(found, want, ())
        elif found != want:
            diffs.append(((key,), found, want))
    if not diffs:
        return ""
    was = ", ".join(f"{'.'.join(k)}={_show(f)}" for k, f, _ in diffs)
    now = ", ".join(f"{'.'.join(k)}={_show(w)}" for k, _, w in diffs)
    return f"{was}; this run has {now}"


def _differences(found: dict, want: dict, path: tuple) -> list:
    """``(path, found, wanted)`` for every key, at any depth, where two dicts differ."""
    out = []
    for key in list(want) + [k for k in found if k not in want]:
        f, w = found.get(key, _MISSING), want.get(key, _MISSING)
        if isinstance(f, dict) and (isinstance(w, dict) or w is _MISSING) or \
                isinstance(w, dict) and f is _MISSING:
            out += _differences({} if f is _MISSING else f, {} if w is _MISSING else w,
                                path + (key,))
        elif f != w:
            out.append((path + (key,), f, w))
    return out


def _show(value) -> str:
    return "<missing>" if value is _MISSING else repr(value)


def _check_json(value, where):
    """Raise TypeError unless ``value`` survives a JSON round trip unchanged."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            _check_json(v, f"{where}[{i}]")
    elif isinstance(value, dict) and all(isinstance(k, str) for k in value):
        for k, v in value.items():
            _check_json(v, f"{where}[{k!r}]")
    else:
        raise TypeError(f"{where} = {reprlib.repr(value)} ({type(value).__name__}) is not "
                        f"JSON-able; checkpoint meta may hold only str, int, float, bool, None, "
                        f"lists and str-keyed dicts")
