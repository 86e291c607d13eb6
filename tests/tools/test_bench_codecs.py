"""tools/bench.py codecs: one small run, each codec converted and read back, the file made
deleted after."""

from __future__ import annotations

import json

from tools.bench.cli import main


def test_codecs_converts_and_reads_each_then_deletes_what_it_made(tmp_path, capsys):
    scratch, out = tmp_path / "scratch", tmp_path / "codecs.json"
    assert main(["codecs", "--rows", "3000", "--features", "200", "--nnz-per-row", "8",
                 "--codecs", "lz4,zstd:2,none", "--repeat", "2", "--chunk-rows", "1000",
                 "--scratch", str(scratch), "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert [line.split("|")[1].strip() for line in table.splitlines()[2:]] == \
        ["lz4:5", "zstd:2", "none"]
    r = json.loads(out.read_text())
    assert r["command"].startswith("python tools/bench.py codecs --rows 3000")
    assert r["synthetic"]["rows"] == 3000 and r["text_bytes"] > 0
    by = {c["codec"]: c for c in r["codecs"]}
    assert all(c["ok"] and len(c["convert_all_s"]) == 2 and
               c["convert_s"] == min(c["convert_all_s"]) and
               c["scheduler_pass_s"] == min(c["read"]["scheduler_pass_all_s"]) for c in by.values())
    assert by["none"]["bytes_on_disk"] > by["zstd:2"]["bytes_on_disk"]
    assert len({c["decoded_bytes"] for c in by.values()}) == 1
    assert not scratch.exists()          # no store, no synthetic file left
