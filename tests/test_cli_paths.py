"""Every command with bad paths, as a new user types them (issue 33, item 12): a missing
input, an input that is a directory, an output that is a directory, whose directory is
missing or not writable, a model that is a directory, a store that is a file. Each gives
one line naming the path and exit status 2, never a traceback; no directory is created
for a mistyped output path, outputs are checked before anything is read, and an output
that is an input is refused."""

from __future__ import annotations

import errno
import os

import pytest

from streamsvm import cli
from streamsvm.cli import main

from .test_cli_ux import _text

ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0
as_user = pytest.mark.skipif(ROOT_USER, reason="running as root: a 0500 directory denies "
                                               "root nothing, so 'not writable' cannot be made")


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    """A text file, its store and model, an empty directory, a non-empty one, an empty
    file and a directory nobody may write."""
    d = tmp_path_factory.mktemp("paths")
    _text(d)
    assert main(["convert", str(d / "t.svm"), str(d / "s.zarr"), "-q"]) == 0
    assert main(["train", str(d / "s.zarr"), "-o", str(d / "m.json"), "-q"]) == 0
    (d / "adir").mkdir()
    (d / "full").mkdir()
    (d / "full" / "x").write_text("x")
    (d / "afile").write_text("")
    (d / "t-link.svm").symlink_to(d / "t.svm")
    (d / "ro").mkdir()
    (d / "ro").chmod(0o500)
    yield d
    (d / "ro").chmod(0o700)


CASES = [
    # convert
    (["convert", "{t}/missing.svm", "{t}/o.zarr"], "input file '{t}/missing.svm' does not exist"),
    (["convert", "{d}/adir", "{t}/o.zarr"], "input '{d}/adir' is a directory"),
    (["convert", "{d}/t.svm", "{d}/full"], "output '{d}/full' exists and is not a streamsvm"),
    (["convert", "{d}/t.svm", "{t}/missing/o.zarr"], "directory '{t}/missing' does not exist"),
    (["convert", "{d}/t.svm", "{d}/afile/o.zarr"], "Not a directory"),
    pytest.param(["convert", "{d}/t.svm", "{d}/ro/o.zarr"], "Permission denied", marks=as_user),
    # info, verify
    (["info", "{t}/missing.zarr"], "no streamsvm store at '{t}/missing.zarr'"),
    (["info", "{d}/afile"], "no streamsvm store at '{d}/afile'"),
    (["info", "{d}/adir"], "no streamsvm store at '{d}/adir'"),
    (["verify", "{t}/missing.zarr"], "no streamsvm store at '{t}/missing.zarr'"),
    (["verify", "{d}/afile"], "no streamsvm store at '{d}/afile'"),
    # train
    (["train", "{t}/missing.zarr", "-o", "{t}/m.json"], "no streamsvm store at '{t}/missing"),
    (["train", "{d}/afile", "-o", "{t}/m.json"], "no streamsvm store at '{d}/afile'"),
    (["train", "{d}/s.zarr", "-o", "{d}/adir"], "model output (-o) '{d}/adir' is an existing "
                                                "directory"),
    (["train", "{d}/s.zarr", "-o", "{t}/missing/m.json"], "cannot write the model output (-o) "
                                                          "'{t}/missing/m.json': directory "
                                                          "'{t}/missing' does not exist"),
    (["train", "{t}/missing.zarr", "-o", "{t}/missing/m.json"], "model output (-o)"),
    (["train", "{d}/s.zarr", "--format", "liblinear", "-o", "{t}/missing/m.txt"],
     "directory '{t}/missing' does not exist"),
    (["train", "{d}/s.zarr", "-o", "{d}/afile/m.json"], "Not a directory"),
    pytest.param(["train", "{d}/s.zarr", "-o", "{d}/ro/m.json"], "Permission denied",
                 marks=as_user),
    (["train", "{d}/s.zarr", "-o", "{t}/m.json", "--checkpoint", "{t}/missing/ck"],
     "checkpoint directory '{t}/missing/ck': its parent directory '{t}/missing' does not "
     "exist"),
    (["train", "{d}/s.zarr", "-o", "{t}/m.json", "--checkpoint", "{d}/afile"],
     "Not a directory"),
    (["train", "{d}/s.zarr", "-o", "{t}/m.json", "--scratch-dir", "{t}/missing/sc"],
     "scratch directory '{t}/missing/sc': its parent directory '{t}/missing' does not exist"),
    # predict, evaluate
    (["predict", "{t}/missing.json", "{d}/t.svm", "-o", "{t}/p.txt"],
     "model file '{t}/missing.json' does not exist"),
    (["predict", "{d}/s.zarr", "{d}/t.svm", "-o", "{t}/p.txt"],
     "model file '{d}/s.zarr': is a directory (a store?), not a model file"),
    (["predict", "{d}/m.json", "{t}/missing.svm", "-o", "{t}/p.txt"],
     "input file '{t}/missing.svm' does not exist"),
    (["predict", "{d}/m.json", "{d}/adir", "-o", "{t}/p.txt"], "input '{d}/adir' is a directory"),
    (["predict", "{d}/m.json", "{d}/t.svm", "-o", "{d}/adir"],
     "prediction output (-o) '{d}/adir' is an existing directory"),
    (["predict", "{d}/m.json", "{d}/t.svm", "-o", "{t}/missing/p.txt"],
     "cannot write the prediction output (-o) '{t}/missing/p.txt': directory '{t}/missing' "
     "does not exist"),
    (["predict", "{t}/missing.json", "{t}/missing.svm", "-o", "{t}/missing/p.txt"],
     "prediction output (-o)"),                           # the output is checked first
    (["predict", "{d}/m.json", "{d}/t.svm", "-o", "{d}/t.svm"],
     "prediction output (-o) '{d}/t.svm' is the input '{d}/t.svm': it would be replaced"),
    (["predict", "{d}/m.json", "{d}/t.svm", "-o", "{d}/t-link.svm"],      # the same file
     "prediction output (-o) '{d}/t-link.svm' is the input '{d}/t.svm'"),
    (["predict", "{d}/m.json", "{d}/t.svm", "-o", "{d}/m.json"], "is the input '{d}/m.json'"),
    pytest.param(["predict", "{d}/m.json", "{d}/t.svm", "-o", "{d}/ro/p.txt"],
                 "Permission denied", marks=as_user),
    (["evaluate", "{t}/missing.json", "{d}/s.zarr"], "model file '{t}/missing.json' does not "
                                                     "exist"),
    (["evaluate", "{d}/s.zarr", "{d}/s.zarr"], "model file '{d}/s.zarr': is a directory (a "
                                               "store?), not a model file"),
    (["evaluate", "{d}/m.json", "{t}/missing.zarr"], "input file '{t}/missing.zarr' does not "
                                                     "exist"),
    (["evaluate", "{d}/m.json", "{d}/adir"], "input '{d}/adir' is a directory"),
    # quickstart
    (["quickstart", "--workdir", "{d}/afile"], "work directory (--workdir) '{d}/afile': Not a "
                                               "directory"),
    (["quickstart", "--workdir", "{t}/missing/w"], "its parent directory '{t}/missing' does "
                                                   "not exist"),
]


@pytest.mark.parametrize("argv, says", CASES,
                         ids=lambda v: "-".join(v[:1] + [os.path.basename(a) for a in v[1:]])
                         if isinstance(v, list) else "")
def test_bad_paths_give_one_line_and_exit_2(argv, says, d, tmp_path, capsys):
    argv = [a.format(d=d, t=tmp_path) for a in argv]
    says = says.format(d=d, t=tmp_path)
    assert main(argv + (["-q"] if argv[0] in ("convert", "train") else [])) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and says in err, err
    lines = err.splitlines()
    if argv[0] == "verify":         # verify lists its problems under one heading
        assert lines[0].startswith("streamsvm verify: store ") and len(lines) == 2, err
    else:
        assert len(lines) == 1 and lines[0].startswith(f"streamsvm {argv[0]}: error: "), err
    assert not (tmp_path / "missing").exists()      # never mkdir -p a mistyped path
    assert not (tmp_path / "o.zarr").exists() and not (tmp_path / "p.txt").exists()


def test_any_other_os_error_is_one_line(monkeypatch, capsys):
    """The last resort in main(): an OSError no command turned into a message is printed as
    the operating system's reason and the file, exit 2; any other exception is a bug and
    keeps its traceback."""
    def denied(args):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), "/some/file")
    monkeypatch.setitem(cli.COMMANDS, "info", denied)
    assert main(["info", "x.zarr"]) == 2
    assert capsys.readouterr().err == "streamsvm info: error: Permission denied: '/some/file'\n"

    def bug(args):
        raise RuntimeError("a bug")
    monkeypatch.setitem(cli.COMMANDS, "info", bug)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["info", "x.zarr"])
