"""Checkpoints: bit-exact round trip, fallback past damaged checkpoints, pruning, crash safety."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import uuid

import fsspec
import numpy as np
import pytest

from streamsvm.checkpoint import CheckpointManager
from streamsvm.exceptions import CheckpointError, InvalidParameterError

LOGGER = "streamsvm.checkpoint"


@pytest.fixture(params=["local", "memory"])
def url(request, tmp_path):
    """A fresh checkpoint directory, local or on fsspec's in-memory filesystem."""
    if request.param == "local":
        yield str(tmp_path / "ckpt")
        return
    u = f"memory://ckpt-test-{uuid.uuid4().hex}"
    yield u
    fs, path = fsspec.core.url_to_fs(u)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def files(url):
    fs, path = fsspec.core.url_to_fs(url)
    fs.invalidate_cache(path)
    return sorted(p.rsplit("/", 1)[-1] for p in fs.ls(path, detail=False))


def payload_of(url, manifest):
    fs, path = fsspec.core.url_to_fs(url)
    return fs, f"{path}/{json.loads(fs.cat_file(f'{path}/{manifest}'))['payload']}"


def state(i):
    return {"w": np.full(5, float(i))}, {"pass": i}


def all_dtypes():
    rng = np.random.default_rng(0)
    arrays = {
        "w64": rng.standard_normal(7),
        "w32": rng.standard_normal((3, 4)).astype(np.float32),
        "i8": np.array([-128, 0, 127], np.int8),
        "i32": np.arange(-5, 5, dtype=np.int32).reshape(2, 5),
        "i64": np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max]),
        "u64": np.array([np.iinfo(np.uint64).max, 0, 12345], np.uint64),
        "mask": rng.random(13) < 0.5,
        "scalar": np.array(3.25),
        "scalar_i": np.array(7, np.int64),
        "empty": np.zeros(0),
        "empty2d": np.zeros((0, 4), np.int32),
        "big_endian": np.arange(3, dtype=">f8"),
        "strided": np.arange(20.0)[::3],
        "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        "nan_inf": np.array([np.nan, np.inf, -np.inf, -0.0]),
    }
    pcg = np.random.default_rng(42).bit_generator.state["state"]["state"]  # a 128-bit int
    arrays["rng_state"] = np.array([pcg & (2**64 - 1), pcg >> 64], np.uint64)
    return arrays


def test_round_trip_bit_exact(url):
    arrays = all_dtypes()
    meta = {"pass": 3, "cursor": [1, 0], "solver": "newton", "params": {"C": 0.5, "tol": 1e-6},
            "store": "s3://b/x.zarr", "done": False, "note": None}
    mgr = CheckpointManager(url)
    ckpt_id = mgr.save(arrays, meta)
    assert mgr.list() == [ckpt_id]
    loaded, meta2 = CheckpointManager(url).load_latest()
    assert meta2 == meta
    assert list(loaded) == list(arrays)
    for name, a in arrays.items():
        b = loaded[name]
        assert b.dtype == a.dtype and b.shape == a.shape, name
        assert a.tobytes() == b.tobytes(), name
        assert b.flags.writeable and b.flags.aligned, name
    loaded["w64"][0] = 1.0  # a resumed solver updates its state in place


def test_empty_dir_gives_none(url):
    mgr = CheckpointManager(url)
    assert mgr.list() == []
    assert mgr.load_latest() is None
    assert mgr.load_latest(expect={"solver": "dcd"}) is None


def test_latest_wins_and_keep_prunes(url):
    mgr = CheckpointManager(url, keep=2)
    ids = [mgr.save(*state(i)) for i in range(1, 6)]
    assert ids == [f"manifest-{i:08d}.json" for i in range(1, 6)]
    assert mgr.list() == [ids[4], ids[3]]
    assert len([f for f in files(url) if f.startswith("ckpt-")]) == 2
    arrays, meta = mgr.load_latest()
    assert meta == {"pass": 5} and np.all(arrays["w"] == 5.0)


def test_keep_one(url):
    mgr = CheckpointManager(url, keep=1)
    for i in range(3):
        mgr.save(*state(i))
    assert len(files(url)) == 2 and mgr.list() == ["manifest-00000003.json"]


@pytest.mark.parametrize("keep", [0, -1, 1.5, True, "2"])
def test_bad_keep(tmp_path, keep):
    with pytest.raises(InvalidParameterError, match="keep"):
        CheckpointManager(tmp_path, keep=keep)


def assert_falls_back(url, caplog, reason):
    mgr = CheckpointManager(url, keep=3)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        arrays, meta = mgr.load_latest()
    assert meta == {"pass": 1} and np.all(arrays["w"] == 1.0)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "manifest-00000002.json" in warnings[0].getMessage()
    assert reason in warnings[0].getMessage()


def damage_newest(url, how):
    """Two checkpoints (pass 1 and 2), the newest damaged ``how`` ("none": intact)."""
    mgr = CheckpointManager(url, keep=3)
    mgr.save(*state(1))
    newest = mgr.save(*state(2))
    fs, payload = payload_of(url, newest)
    data = bytearray(fs.cat_file(payload))
    if how == "flip":
        data[len(data) // 2] ^= 0x01
        fs.pipe_file(payload, bytes(data))
    elif how == "truncate":
        fs.pipe_file(payload, bytes(data[:-3]))
    elif how == "missing":
        fs.rm_file(payload)
    elif how == "garbage_manifest":
        fs.pipe_file(payload.rsplit("/", 1)[0] + "/" + newest, b'{"format": 1, "seq": 2, "pay')
    return mgr


@pytest.mark.parametrize("how, reason", [
    ("flip", "sha256"),
    ("truncate", "truncated"),
    ("missing", "missing"),
    ("garbage_manifest", "JSONDecodeError"),
])
def test_damaged_newest_falls_back(url, caplog, how, reason):
    damage_newest(url, how)
    assert_falls_back(url, caplog, reason)


@pytest.mark.parametrize("how", ["missing", "garbage_manifest"])
def test_invalid_checkpoint_is_pruned_by_next_save(url, how):
    mgr = damage_newest(url, how)
    mgr.keep = 2
    assert mgr.save(*state(3)) == "manifest-00000003.json"
    assert mgr.list() == ["manifest-00000003.json", "manifest-00000001.json"]
    assert len(files(url)) == 4
    assert mgr.load_latest()[1] == {"pass": 3}


def test_all_damaged_raises(url, caplog):
    mgr = CheckpointManager(url)
    mgr.save(*state(1))
    mgr.save(*state(2))
    for ckpt_id in mgr.list():
        fs, payload = payload_of(url, ckpt_id)
        fs.pipe_file(payload, b"\0" * fs.size(payload))
    with caplog.at_level(logging.WARNING, logger=LOGGER), \
            pytest.raises(CheckpointError, match="all 2 checkpoints under .* are damaged") as exc:
        mgr.load_latest()
    assert all(f"manifest-0000000{i}.json" in str(exc.value) for i in (1, 2))
    assert len(caplog.records) == 2


def test_unrelated_files_are_ignored(url):
    mgr = CheckpointManager(url)
    fs, path = fsspec.core.url_to_fs(url)
    fs.pipe_file(f"{path}/README.txt", b"hello")
    fs.pipe_file(f"{path}/manifest-latest.json", b"{}")
    mgr.save(*state(1))
    assert mgr.load_latest()[1] == {"pass": 1}
    assert "README.txt" in files(url) and "manifest-latest.json" in files(url)


def test_expect_mismatch_names_the_key(url):
    mgr = CheckpointManager(url)
    meta = {"store": "s3://bucket/a.zarr", "solver": "newton", "C": 1.0, "params": {"tol": 1e-3}}
    mgr.save(*state(1)[:1], meta)
    assert mgr.load_latest(expect={"solver": "newton", "C": 1.0})[1] == meta
    assert mgr.load_latest(expect={"params": {"tol": 1e-3}}) is not None
    with pytest.raises(CheckpointError, match=r"checkpoint manifest-00000001\.json under .* "
                                              r"was written by a run with C=1\.0; this run "
                                              r"has C=2\.0 — resume with the same"):
        mgr.load_latest(expect={"solver": "newton", "C": 2.0})
    with pytest.raises(CheckpointError, match=r"store='s3://bucket/a\.zarr'; this run has "
                                              r"store='s3://b/other\.zarr'"):
        mgr.load_latest(expect={"store": "s3://b/other.zarr"})
    with pytest.raises(CheckpointError, match=r"with seed=<missing>; this run has seed=0 "):
        mgr.load_latest(expect={"seed": 0})
    # nested dicts: every differing key, named inside its group, missing ones included
    with pytest.raises(CheckpointError, match=r"with C=1\.0, tol=0\.001, x\.y=<missing>; "
                                              r"this run has C=2\.0, tol=0\.01, x\.y=1 "):
        mgr.load_latest(expect={"C": 2.0, "params": {"tol": 1e-2, "x": {"y": 1}}})
    mgr.save(*state(2)[:1], {"C": 1.0, "cursor": [3, 0]})
    assert mgr.load_latest(expect={"C": 1, "cursor": (3, 0)}) is not None  # as JSON compares


@pytest.mark.parametrize("meta, where", [
    ({"C": np.float32(1.0)}, "meta['C']"),
    ({"pass": np.int64(3)}, "meta['pass']"),
    ({"shape": (2, 3)}, "meta['shape']"),
    ({"params": {"C": 1.0, "sizes": [1, {2}]}}, "meta['params']['sizes'][1]"),
    ({"map": {1: "a"}}, "meta['map']"),
    ({"w": np.zeros(2)}, "meta['w']"),
])
def test_non_json_meta_rejected_before_writing(url, meta, where):
    mgr = CheckpointManager(url)
    with pytest.raises(TypeError) as exc:
        mgr.save({"w": np.zeros(3)}, meta)
    assert where in str(exc.value)
    assert files(url) == []


def test_bad_arrays_rejected_before_writing(url):
    mgr = CheckpointManager(url)
    with pytest.raises(TypeError, match="'objs'"):
        mgr.save({"w": np.zeros(3), "objs": np.array([None, 1], dtype=object)}, {})
    with pytest.raises(TypeError, match="must be a dict"):
        mgr.save({"w": np.zeros(3)}, [("pass", 1)])
    assert files(url) == []


def test_crash_between_payload_and_manifest(url, monkeypatch):
    mgr = CheckpointManager(url)
    mgr.save(*state(1))
    real_write = CheckpointManager._write

    def crash_on_manifest(self, name, pieces, **kw):
        if name.startswith("manifest-"):
            raise KeyboardInterrupt("killed")
        return real_write(self, name, pieces, **kw)

    monkeypatch.setattr(CheckpointManager, "_write", crash_on_manifest)
    with pytest.raises(KeyboardInterrupt):
        mgr.save(*state(2))
    monkeypatch.undo()
    orphans = [f for f in files(url) if f.startswith("ckpt-00000002-")]
    assert len(orphans) == 1
    assert CheckpointManager(url).load_latest()[1] == {"pass": 1}
    assert CheckpointManager(url).save(*state(3)) == "manifest-00000003.json"
    assert orphans[0] not in files(url)
    assert len(files(url)) == 4  # checkpoints 1 and 3


def test_crash_mid_local_write_leaves_partial(tmp_path):
    url = str(tmp_path / "ckpt")
    mgr = CheckpointManager(url)
    mgr.save(*state(1))
    (tmp_path / "ckpt" / "ckpt-00000002-0123abcd.bin.partial").write_bytes(b"half a payl")
    (tmp_path / "ckpt" / "manifest-00000002.json.partial").write_bytes(b'{"seq"')
    assert mgr.list() == ["manifest-00000001.json"]
    assert mgr.load_latest()[1] == {"pass": 1}
    assert mgr.save(*state(3)) == "manifest-00000003.json"
    assert not [f for f in files(url) if f.endswith(".partial")]
    assert mgr.list() == ["manifest-00000003.json", "manifest-00000001.json"]


def test_manifest_contents(tmp_path):
    mgr = CheckpointManager(tmp_path / "c")
    ckpt_id = mgr.save({"w": np.ones(3, np.float32), "t": np.array(2)}, {"pass": 1})
    man = json.loads((tmp_path / "c" / ckpt_id).read_text())
    payload = tmp_path / "c" / man["payload"]
    assert man["format"] == 2 and man["seq"] == 1 and man["meta"] == {"pass": 1}
    assert man["size"] == payload.stat().st_size
    assert [(a["name"], a["dtype"], a["shape"]) for a in man["arrays"]] == [
        ("w", "<f4", [3]), ("t", "<i8", [])]
    assert all(a["offset"] % 64 == 0 for a in man["arrays"])
    assert "created" in man and len(man["sha256"]) == 64
    body = {k: v for k, v in man.items() if k != "manifest_sha256"}
    assert man["manifest_sha256"] == hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def test_file_url(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}/c")
    mgr.save(*state(1))
    assert (tmp_path / "c" / "manifest-00000001.json").exists()
    assert mgr.load_latest()[1] == {"pass": 1}


def _enospc(*a, **k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_full_disk_local(tmp_path, monkeypatch):
    """ENOSPC mid-payload: CheckpointError naming the directory, the reason and the last
    good checkpoint; the .partial file removed, the previous checkpoints untouched."""
    url = str(tmp_path / "ckpt")
    mgr = CheckpointManager(url)
    mgr.save(*state(1))
    mgr.save(*state(2))
    before = {f: (tmp_path / "ckpt" / f).read_bytes() for f in files(url)}
    real_open, partials = open, []

    def spy_open(path, *a, **k):         # records the .partial file the failed save began
        if str(path).endswith(".partial"):
            partials.append(path)
        return real_open(path, *a, **k)
    monkeypatch.setattr("builtins.open", spy_open)
    monkeypatch.setattr(os, "fsync", _enospc)
    with pytest.raises(CheckpointError) as exc:
        mgr.save(*state(3))
    monkeypatch.undo()
    msg = str(exc.value)
    assert isinstance(exc.value, ValueError)
    assert f"cannot write checkpoint manifest-00000003.json under {url}: No space left" in msg
    assert "the last good checkpoint is manifest-00000002.json" in msg and "--resume" in msg
    assert isinstance(exc.value.__cause__, OSError)
    assert partials and not os.path.exists(partials[0])
    assert {f: (tmp_path / "ckpt" / f).read_bytes() for f in files(url)} == before
    assert mgr.load_latest()[1] == {"pass": 2}
    assert mgr.save(*state(3)) == "manifest-00000003.json"


def test_full_disk_on_manifest(url, monkeypatch):
    """The manifest write fails after the payload was written: the payload is removed."""
    mgr = CheckpointManager(url)
    before = files(url)
    real_write = CheckpointManager._write

    def fail_manifest(self, name, pieces, **kw):
        if name.startswith("manifest-"):
            _enospc()
        return real_write(self, name, pieces, **kw)
    monkeypatch.setattr(CheckpointManager, "_write", fail_manifest)
    with pytest.raises(CheckpointError, match=r"manifest-00000001\.json under .*No space left "
                                              r"on device.*no checkpoint was written before"):
        mgr.save(*state(1))
    assert files(url) == before


# -- the manifest's own checksum and field checks (issue 33, item 2) ----------------------

def _reseal(man: dict) -> bytes:
    """``man`` with a valid ``manifest_sha256`` again (what a careful forger would write)."""
    body = {k: v for k, v in man.items() if k != "manifest_sha256"}
    man = dict(body, manifest_sha256=hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest())
    return json.dumps(man, indent=1).encode()


def test_every_bit_flip_of_a_manifest_is_caught(tmp_path):
    """Each of the manifest's single-bit flips either fails its checks or leaves its
    content unchanged (none loads with other content, none raises anything but
    ``_Damaged``)."""
    from streamsvm.checkpoint import _Damaged, parse_manifest
    mgr = CheckpointManager(tmp_path / "c")
    name = mgr.save({"w": np.arange(3.0), "mask": np.ones(2, bool)},
                    {"pass": 3, "driver": {"done": False, "seconds": 1.5}, "kinds": ["a"]})
    data = (tmp_path / "c" / name).read_bytes()
    original = parse_manifest(data, name)
    changed = 0
    for i in range(len(data)):
        for bit in range(8):
            flipped = bytearray(data)
            flipped[i] ^= 1 << bit
            try:
                man = parse_manifest(bytes(flipped), name)
            except _Damaged:
                continue
            changed += man != original
    assert changed == 0
    assert len(data) * 8 > 4000                   # the loop did cover the whole manifest


@pytest.mark.parametrize("edit, field", [
    (lambda m: m["arrays"][0].update(dtype="float64"), "arrays[0] ('w').dtype"),
    (lambda m: m["arrays"][0].update(dtype="<f9"), "arrays[0] ('w').dtype"),
    (lambda m: m["arrays"][0].update(dtype="[('a', '<f8')]"), "arrays[0] ('w').dtype"),
    (lambda m: m["arrays"][0].update(dtype="__import__('os')"), "arrays[0] ('w').dtype"),
    (lambda m: m["arrays"][0].update(dtype="|O"), "arrays[0] ('w').dtype"),
    (lambda m: m["arrays"][0].update(dtype="<U5"), "arrays[0] ('w').dtype"),
    (lambda m: m["arrays"][0].update(dtype=8), "arrays[0] ('w').dtype"),
    (lambda m: m["arrays"][0].update(shape=[-1]), "arrays[0] ('w').shape"),
    (lambda m: m["arrays"][0].update(shape=[5.0]), "arrays[0] ('w').shape"),
    (lambda m: m["arrays"][0].update(shape=5), "arrays[0] ('w').shape"),
    (lambda m: m["arrays"][0].update(shape=[10**6]), "arrays[0] ('w').offset"),
    (lambda m: m["arrays"][0].update(offset=8), "arrays[0] ('w').offset"),
    (lambda m: m["arrays"][0].update(offset="0"), "arrays[0] ('w').offset"),
    (lambda m: m["arrays"][0].pop("offset"), "arrays[0] ('w').offset"),
    (lambda m: m["arrays"][0].pop("name"), "arrays[0]"),
    (lambda m: m["arrays"].append(dict(m["arrays"][0])), "arrays[1]"),
    (lambda m: m.update(arrays={"w": 1}), "arrays"),
    (lambda m: m.pop("arrays"), "arrays"),
    (lambda m: m.update(size=-1), "size"),
    (lambda m: m.update(size=str(m["size"])), "size"),
    (lambda m: m.update(size=True), "size"),
    (lambda m: m.pop("size"), "size"),
    (lambda m: m.update(sha256="x" * 64), "sha256"),
    (lambda m: m.pop("sha256"), "sha256"),
    (lambda m: m.update(seq=1), "seq"),
    (lambda m: m.update(seq="2"), "seq"),
    (lambda m: m.update(payload="../../etc/passwd"), "payload"),
    (lambda m: m.update(payload=m["payload"].replace("ckpt-00000002", "ckpt-00000001")),
     "payload"),
    (lambda m: m.update(meta=[["pass", 2]]), "meta"),
    (lambda m: m.pop("meta"), "meta"),
])
def test_resealed_manifest_with_a_bad_field_is_damaged(url, caplog, edit, field):
    """A manifest re-sealed (valid checksum) whose fields have the wrong type or layout is
    damaged, named by its field; the previous checkpoint is used. Nothing is evaluated:
    dtypes are matched against a pattern before numpy sees them."""
    mgr = damage_newest(url, "none")
    fs, path = fsspec.core.url_to_fs(url)
    newest = f"{path}/manifest-00000002.json"
    man = json.loads(fs.cat_file(newest))
    edit(man)
    fs.pipe_file(newest, _reseal(man))
    assert_falls_back(url, caplog, f"field {field} ")
    assert mgr.list()[0] == "manifest-00000002.json"


@pytest.mark.parametrize("how, reason", [
    (lambda m: m["meta"].update({"pass": 12}), "fails its checksum"),
    (lambda m: m["arrays"][0].update(dtype="<i8"), "fails its checksum"),
    (lambda m: m.pop("manifest_sha256"), "fails its checksum"),
    (lambda m: m.update(manifest_sha256=None), "fails its checksum"),
    (lambda m: m.update(format=1), "format 1 manifests carry no checksum"),
])
def test_edited_manifest_fails_its_checksum(url, caplog, how, reason):
    damage_newest(url, "none")
    fs, path = fsspec.core.url_to_fs(url)
    newest = f"{path}/manifest-00000002.json"
    man = json.loads(fs.cat_file(newest))
    how(man)
    fs.pipe_file(newest, json.dumps(man).encode())
    assert_falls_back(url, caplog, reason)


def test_payload_size_is_checked_before_allocating(url, caplog, monkeypatch):
    """A re-sealed manifest claiming a huge payload is damaged without allocating it."""
    damage_newest(url, "none")
    fs, path = fsspec.core.url_to_fs(url)
    newest = f"{path}/manifest-00000002.json"
    man = json.loads(fs.cat_file(newest))
    man["size"], man["arrays"][0]["shape"] = 1 << 50, [1 << 47]    # consistent, huge
    fs.pipe_file(newest, _reseal(man))
    real_empty = np.empty

    def small_empty(shape, *a, **k):
        assert np.prod(shape) < 1 << 30, "allocated what the manifest claims"
        return real_empty(shape, *a, **k)
    monkeypatch.setattr(np, "empty", small_empty)
    assert_falls_back(url, caplog, "truncated")


def test_damaged_manifests_only_raise_checkpoint_error(url, caplog):
    damage_newest(url, "none")
    fs, path = fsspec.core.url_to_fs(url)
    for name in ("manifest-00000001.json", "manifest-00000002.json"):
        man = json.loads(fs.cat_file(f"{path}/{name}"))
        man["arrays"][0]["dtype"] = "<f3"
        fs.pipe_file(f"{path}/{name}", _reseal(man))
    with caplog.at_level(logging.WARNING, logger=LOGGER), \
            pytest.raises(CheckpointError, match=r"all 2 checkpoints .* are damaged: "
                                                 r"manifest-00000002\.json: manifest "
                                                 r"manifest-00000002\.json: field arrays\[0\] "
                                                 r"\('w'\)\.dtype is '<f3'"):
        CheckpointManager(url).load_latest()
