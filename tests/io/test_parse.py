"""Tests of the numba libsvm/svmlight block parser, against scikit-learn and ``float()``."""

from __future__ import annotations

import functools
import io
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_svmlight_file

from streamsvm.exceptions import FormatError, InvalidParameterError
from streamsvm.io import _parse
from streamsvm.io._parse import (FLOAT32_MAX_VALUE, INDEX_LIMIT, NO_MIN_INDEX, ParsedBlock,
                                 parse_block)
from streamsvm.io._parse_tokens import _BAD, _OK, _POW10, _SLOW, _parse_number
from tests.conftest import data_file

DATASETS = [
    "a9a/a9a", "a9a/a9a.t", "mushrooms/mushrooms", "dna/dna.scale", "letter/letter.scale",
    "pendigits/pendigits", "usps/usps.t", "vowel/vowel.scale",
]

# The number grammar the parser accepts (a subset of what float() accepts).
NUMBER_RE = r"[+-]?([0-9]{1,25}(\.[0-9]{0,25})?|\.[0-9]{1,25})([eE][+-]?[0-9]{1,3})?"


def parse(text, *, min_index=1, max_index=INDEX_LIMIT, sort_indices=False, first_line=1,
          max_value=np.inf):
    if isinstance(text, str):
        text = text.encode()
    return parse_block(text, file="in.svm", first_line=first_line, min_index=min_index,
                       max_index=max_index, sort_indices=sort_indices, max_value=max_value)


def bits(x) -> np.ndarray:
    """float64 values as their bit patterns, so that comparisons are bit for bit."""
    return np.asarray(x, dtype=np.float64).view(np.uint64)


def assert_block_equal(block: ParsedBlock, labels, indptr, indices, values):
    np.testing.assert_array_equal(bits(block.labels), bits(labels))
    np.testing.assert_array_equal(block.indptr, indptr)
    np.testing.assert_array_equal(block.indices, indices)
    np.testing.assert_array_equal(bits(block.values), bits(values))


def concat(blocks: list[ParsedBlock]) -> tuple[np.ndarray, ...]:
    """Labels, indptr, indices and values of consecutive blocks, joined."""
    offsets = np.cumsum([0] + [len(b.indices) for b in blocks])
    indptr = np.concatenate([[0]] + [b.indptr[1:] + o for b, o in zip(blocks, offsets)])
    return (np.concatenate([b.labels for b in blocks]), indptr,
            np.concatenate([b.indices for b in blocks]),
            np.concatenate([b.values for b in blocks]))


def parse_in_blocks(data: bytes, cuts, **kwargs) -> tuple[list[ParsedBlock], list[int]]:
    """Parse ``data`` cut at the byte offsets ``cuts`` (each just after a newline)."""
    bounds = [0, *sorted(set(cuts)), len(data)]
    view = memoryview(data)
    blocks, first_lines, first_line = [], [], 1
    for a, b in zip(bounds[:-1], bounds[1:]):
        block = parse_block(view[a:b], file="in.svm", first_line=first_line, **kwargs)
        blocks.append(block)
        first_lines.append(first_line)
        first_line += block.n_lines
    return blocks, first_lines


@functools.lru_cache(maxsize=None)
def sklearn_load(path: str):
    X, y = load_svmlight_file(path, zero_based=False)
    return X, y


# ---------------------------------------------------------------------------------------
# Real datasets against scikit-learn.
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("relpath", DATASETS)
def test_dataset_matches_sklearn(relpath):
    path = data_file(relpath)
    data = path.read_bytes()
    block = parse_block(data, file=str(path), first_line=1, min_index=1, max_index=INDEX_LIMIT)
    X, y = sklearn_load(str(path))
    assert_block_equal(block, y, X.indptr, X.indices + 1, X.data)
    assert block.n_lines == data.count(b"\n")
    assert (block.min_index, block.max_index) == (X.indices.min() + 1, X.indices.max() + 1)
    assert block.labels.dtype == block.values.dtype == np.float64
    assert block.indptr.dtype == block.indices.dtype == np.int64


@pytest.mark.parametrize("relpath", DATASETS)
def test_dataset_in_small_blocks(relpath):
    path = data_file(relpath)
    data = path.read_bytes()
    whole = parse_block(data, file=str(path), first_line=1, min_index=1, max_index=INDEX_LIMIT)
    line_starts = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10) + 1
    rng = np.random.default_rng(0)
    cuts = rng.choice(line_starts, size=min(80, len(line_starts)), replace=False)
    blocks, _ = parse_in_blocks(data, cuts.tolist(), min_index=1, max_index=INDEX_LIMIT)
    assert_block_equal(whole, *concat(blocks))
    assert sum(b.n_lines for b in blocks) == whole.n_lines


# ---------------------------------------------------------------------------------------
# Random valid files against float() and scikit-learn.
# ---------------------------------------------------------------------------------------

finite_floats = st.floats(allow_nan=False, allow_infinity=False)
SEPARATORS = st.sampled_from([" ", "\t", "  ", " \t ", "\r "])


@st.composite
def number_tokens(draw):
    """A finite number as a file would write it."""
    how = draw(st.sampled_from(["repr", "g", ".17e", ".6f", "int", "plus", "regex"]))
    if how == "regex":
        token = draw(st.from_regex(NUMBER_RE, fullmatch=True))
        if not np.isfinite(float(token)):
            token = "0"
    elif how == "int":
        token = str(draw(st.integers(-10**25, 10**25)))
    else:
        x = draw(finite_floats)
        token = {"repr": repr, "g": "%g".__mod__, ".17e": "%.17e".__mod__,
                 ".6f": "%.6f".__mod__, "plus": lambda v: "+" + repr(abs(v))}[how](x)
    return token


@st.composite
def svm_files(draw):
    """Random valid libsvm text and its ground truth (labels, indptr, indices, values)."""
    lines, labels, indptr, indices, values = [], [], [0], [], []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["row", "row", "row", "blank", "comment"]))
        eol = draw(st.sampled_from(["\n", "\r\n"]))
        if kind == "blank":
            lines.append(draw(st.sampled_from(["", " ", "\t", "\r", " \t "])) + eol)
            continue
        if kind == "comment":
            lines.append(draw(st.sampled_from(["#", " # ", "#"])) + "c 1:2 qid:3" + eol)
            continue
        label = draw(st.one_of(number_tokens(), st.sampled_from(["+1", "-1", "1", "0", "2"])))
        idx = sorted(draw(st.sets(st.integers(1, 10**6), max_size=12)))
        toks = [f"{i}:{draw(number_tokens())}" for i in idx]
        if draw(st.booleans()):
            toks.insert(0, f"qid:{draw(st.integers(0, 99))}")
        text = label + "".join(draw(SEPARATORS) + t for t in toks)
        text += draw(st.sampled_from(["", " ", "\t", " # a comment: 1:2", "#x"]))
        lines.append(text + eol)
        labels.append(float(label))
        indices += idx
        values += [float(t.split(":", 1)[1]) for t in toks if not t.startswith("qid")]
        indptr.append(len(indices))
    if lines and draw(st.booleans()):
        lines[-1] = lines[-1].rstrip("\r\n")  # last line without newline
    return "".join(lines).encode(), (labels, indptr, indices, values)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(svm_files())
def test_random_files_match_float_and_sklearn(file):
    data, truth = file
    block = parse(data)
    assert_block_equal(block, *truth)
    assert block.n_lines == data.count(b"\n")
    indices = truth[2]
    assert block.min_index == (min(indices) if indices else NO_MIN_INDEX)
    assert block.max_index == (max(indices) if indices else -1)
    if len(block.labels):
        X, y = load_svmlight_file(io.BytesIO(data), zero_based=False,
                                  n_features=max(block.max_index, 1))
        assert_block_equal(block, y, X.indptr, X.indices + 1, X.data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(svm_files(), st.data())
def test_random_files_in_blocks(file, data):
    text, truth = file
    line_starts = [m.end() for m in re.finditer(b"\n", text)]
    cuts = data.draw(st.lists(st.sampled_from(line_starts), max_size=6)) if line_starts else []
    blocks, _ = parse_in_blocks(text, cuts, min_index=1, max_index=INDEX_LIMIT)
    labels, indptr, indices, values = concat(blocks)
    np.testing.assert_array_equal(bits(labels), bits(truth[0]))
    np.testing.assert_array_equal(indptr, truth[1])
    np.testing.assert_array_equal(indices, truth[2])
    np.testing.assert_array_equal(bits(values), bits(truth[3]))


@settings(max_examples=300, deadline=None)
@given(st.from_regex(NUMBER_RE, fullmatch=True))
def test_any_number_token_is_correctly_rounded(token):
    expected = float(token)
    text = f"{token} 3:{token}\n"
    if not np.isfinite(expected):
        with pytest.raises(FormatError, match="non-finite value"):
            parse(text)
        return
    block = parse(text)
    assert bits(block.labels[0]) == bits(expected)
    assert bits(block.values[0]) == bits(expected)


FUZZ_ALPHABET = b"0123456789+-.eE:: \t\r\n#qidnaf"


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=60).map(
    lambda b: bytes(FUZZ_ALPHABET[c % len(FUZZ_ALPHABET)] for c in b)))
def test_fuzz_never_crashes_and_agrees_with_sklearn(data):
    try:
        block = parse(data)
    except FormatError:
        return
    if len(block.labels) == 0 or block.max_index >= 2**31:  # sklearn's indices are C ints
        return
    X, y = load_svmlight_file(io.BytesIO(data), zero_based=False,
                              n_features=max(block.max_index, 1))
    assert_block_equal(block, y, X.indptr, X.indices + 1, X.data)


# ---------------------------------------------------------------------------------------
# Correct rounding: Clinger's fast path and the float() slow path.
# ---------------------------------------------------------------------------------------

TRICKY = [
    "0.1", "0.3", "0.30000000000000004", "123456789012345678901234", "1e-300",
    "2.2250738585072014e-308", "2.2250738585072011e-308", "9007199254740993",
    "9007199254740992", "9007199254740991", "4.9e-324", "5e-324", "2.4703282292062327e-324",
    "2.4703282292062328e-324", "1e-400", "1.7976931348623157e308", "1.7976931348623158e308",
    "1e22", "1e23", "123456789e-22", "8.988465674311579e307", "-0", "-0.0", "+.5", "5.",
    "1E+04", "-2.5E+04", "0e999999", "000000000000000000000001.5",
    "0.000000000000000000000000000001", "1.00000000000000000000000000001",
    "3.14159265358979323846264338327950288", "1.7976931348623157e-308", "0.000001891",
]


@pytest.mark.parametrize("token", TRICKY)
def test_tricky_tokens_equal_float(token):
    block = parse(f"{token} 1:{token} 2:-{token.lstrip('+-')}")
    expected = float(token)
    assert bits(block.labels[0]) == bits(expected)
    assert bits(block.values[0]) == bits(expected)
    assert bits(block.values[1]) == bits(-abs(expected) if expected else -0.0)


@pytest.mark.parametrize("token, status", [
    ("0.1", _OK), ("1e22", _OK), ("9007199254740992", _OK),
    ("0.000001891", _OK), ("123456789e-22", _OK), ("0e999", _OK),
    ("9007199254740993", _SLOW), ("1e23", _SLOW), ("1e-300", _SLOW),
    ("123456789012345678901234", _SLOW), ("0.30000000000000004", _SLOW),
    ("1e", _BAD), (".", _BAD), ("+", _BAD), ("e5", _BAD),
])
def test_fast_and_slow_paths(token, status):
    buf = np.frombuffer(token.encode(), dtype=np.uint8)
    value, end, got = _parse_number(buf, 0, len(buf), _POW10)
    assert got == status
    if status == _OK:
        assert bits(value) == bits(float(token)) and end == len(buf)


# ---------------------------------------------------------------------------------------
# Accepted syntax.
# ---------------------------------------------------------------------------------------

def test_empty_and_comment_only_blocks():
    block = parse(b"")
    assert_block_equal(block, [], [0], [], [])
    assert (block.n_lines, block.min_index, block.max_index) == (0, NO_MIN_INDEX, -1)
    block = parse(b"# header: 1:2\n\n \t\r\n   # indented\n")
    assert_block_equal(block, [], [0], [], [])
    assert block.n_lines == 4


def test_label_only_rows_comments_qid_and_crlf():
    text = (b"1\n-1 # no features\r\n+2.5\t qid:7\t3:4#c\n\n"
            b"-3 qid:1 1:.5 2:5. 9:1e-3\r\n2 5:-2.5E+04")
    block = parse(text)
    assert_block_equal(block, [1, -1, 2.5, -3, 2], [0, 0, 0, 1, 4, 5], [3, 1, 2, 9, 5],
                       [4, 0.5, 5, 1e-3, -25000])
    assert block.n_lines == 5  # the last line has no newline
    assert (block.min_index, block.max_index) == (1, 9)


def test_zero_based_and_explicit_zero_values():
    block = parse(b"0 0:0 1:-0 4:0.0\n", min_index=0)
    assert_block_equal(block, [0], [0, 3], [0, 1, 4], [0.0, -0.0, 0.0])


@pytest.mark.parametrize("convert", [
    bytes, bytearray, memoryview, lambda b: np.frombuffer(b, dtype=np.uint8),
    lambda b: np.repeat(np.frombuffer(b, dtype=np.uint8), 2)[::2],  # not contiguous
    lambda b: memoryview(bytes(np.repeat(np.frombuffer(b, dtype=np.uint8), 2)))[::2],
])
def test_buffer_types(convert):
    text = b"1 1:0.5 3:2\n-1 2:1e-3\n"
    block = parse_block(convert(text), file="f", first_line=1, min_index=1,
                        max_index=INDEX_LIMIT)
    assert_block_equal(block, [1, -1], [0, 2, 3], [1, 3, 2], [0.5, 2, 1e-3])


def test_buffer_is_viewed_not_copied():
    buf = bytearray(b"1 1:1\n")
    assert np.shares_memory(_parse._as_uint8(buf), np.frombuffer(buf, dtype=np.uint8))
    arr = np.frombuffer(buf, dtype=np.uint8)
    assert _parse._as_uint8(arr) is arr


@pytest.mark.parametrize("buf", ["1 1:1\n", np.zeros(3, np.int32), np.zeros((2, 2), np.uint8)])
def test_bad_buffer_types(buf):
    with pytest.raises(TypeError):
        parse_block(buf, file="f", first_line=1, min_index=1, max_index=10)


@pytest.mark.parametrize("min_index, max_index", [(-1, 10), (5, 4), (0, INDEX_LIMIT + 1)])
def test_bad_index_limits(min_index, max_index):
    with pytest.raises(InvalidParameterError):
        parse(b"1 1:1\n", min_index=min_index, max_index=max_index)


# Around float32's overflow threshold 2**128 - 2**103 = 3.40282356779733661637...e38: the
# parser must agree with np.float32 (3.4028236e38 already overflows).
F32_EDGE = ["3.4028234663852886e38", "3.4028235e38", "3.40282356e38", "3.402823567797336e38",
            "3.4028235677973366e38", "3.40282357e38", "3.4028236e38", "1e39", "1e308"]


@pytest.mark.parametrize("token", F32_EDGE + ["-" + t for t in F32_EDGE])
def test_float32_max_value_agrees_with_numpy(token):
    with np.errstate(over="ignore"):
        overflows = bool(np.isinf(np.float32(float(token))))
    text = f"1 1:1 2:{token}\n"
    if overflows:
        with pytest.raises(FormatError, match=r"line 1, column 9: .*overflows float32"):
            parse(text, max_value=FLOAT32_MAX_VALUE)
    else:
        block = parse(text, max_value=FLOAT32_MAX_VALUE)
        assert np.isfinite(block.values.astype(np.float32)).all()
    assert bits(parse(text).values[1]) == bits(float(token))     # no limit by default


def test_max_value_is_inclusive_and_ignores_labels():
    block = parse(b"1e39 1:100 2:-100 3:99.5\n", max_value=100.0)
    assert_block_equal(block, [1e39], [0, 3], [1, 2, 3], [100, -100, 99.5])
    with pytest.raises(InvalidParameterError, match="max_value"):
        parse(b"1 1:1\n", max_value=0.0)


def test_index_limits_inclusive():
    block = parse(b"1 1:1 123:2\n", min_index=1, max_index=123)
    assert (block.min_index, block.max_index) == (1, 123)
    block = parse(f"1 {INDEX_LIMIT}:1\n")
    assert block.indices[0] == INDEX_LIMIT


def test_sort_indices_repairs_lines_and_moves_slow_values():
    slow = "0.12345678901234567890"
    text = f"1 5:1 3:{slow} 4:2\n2 2:1 1:1e-300\n3 1:1 2:2\n"
    block = parse(text, sort_indices=True)
    assert_block_equal(block, [1, 2, 3], [0, 3, 5, 7], [3, 4, 5, 1, 2, 1, 2],
                       [float(slow), 2, 1, 1e-300, 1, 1, 2])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 10**5), min_size=1, max_size=80, unique=True),
       st.randoms(use_true_random=False))
def test_sort_indices_random_order(idx, rnd):
    values = {i: repr(rnd.uniform(-1, 1)) for i in idx}  # mostly slow-path tokens
    shuffled = list(idx)
    rnd.shuffle(shuffled)
    text = "1 " + " ".join(f"{i}:{values[i]}" for i in shuffled) + "\n"
    block = parse(text, min_index=0, sort_indices=True)
    order = sorted(idx)
    assert_block_equal(block, [1], [0, len(idx)], order, [float(values[i]) for i in order])


# ---------------------------------------------------------------------------------------
# Errors: FormatError with file, line, column and the token.
# ---------------------------------------------------------------------------------------

BELOW = ("index 0 is below the smallest allowed index 1 (one-based indices; "
         "use --zero-based yes for zero-based files)")
UNSORTED = ("indices not strictly increasing (5 after 7); "
            "pass --sort-indices to repair unsorted input")

ERRORS = [
    # (bad line, column, message fragment, parse options)
    ("abc 1:2", 1, "non-numeric label 'abc'", {}),
    ("1x 1:2", 1, "non-numeric label '1x'", {}),
    ("1:2 3:4", 1, "missing label", {}),
    ("nan 1:1", 1, "non-finite value 'nan'", {}),
    ("-Infinity 1:1", 1, "non-finite value '-Infinity'", {}),
    ("1e999 1:1", 1, "non-finite value '1e999'", {}),
    ("1 abc", 3, "expected 'index:value', got 'abc'", {}),
    ("1 2:3 foo", 7, "expected 'index:value', got 'foo'", {}),
    ("1 2:3\t7", 7, "expected 'index:value', got '7'", {}),
    ("1 0:1", 3, BELOW, {}),
    ("1 -3:1", 3, "negative index -3", {"min_index": 0}),
    ("1 1:1 7:1 5:1", 11, UNSORTED, {}),
    ("1 5:1 5:2", 7, "duplicate index 5", {}),
    ("1 5:1 5:2", 7, "duplicate index 5", {"sort_indices": True}),
    ("1 5:1 3:1 5:2", 11, "duplicate index 5", {"sort_indices": True}),
    ("1 900:0.12345678901234567890 3:1 900:2", 34, "duplicate index 900",
     {"sort_indices": True}),
    ("1 2:nan", 5, "non-finite value 'nan'", {}),
    ("1 2:-INF", 5, "non-finite value '-INF'", {}),
    ("1 2:infinity", 5, "non-finite value 'infinity'", {}),
    ("1 2:1e999", 5, "non-finite value '1e999'", {}),
    ("1 2:1e999", 5, "non-finite value '1e999'", {"max_value": FLOAT32_MAX_VALUE}),
    ("1 2:1e39", 5, "value '1e39' overflows float32 (largest 3.4028235e+38) and would be "
     "stored as inf; use --dtype float64", {"max_value": FLOAT32_MAX_VALUE}),
    ("1 2:-1000 3:1", 5, "value '-1000' out of range (magnitude above max_value=100.0)",
     {"max_value": 100.0}),   # the kernel's fast path
    ("1 200:1", 3, "index 200 above the largest allowed index 123 (--n-features)",
     {"max_index": 123}),
    ("1 5:", 3, "missing value after ':'", {}),
    ("1 5: 6:1", 3, "missing value after ':'", {}),
    ("1 :5", 3, "missing index before ':'", {}),
    ("1 a:5", 3, "non-numeric index 'a'", {}),
    ("1 5:abc", 5, "non-numeric value 'abc'", {}),
    ("1 5:1.2.3", 5, "non-numeric value '1.2.3'", {}),
    ("1 5:1e", 5, "non-numeric value '1e'", {}),
    ("1 5:1_0", 5, "non-numeric value '1_0'", {}),
    ("1 5:1:2", 5, "non-numeric value '1:2'", {}),
    ("1 5:1\x00", 5, "non-numeric value '1\\x00'", {}),
    ("1 99999999999999999999:1", 3, "index '99999999999999999999' out of range", {}),
    ("1 qid:x 2:1", 3, "invalid qid 'qid:x'", {}),
    ("1 2:1 qid:3", 7, "'qid:3' must come right after the label", {}),
]


@pytest.mark.parametrize("bad, column, fragment, options", ERRORS)
def test_errors_name_line_column_and_token(bad, column, fragment, options):
    text = ("1 1:1\r\n# comment 1:2\n\n" + bad + "\n2 1:1\n").encode()
    with pytest.raises(FormatError) as info:
        parse(text, first_line=10, **options)
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.file, err.line, err.column) == ("in.svm", 13, column)
    assert fragment in str(err)
    assert str(err).startswith(f"in.svm, line 13, column {column}: ")


def test_error_on_first_line_of_block_and_last_line_without_newline():
    with pytest.raises(FormatError) as info:
        parse(b"1 x", first_line=7)
    assert (info.value.line, info.value.column) == (7, 3)


def test_earliest_error_wins():
    # A slow-path overflow (found after the kernel) precedes a later syntax error.
    with pytest.raises(FormatError, match="column 5: non-finite value '1e999'"):
        parse(b"1 2:1e999 3:abc\n")
    with pytest.raises(FormatError, match="line 2, column 3: expected"):
        parse(b"1 2:1\n1 x 3:1e999\n")


def test_long_tokens_are_truncated():
    with pytest.raises(FormatError) as info:
        parse(b"1 2:" + b"x" * 500 + b"\n")
    message = str(info.value)
    assert "'" + "x" * 40 + "...'" in message
    assert len(message) < 120
