"""Reading a JSON model document as a stream: a parser of its two top levels, and the
base64 decoder its weights go through.

:class:`DocumentReader` reads a binary file block by block. The values of the top-level
keys are parsed whole by :mod:`json`'s C decoder (the header: a few kB, at most
:data:`HEADER_LIMIT`), except the objects of ``coef`` and ``intercept``, whose
``base64`` strings are handed, a block at a time, to the :class:`Base64Array` an
``on_value`` callback returns (or skipped, their place in the file noted, when the header
needed to allocate them has not been read yet). So whatever the layout of a valid
document (keys in any order, any indentation, JSON escapes), nothing but the header and
one block is ever held besides the weights' own arrays.
"""

from __future__ import annotations

import binascii
import json
import re

import numpy as np

from .exceptions import ModelError

__all__ = ["DocumentReader", "Base64Array", "HEADER_LIMIT", "crc32c_extend"]

HEADER_LIMIT = 32 << 20
"""Most bytes a model file may hold besides its weights' base64 (its history included)."""
BLOCK = 1 << 20
_UNIT = 32          # base64 characters decoded together: 24 bytes, 3 whole float64s
_NOT_WS = re.compile(rb"[^ \t\n\r]")
_ESC = re.compile(rb"\\(?:/|u([0-9a-fA-F]{4}))")


def crc32c_extend(crc: int, data) -> int:
    """The CRC-32C of the bytes hashed into ``crc`` followed by ``data``."""
    import google_crc32c
    return int(google_crc32c.extend(crc, data if isinstance(data, bytes) else
                                    np.frombuffer(data, dtype=np.uint8)))


class Base64Array:
    """Decodes one base64 value slice by slice into a preallocated float64 array of
    ``shape``, checking that every weight is finite and computing the CRC-32C of the raw
    bytes."""

    def __init__(self, shape, field: str, source: str):
        self.out = np.empty(shape, dtype="<f8")
        self.flat = self.out.reshape(-1)
        self.raw = self.flat.view(np.uint8)
        self.field, self.source = field, source
        self.pos = self.chars = self.crc = 0
        self.pending = self.esc = b""
        self.padded = False

    def _bad(self, message):
        return ModelError(message, file=self.source, field=self.field)

    def feed(self, text: bytes, escaped: bool = True) -> None:
        """More characters of the value (``escaped``: as in the file, JSON escapes and all)."""
        if escaped and (self.esc or b"\\" in text):
            text = self._unescape(self.esc + text, final=False)
        text = self.pending + text
        n = len(text) // _UNIT * _UNIT
        self.pending = text[n:]
        if n:
            self._decode(text[:n])

    def _unescape(self, text: bytes, final: bool) -> bytes:
        cut = text.rfind(b"\\", max(0, len(text) - 5))
        if not final and cut >= 0 and not _ESC.match(text, cut):   # cut by the block
            text, self.esc = text[:cut], text[cut:]
        else:
            self.esc = b""
        return _ESC.sub(lambda m: b"/" if m.group(1) is None else
                        chr(int(m.group(1), 16)).encode("utf-8"), text)

    def _decode(self, text: bytes) -> None:
        if self.padded:
            raise self._bad(f"base64 goes on after its padding (character {self.chars:,})")
        try:
            raw = binascii.a2b_base64(text, strict_mode=True)
        except binascii.Error as exc:
            raise self._bad(f"not base64 ({exc}) in characters {self.chars:,} to "
                            f"{self.chars + len(text):,}") from None
        self.chars += len(text)
        self.padded = text.endswith(b"=")
        end = self.pos + len(raw)
        if end > self.raw.size:
            raise self._bad(f"base64 holds more than the {self.raw.size:,} bytes of shape "
                            f"{list(self.out.shape)}")
        self.raw[self.pos:end] = np.frombuffer(raw, dtype=np.uint8)
        self.crc = crc32c_extend(self.crc, raw)
        lo, hi = self.pos // 8, end // 8
        bad = ~np.isfinite(self.flat[lo:hi])
        if bad.any():
            i = lo + int(np.argmax(bad))
            where = [int(j) for j in np.unravel_index(i, self.out.shape)]
            raise self._bad(f"weight {where} is {self.flat[i]}: weights must be finite")
        self.pos = end

    def close(self) -> tuple[np.ndarray, int]:
        """The array and the CRC-32C of its bytes, once the whole value was fed."""
        if self.esc:
            self.pending += self._unescape(self.esc, final=True)
        if self.pending:
            self._decode(self.pending)
            self.pending = b""
        if self.pos != self.raw.size:
            raise self._bad(f"base64 holds {self.pos:,} bytes, expected {self.raw.size:,} "
                            f"(shape {list(self.out.shape)} of float64)")
        return self.out.astype(np.float64, copy=False), self.crc


class DocumentReader:
    """Parses the JSON object in the binary file ``f`` (module doc).

    ``on_value(field, document so far, field's object so far)`` is called where the
    ``base64`` string of a top-level ``field`` in ``weight_fields`` begins; it returns a
    :class:`Base64Array` to stream the value into, or None. :meth:`read` returns the
    document, each such value replaced by ``"\\x00FIELD"``; :attr:`values` maps ``field``
    to ``(sink or None, file offset, length)`` of the value's characters."""

    def __init__(self, f, source: str, weight_fields, on_value):
        self.f, self.source = f, source
        self.weight_fields, self.on_value = weight_fields, on_value
        self.buf, self.pos, self.base, self.eof = b"", 0, 0, False
        self.kept = 0
        self.values: dict = {}

        def pairs(items):
            out = {}
            for k, v in items:
                if k in out:
                    raise self._error("appears twice in one object", field=k)
                out[k] = v
            return out
        self.decoder = json.JSONDecoder(object_pairs_hook=pairs)

    def _error(self, message, field=None):
        return ModelError(message, file=self.source, field=field)

    def _more(self) -> bool:
        chunk = b"" if self.eof else self.f.read(BLOCK)
        if not chunk:
            self.eof = True
            return False
        self.base += self.pos
        self.buf, self.pos = self.buf[self.pos:] + chunk, 0
        return True

    def _peek(self) -> bytes:
        """The next character after whitespace (b"" at the end of the file)."""
        while True:
            m = _NOT_WS.search(self.buf, self.pos)
            if m:
                self.pos = m.start()
                return m.group()
            self.pos = len(self.buf)
            if not self._more():
                return b""

    def _expect(self, chars: bytes, what: str) -> bytes:
        c = self._peek()
        if not c or c not in chars:
            where = f"byte {self.base + self.pos:,}"
            raise self._error(f"truncated: the file ends where {what} should be" if not c else
                              f"not valid JSON: expected {what} at {where}, found {c!r}")
        self.pos += 1
        return c

    def _value(self):
        """The JSON value at the current position, parsed by :mod:`json`."""
        self._peek()
        win = 1 << 16
        while True:
            chunk = self.buf[self.pos:self.pos + win]
            whole = self.eof and self.pos + win >= len(self.buf)
            try:
                text = chunk.decode("utf-8")
            except UnicodeDecodeError as exc:
                if exc.reason != "unexpected end of data" or whole:
                    raise self._error(f"not UTF-8 text (byte {self.base + self.pos + exc.start:,}"
                                      f")") from None
                text = chunk[:exc.start].decode("utf-8")
            try:
                value, end = self.decoder.raw_decode(text)
                if end < len(text) or whole:        # (a number may go on in the next block)
                    break
            except json.JSONDecodeError as exc:
                if whole:
                    at = self.base + self.pos + len(text[:exc.pos].encode())
                    cut = exc.pos >= len(text) - 1 or "Unterminated" in exc.msg
                    raise self._error(f"{'truncated? ' if cut else ''}not valid JSON ({exc.msg}: "
                                      f"byte {at:,})") from None
                if win > HEADER_LIMIT:
                    raise self._error(f"a value of more than {HEADER_LIMIT >> 20} MiB besides "
                                      f"the weights (byte {self.base + self.pos:,}): not a "
                                      f"model file, or damaged") from None
            if self.pos + win >= len(self.buf) and not self._more():
                continue                            # now whole: decide
            win *= 4
        n = len(text[:end].encode())
        self.pos += n
        self.kept += n
        if self.kept > HEADER_LIMIT:
            raise self._error(f"more than {HEADER_LIMIT >> 20} MiB besides its weights: not a "
                              f"model file, or damaged")
        return value

    def _object(self, on_member, out=None) -> dict:
        """The object at the current position, each member's value from
        ``on_member(key, object so far)``, into ``out``."""
        out = {} if out is None else out
        self._expect(b"{", "an object")
        if self._peek() == b"}":
            self.pos += 1
            return out
        while True:
            if self._peek() != b'"':
                self._expect(b'"', "a key")
            key = self._value()
            if key in out:
                raise self._error("appears twice in one object", field=key)
            self._expect(b":", "':'")
            out[key] = on_member(key, out)
            if self._expect(b",}", "',' or '}'") == b"}":
                return out

    def read(self) -> dict:
        doc = {}

        def top(key, _):
            if key not in self.weight_fields or self._peek() != b"{":
                return self._value()
            return self._object(lambda k, obj: self._stream(key, doc, obj)
                                if k == "base64" and self._peek() == b'"' else self._value())
        self._more()
        if self.buf.startswith(b"\xef\xbb\xbf"):           # a UTF-8 byte order mark
            self.pos = 3
        if self._peek() != b"{":
            raise self._error("not a streamsvm model: the JSON document is not an object")
        self._object(top, out=doc)
        if self._peek():
            raise self._error(f"not valid JSON: more data after the document (byte "
                              f"{self.base + self.pos:,})")
        return doc

    def _stream(self, field: str, doc: dict, obj: dict) -> str:
        if field in self.values:
            raise self._error("appears twice", field=field)
        sink = self.on_value(field, doc, obj)
        self.pos += 1                                   # the opening quote
        start, n = self.base + self.pos, 0
        while True:
            q = self.buf.find(b'"', self.pos)
            end = q if q >= 0 else len(self.buf)
            if sink is not None:
                sink.feed(self.buf[self.pos:end])
            n += end - self.pos
            self.pos = end
            if q >= 0:
                break
            if not self._more():
                raise self._error("truncated: the file ends inside its base64", field=field)
        self.pos += 1
        self.values[field] = (sink, start, n)
        return "\x00" + field
