"""Kinds of JSON value, each in two forms: an exact check of one value, and
the same rule over a whole Arrow column.

`Kind.check` raises `Violation` naming the field (relative to the kind,
prefixed on the way up by the containers) and what was expected: the
streaming reader uses it, one event at a time. `Kind.arrow` is the Arrow
type a value of the kind parses to, and `Kind.violations(array)` flags, as
a numpy mask, the rows of an Arrow array that `check` would refuse — ingest
uses it on whole blocks. Shapes (`Shape`, objects with named fields) are
built from these in schema.py, the one place the history's shape is
declared.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MAX = 2**31 - 1


class Violation(Exception):
    """A field of one event breaks the contract.

    Kinds raise it with the path relative to what they check; containers
    prefix their own part on the way up, so paths cost nothing on valid input.
    """

    def __init__(self, field: str, expected: str, got: Any = None, *, show_got: bool = True):
        self.field = field
        self.expected = expected
        self.got = got
        self.show_got = show_got
        super().__init__(self.describe())

    def within(self, prefix: str) -> "Violation":
        field = prefix + self.field if self.field.startswith("[") or not self.field \
            else f"{prefix}.{self.field}"
        return Violation(field, self.expected, self.got, show_got=self.show_got)

    def describe(self) -> str:
        text = f"field '{self.field}': expected {self.expected}"
        if self.show_got:
            text += f", got {show(self.got)}"
        return text


def show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return repr(value)


def nulls(array: pa.Array) -> np.ndarray:
    """The rows of `array` that are null, from its validity bitmap (a tenth
    of the time of `is_null` and a conversion, which show in a block's
    hundreds of calls)."""
    if isinstance(array, pa.ChunkedArray):
        return np.concatenate([np.zeros(0, dtype=bool), *map(nulls, array.chunks)])
    n = len(array)
    if array.null_count == 0:
        return np.zeros(n, dtype=bool)
    if array.null_count == n:
        return np.ones(n, dtype=bool)
    bits = np.frombuffer(array.buffers()[0], dtype=np.uint8)
    return ~np.unpackbits(bits, count=array.offset + n, bitorder="little")[array.offset:] \
        .view(bool)


def as_mask(mask) -> np.ndarray:
    """A boolean Arrow result as numpy, null counting as false."""
    return np.asarray(pc.fill_null(mask, False))


# -- kinds ----------------------------------------------------------------------

class Kind:
    """One kind of JSON value: its exact check, its Arrow type, and the same
    rule over an Arrow array (`invalid`: the non-null rows that break it)."""

    nullable = False
    expected = "a value"
    arrow: pa.DataType

    def check(self, value: Any) -> None:
        raise NotImplementedError

    def invalid(self, array: pa.Array) -> np.ndarray:
        return np.zeros(len(array), dtype=bool)

    def violations(self, array: pa.Array) -> np.ndarray:
        """Rows of `array` that break this kind (null ones unless nullable)."""
        bad = self.invalid(array)
        return bad if self.nullable else bad | nulls(array)


class Int(Kind):
    def __init__(self, expected: str, low: int = INT64_MIN, high: int = INT64_MAX,
                 arrow: pa.DataType = pa.int64()):
        self.expected, self.low, self.high, self.arrow = expected, low, high, arrow

    def check(self, value: Any) -> None:
        # JSON integers only: Python's bool is an int, JSON's true is not.
        if type(value) is not int or not self.low <= value <= self.high:
            raise Violation("", self.expected, value)

    def invalid(self, array: pa.Array) -> np.ndarray:
        # Arrow's parser already refused what the array's type cannot hold.
        bits = array.type.bit_width
        if self.low <= -(2 ** (bits - 1)) and self.high >= 2 ** (bits - 1) - 1:
            return np.zeros(len(array), dtype=bool)
        return as_mask(pc.or_(pc.less(array, self.low), pc.greater(array, self.high)))


class Text(Kind):
    expected = "a string"
    arrow = pa.string()

    def __init__(self, choices: tuple[str, ...] | None = None):
        self.choices = choices
        if choices is not None:
            self.expected = "one of " + ", ".join(choices)

    def check(self, value: Any) -> None:
        if type(value) is not str or (self.choices is not None and value not in self.choices):
            raise Violation("", self.expected, value)

    def invalid(self, array: pa.Array) -> np.ndarray:
        if self.choices is None:
            return np.zeros(len(array), dtype=bool)
        return ~as_mask(pc.is_in(array, pa.array(self.choices))) & ~nulls(array)


class Base64Text(Kind):
    expected = "base64 text"
    arrow = pa.string()
    # What base64.b64decode(validate=True) accepts: whole quanta, padding last.
    PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"

    def check(self, value: Any) -> None:
        if type(value) is not str:
            raise Violation("", "a string", value)
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise Violation("", self.expected, value) from None

    def invalid(self, array: pa.Array) -> np.ndarray:
        return ~as_mask(pc.match_substring_regex(array, self.PATTERN)) & ~nulls(array)


class Flag(Kind):
    expected = "true or false"
    arrow = pa.bool_()

    def check(self, value: Any) -> None:
        if type(value) is not bool:
            raise Violation("", self.expected, value)


class Nullable(Kind):
    nullable = True

    def __init__(self, kind: Kind):
        self.kind, self.arrow = kind, kind.arrow
        self.expected = kind.expected + " or null"

    def check(self, value: Any) -> None:
        if value is not None:
            try:
                self.kind.check(value)
            except Violation as v:
                if v.field:  # inside the value: null was not the alternative there
                    raise
                raise Violation(v.field, v.expected + " or null", v.got) from None

    def invalid(self, array: pa.Array) -> np.ndarray:
        return self.kind.invalid(array)


class Null(Kind):
    """Always null (what is not known yet), typed as what it becomes."""

    nullable = True
    expected = "null"

    def __init__(self, arrow: pa.DataType):
        self.arrow = arrow

    def check(self, value: Any) -> None:
        if value is not None:
            raise Violation("", self.expected, value)

    def invalid(self, array: pa.Array) -> np.ndarray:
        return ~nulls(array)


class ListOf(Kind):
    expected = "a list"

    def __init__(self, item: Kind):
        self.item = item
        self.arrow = pa.list_(item.arrow)

    def check(self, value: Any) -> None:
        if type(value) is not list:
            raise Violation("", self.expected, value)
        check = self.item.check
        for i, item in enumerate(value):
            try:
                check(item)
            except Violation as v:
                raise v.within(f"[{i}]") from None

    def invalid(self, array: pa.Array) -> np.ndarray:
        bad = np.zeros(len(array), dtype=bool)
        if len(array) == 0:
            return bad
        items = pc.list_flatten(array)
        if len(items):
            parents = np.asarray(pc.list_parent_indices(array))
            bad[parents[self.item.violations(items)]] = True
        return bad


class Shape(Kind):
    """A JSON object with exactly these fields; those whose kind is nullable
    may be left out. Calling it builds such an object (a constructor)."""

    expected = "an object"

    def __init__(self, fields: dict[str, Kind], rule: "Rule | None" = None):
        self.fields = fields
        self.rule = rule
        self.required = tuple(name for name, kind in fields.items() if not kind.nullable)
        self.allowed = ", ".join(fields) or "no fields"
        self.arrow = pa.struct([(name, kind.arrow) for name, kind in fields.items()])

    def __call__(self, **values: Any) -> dict:
        """The object with these fields, in declared order; a nullable field
        not given is left out."""
        unknown = [name for name in values if name not in self.fields]
        missing = [name for name in self.required if name not in values]
        if unknown or missing:
            raise TypeError(f"fields {self.allowed}: unknown {unknown}, missing {missing}")
        return {name: values[name] for name in self.fields if name in values}

    def check(self, value: Any) -> None:
        if type(value) is not dict:
            raise Violation("", self.expected, value)
        present = 0
        for name, kind in self.fields.items():
            if name not in value:
                if not kind.nullable:
                    raise Violation(name, "to be present", show_got=False)
                continue
            present += 1
            try:
                kind.check(value[name])
            except Violation as v:
                raise v.within(name) from None
        if len(value) > present:
            unknown = next(name for name in value if name not in self.fields)
            raise Violation(unknown, f"no such field (allowed: {self.allowed})", show_got=False)
        if self.rule is not None:
            self.rule.check(value)

    def invalid(self, array: pa.Array, memo: dict | None = None) -> np.ndarray:
        """`array` may have more fields than this shape (a union of shapes,
        VALUE): those must be null here. `memo` keeps each field's verdict
        for the next shape checked over the same array (each f's shapes over
        a block's values, most sharing fields and kinds)."""
        memo = {} if memo is None else memo
        bad = np.zeros(len(array), dtype=bool)
        for i, field in enumerate(array.type):
            kind = self.fields.get(field.name)
            verdict = memo.get((field.name, kind))
            if verdict is None:
                child = array.field(i)
                verdict = ~nulls(child) if kind is None else kind.violations(child)
                memo[(field.name, kind)] = verdict
            bad |= verdict
        if self.rule is not None:
            bad |= self.rule.invalid(array)
        return bad & ~nulls(array)


class Rule:
    """A rule across the fields of one object, in both forms."""

    def __init__(self, check: Callable[[dict], None], invalid: Callable[[pa.Array], Any]):
        self.check = check
        self._invalid = invalid

    def invalid(self, array: pa.Array) -> np.ndarray:
        return as_mask(self._invalid(array))
