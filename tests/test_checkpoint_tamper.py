"""Resuming ``streamsvm train`` from a damaged or tampered newest checkpoint (issue 33,
item 2): the resumed run falls back to the previous checkpoint and writes the uninterrupted
run's model byte for byte, or stops with exit 2 naming the field; never exit 0 with another
model, never a traceback."""

from __future__ import annotations

import hashlib
import json
import random
import shutil

import pytest

from streamsvm._train import train
from streamsvm.checkpoint import _Damaged, parse_manifest
from streamsvm.cli import main
from streamsvm.io import convert

from .io.helpers import write_svm

ARGS = ["-C", "0.1", "-q", "--checkpoint-every-passes", "1"]


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """``(store, reference model bytes, checkpoint directory)``: the checkpoints of a run
    stopped after its fourth iteration (a checkpoint each pass, the last two kept)."""
    d = tmp_path_factory.mktemp("tamper")
    write_svm(d / "s.svm")
    store = d / "s.zarr"
    convert(str(d / "s.svm"), str(store), chunk_rows=500)
    ref = d / "ref.json"
    assert main(["train", str(store), "-o", str(ref), *ARGS, "--checkpoint",
                 str(d / "ck_ref")]) == 0
    calls = []

    def stop():
        calls.append(1)
        return len(calls) >= 4
    with pytest.raises(KeyboardInterrupt):
        train(str(store), C=0.1, checkpoint=str(d / "ck"), checkpoint_every=1.0,
              should_stop=stop)
    names = sorted(p.name for p in (d / "ck").glob("manifest-*.json"))
    assert len(names) == 2
    return store, ref.read_bytes(), d / "ck"


def _reseal(man: dict) -> bytes:
    body = {k: v for k, v in man.items() if k != "manifest_sha256"}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True,
                                       separators=(",", ":")).encode()).hexdigest()
    return json.dumps(dict(body, manifest_sha256=digest), indent=1).encode()


def _array(man, name):
    return next(a for a in man["arrays"] if a["name"] == name)


def _resume(interrupted, tmp_path, capsys, damage):
    """Copy the checkpoints, damage the newest manifest's bytes with ``damage(bytes)``,
    resume; ``(exit code, stderr, model bytes or None)``."""
    store, _, ckpt = interrupted
    ck = tmp_path / "ck"
    shutil.copytree(ckpt, ck)
    newest = sorted(ck.glob("manifest-*.json"))[-1]
    newest.write_bytes(damage(newest.read_bytes()))
    out = tmp_path / "m.json"
    capsys.readouterr()
    rc = main(["train", str(store), "-o", str(out), *ARGS, "--checkpoint", str(ck),
               "--resume"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, err, out.read_bytes() if out.exists() else None


def _edit(edit, reseal=False):
    def damage(data):
        man = json.loads(data)
        edit(man)
        return _reseal(man) if reseal else json.dumps(man, indent=1).encode()
    return damage


def _epochs_plus_2(m):
    m["meta"]["solver_meta"]["epochs"] += 2


def _done(m):
    m["meta"]["driver"]["done"] = True


def _w_float32(m):
    _array(m, "solver.W")["dtype"] = "<f4"


def _w_int64(m):
    _array(m, "solver.W")["dtype"] = "<i8"


def _no_sched(m):
    del m["meta"]["sched"]


def _no_epochs(m):
    del m["meta"]["solver_meta"]["epochs"]


def _passes(m):
    m["meta"]["driver"]["saved_passes"] += 1.0


def _no_kinds(m):
    m["meta"]["kinds"] = []


def _sched_seed(m):
    m["meta"]["sched"]["seed"] = "zero"


def _no_slab(m):
    del m["meta"]["solver_meta"]["slab"]


@pytest.mark.parametrize("edit", [_epochs_plus_2, _done, _w_float32, _w_int64, _no_sched,
                                  _no_epochs])
def test_edited_manifest_falls_back_to_the_previous_checkpoint(interrupted, tmp_path, capsys,
                                                               caplog, edit):
    """The issue's cases (epochs 10 -> 12, driver.done=true, a dtype edit, a missing key),
    edited by hand: the manifest fails its checksum, the previous checkpoint is used and
    the model is the uninterrupted run's."""
    rc, err, model = _resume(interrupted, tmp_path, capsys, _edit(edit))
    assert rc == 0, err
    assert model == interrupted[1]
    newest = sorted(interrupted[2].glob("manifest-*.json"))[-1].name
    assert f"checkpoint {newest} under" in caplog.text
    assert "is damaged, skipped" in caplog.text and "fails its checksum" in caplog.text


@pytest.mark.parametrize("edit, field", [
    (_done, "driver.done is true"),
    (_w_int64, "solver.W has shape (41, 1) and dtype int64"),     # (40 features + bias)
    (_no_sched, "field sched is missing"),
    (_no_epochs, "solver_meta.epochs is missing"),
    (_passes, "driver.saved_passes"),
    (_no_kinds, "history.kind"),
    (_sched_seed, "field sched does not fit"),
    (_no_slab, "field solver_meta lacks 'slab'"),
])
def test_resealed_manifest_with_contradicting_fields_exits_2(interrupted, tmp_path, capsys,
                                                             edit, field):
    """Edited and re-sealed (a valid checksum): what the checkpoint contradicts stops the
    run with exit 2 and one line naming the field."""
    rc, err, model = _resume(interrupted, tmp_path, capsys, _edit(edit, reseal=True))
    assert rc == 2 and model is None
    assert err.strip().splitlines()[-1].startswith("streamsvm train: error: checkpoint")
    assert field in err


def test_resealed_dtype_edit_that_breaks_the_layout_falls_back(interrupted, tmp_path, capsys,
                                                               caplog):
    rc, err, model = _resume(interrupted, tmp_path, capsys, _edit(_w_float32, reseal=True))
    assert rc == 0 and model == interrupted[1]
    assert "field arrays[1] ('solver.zu').offset is" in caplog.text


def test_no_bit_flip_of_a_real_manifest_loads_other_content(interrupted):
    """Single-bit flips of a real dcd manifest (one per byte, each bit position in turn)
    fail its checks or leave its content unchanged."""
    ckpt = interrupted[2]
    newest = sorted(ckpt.glob("manifest-*.json"))[-1]
    data = newest.read_bytes()
    original = parse_manifest(data, newest.name)
    loaded = 0
    for i in range(len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 1 << (i % 8)
        try:
            loaded += parse_manifest(bytes(flipped), newest.name) != original
        except _Damaged:
            pass
    assert loaded == 0 and len(data) > 2000


@pytest.mark.parametrize("seed", [1, 2])
def test_resume_after_random_bit_flips(interrupted, tmp_path, capsys, caplog, seed):
    def flip(data):
        rng, data = random.Random(seed), bytearray(data)
        for _ in range(3):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    rc, err, model = _resume(interrupted, tmp_path, capsys, flip)
    assert rc == 0 and model == interrupted[1], err
    assert "is damaged, skipped" in caplog.text
