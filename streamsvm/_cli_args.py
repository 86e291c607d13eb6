"""How the command line's arguments are declared and read: fsspec options, the ``train``
options generated from the run's table and every solver's declared parameters (no
hand-copied flag list), and the values they give (class weights, solver parameters, the
model outputs of a path of C values), and what a path argument names (standard output, a
model file)."""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import textwrap

from .exceptions import InvalidParameterError

QUIET_HELP = ("no progress display (on stderr: a bar on a terminal; redirected to a file or "
              "a pipe, a plain line every 10 s and a summary line); messages and results "
              "are still printed")

__all__ = ["storage_options", "add_storage", "add_train", "add_param", "class_weight",
           "solver_args", "path_outputs", "is_stdout", "is_model_file", "write_models"]


def storage_options(pairs) -> dict:
    out = {}
    for item in pairs or []:
        if "=" not in item:
            raise InvalidParameterError(f"--storage-option expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        try:
            value = json.loads(value)
        except ValueError:
            pass
        cur = out
        parts = key.split(".")
        for p in parts[:-1]:  # client_kwargs.endpoint_url=... → nested dicts
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = value
    return out


def add_storage(p):
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE", default=[],
                   help="fsspec option for remote URLs, repeatable; dotted keys nest "
                        "(e.g. client_kwargs.endpoint_url=http://127.0.0.1:9000, anon=false)")


def add_train(sub) -> None:
    """The ``train`` command: its options generated from the run's table and every solver's
    declared parameters (no hand-copied flag list)."""
    from ._train import RUN_PARAMS
    from .solvers import SOLVERS
    t = sub.add_parser("train", help="train a linear SVM on a store",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description=textwrap.fill(
                           "Train by streaming the store's chunks through a solver, until its "
                           "certificate (the exact relative duality gap for dcd) is at most "
                           "--tol, or at --max-passes.", 88) + "\n\nsolvers:\n" + "\n".join(
                           textwrap.fill(SOLVERS[n].summary, 88, initial_indent=f"  {n:9s}",
                                         subsequent_indent=" " * 11) for n in sorted(SOLVERS)))
    t.add_argument("store", help="store path or URL (from 'streamsvm convert')")
    t.add_argument("-o", "--output",
                   help="model file to write (JSON; '-': standard output, the summary then "
                        "goes to standard error); its directory must exist. Needed unless "
                        "--cv, where it is optional")
    t.add_argument("--solver", default="auto", choices=["auto", *sorted(SOLVERS)],
                   help="the method (default auto: chosen before the first pass from the "
                        "store's rows, features and row norms, C, the loss, whether the rows "
                        "fit --memory and the backend, by rules measured on a matrix of data "
                        "sets (docs: Choosing a solver); -v logs the choice and why, the model "
                        "and --json keep it; a solver parameter given limits the choice to "
                        "the solvers taking it; ww, another objective, only by name)")
    run = t.add_argument_group("run options")
    for p in RUN_PARAMS:
        add_param(run, p, p.default, "")
    run.add_argument("--validation", metavar="STORE", help="with --C-path: score every C's "
                     "model on this store or libsvm file and keep the C of the best accuracy "
                     "(the smallest among ties); -o without {C} then writes that model only")
    run.add_argument("--cv", type=int, metavar="K", help="K-fold cross-validation in shared "
                     "passes (as LIBLINEAR's -v K): the K fold models train together, each "
                     "row read once a pass, and every row is scored by the model that held "
                     "it out (folds from a hash of the row id and --seed); prints each fold's "
                     "held-out accuracy and metrics and their mean and spread. With --C-path: "
                     "every C cross-validated and the best mean accuracy's C chosen (the "
                     "smallest among ties, as LIBLINEAR's -C). With -o: the model at that C, "
                     "trained on every row, is written too. Every solver but a free "
                     "intercept (alm's default: give --no-free-bias); on a cluster too "
                     "(--scheduler), the scoring pass read here")
    run.add_argument("--format", choices=["streamsvm", "liblinear"], default="streamsvm",
                     help="model file format (liblinear: LIBLINEAR's text model)")
    run.add_argument("--json", action="store_true", help="print a JSON summary at the end, "
                                                           "the whole history included")
    run.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    add_storage(run)
    group = t.add_argument_group("solver parameters (the solvers taking each one in brackets; "
                                 "unset: the solver's default)")
    seen: dict = {}
    for name in sorted(SOLVERS):
        for p in SOLVERS[name].params:
            seen.setdefault(p.name, (p, []))[1].append(name)
    for p, names in seen.values():
        choices = sorted({c for n in names for c in (SOLVERS[n].param_table()[p.name].choices
                                                     or ())})
        tag = ("every solver: nesvm in the same passes, the others one run per C, newton "
               "and alm warm-started from the last" if p.name == "C_path" else ", ".join(names))
        add_param(group, p, None, f" [{tag}] ({shown_default(p.name, names)})", choices)


def shown_default(name: str, solvers) -> str:
    """``default X``, or where the solvers differ ``default X; Y for a, b`` (X the most
    common)."""
    from .solvers import SOLVERS
    by: dict = {}
    for s in solvers:
        by.setdefault(repr(SOLVERS[s].param_table()[name].default), []).append(s)
    ranked = sorted(by.items(), key=lambda kv: -len(kv[1]))
    text = f"default {_plain(ranked[0][0])}"
    for value, who in ranked[1:]:
        text += f"; {_plain(value)} for {', '.join(who)}"
    return text


def _plain(text: str) -> str:
    return text[1:-1] if text[:1] == text[-1:] == "'" else text


def add_param(group, p, default, note: str, choices=None) -> None:
    """One option from a declared :class:`~streamsvm.solvers._base.Param`."""
    dest = p.name
    if p.kind == "bool":
        group.add_argument(p.cli_flag, dest=dest, default=default,
                           action=argparse.BooleanOptionalAction, help=p.help + note)
    elif p.kind == "class_weight":
        group.add_argument(p.cli_flag, dest=dest, action="append", default=default,
                           metavar="LABEL=W|balanced", help=p.help + ", repeatable" + note)
    elif p.kind == "choice":
        group.add_argument(p.cli_flag, dest=dest, default=default,
                           choices=choices or list(p.choices), help=p.help + note)
    else:
        conv = {"float": float, "int": int}.get(p.kind, str)
        shown = f" (default {p.default})" if default is not None and p.default is not None \
            and not note else ""
        group.add_argument(p.cli_flag, dest=dest, type=conv, default=default,
                           metavar=p.name.upper(), help=p.help + shown + note)


def class_weight(items):
    if not items:
        return None
    if items == ["balanced"]:
        return "balanced"
    out = {}
    for item in items:
        if "=" not in item:
            raise InvalidParameterError(f"--class-weight expects LABEL=WEIGHT or "
                                        f"'balanced', got {item!r}")
        k, v = item.split("=", 1)
        try:
            out[float(k)] = float(v)
        except ValueError:
            raise InvalidParameterError(f"--class-weight {item!r}: LABEL and "
                                        f"WEIGHT must be numbers") from None
    return out


def solver_args(args) -> dict:
    """The solver parameters given on the command line, checked against ``--solver``."""
    from ._auto import AUTO, CHOICES
    from .solvers import SOLVERS
    if args.solver == AUTO:     # any parameter of a solver auto may choose (_auto.candidates)
        table = {p.name: p for s in CHOICES for p in SOLVERS[s].params}
    else:
        table = SOLVERS[args.solver].param_table()
    every = {p.name: p for cls in SOLVERS.values() for p in cls.params}
    out = {}
    for name, p in every.items():
        value = getattr(args, name, None)
        if value is None:
            continue
        if name not in table and name != "C_path":      # (a path: any solver, _c_search)
            if args.solver == AUTO:
                takers = [s for s, cls in SOLVERS.items() if name in cls.param_table()]
                raise InvalidParameterError(
                    f"{p.cli_flag} is not a parameter of any solver --solver auto chooses "
                    f"({', '.join(CHOICES)}): name the solver taking it (--solver "
                    f"{' or '.join(takers)})")
            raise InvalidParameterError(f"{p.cli_flag} is not a parameter of solver "
                                        f"{args.solver!r} (its parameters: "
                                        f"{', '.join(q.cli_flag for q in table.values())})")
        out[name] = class_weight(value) if p.kind == "class_weight" else \
            p.validate(f"solver {args.solver!r}", value) if p.kind == "floats" else value
    return out


def path_outputs(output: str, C_path, validation=None) -> dict:
    """The model file of each C: ``output`` itself, or with a path of C values (``--C-path``)
    ``output`` with ``{C}`` replaced by each value (with ``--validation``, ``output`` alone:
    the chosen C's model)."""
    if output is None:
        raise InvalidParameterError("train writes its model to -o FILE: give -o (only --cv K "
                                    "runs without one)")
    if not C_path or len(C_path) == 1 or (validation and "{C}" not in output):
        return {None: output}
    if "{C}" not in output:
        raise InvalidParameterError(f"--C-path trains {len(C_path)} models: the model output "
                                    f"(-o) must contain {{C}}, replaced by each C value (e.g. "
                                    f"-o 'model-C{{C}}.json'); got {output!r}")
    outputs = {C: output.replace("{C}", f"{C:g}") for C in C_path}
    if len(set(outputs.values())) < len(C_path):
        raise InvalidParameterError(f"--C-path names a C value twice: {C_path}")
    return outputs


def is_stdout(path: str) -> bool:
    """Whether the output ``path`` is this process's standard output (``-``, or a name of
    the same file: ``/dev/stdout``, ``/proc/self/fd/1``)."""
    from .io import STDOUT
    if path == STDOUT:
        return True
    try:
        a, b = os.stat(path), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def is_model_file(path: str, so: dict) -> bool:
    """Whether ``path`` is a file that begins as a model does (streamsvm JSON or LIBLINEAR
    text); anything else is read as a store (and refused as one, naming it)."""
    from .io import url_to_fs
    try:
        fs, p = url_to_fs(path, so)
        if not fs.isfile(p):
            return False
        with fs.open(p, "rb") as f:
            start = f.read(64).removeprefix(b"\xef\xbb\xbf").lstrip()
    except Exception:           # unreadable: the store path says why, as before
        return False
    return start.startswith((b"{", b"solver_type"))


def write_models(models, outputs, args, so) -> None:
    """Write each model to its output (``--format``); a failure names the output and, with
    ``--checkpoint``, where the trained model still is."""
    try:
        for m, out in zip(models, outputs):
            if args.format == "liblinear":
                m.to_liblinear(out, storage_options=so)
            else:
                m.save(out, storage_options=so)
    except BrokenPipeError:
        raise                   # -o - | head: main() stops quietly
    except OSError as exc:
        from ._outputs import _reason
        from .exceptions import OutputNotWritableError
        hint = (f"; the final checkpoint under {args.checkpoint} holds the trained model: "
                f"rerun the same command to write it" if args.checkpoint else "")
        raise OutputNotWritableError(f"cannot write the model output (-o) {args.output!r}: "
                                     f"{_reason(exc)}{hint}") from exc
