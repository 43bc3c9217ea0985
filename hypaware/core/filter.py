"""One filter language for every reader: a small expression tree and its text form.

A filter is a tree of `Compare`, `IsIn`, `IsNull`, `Not`, `And` and `Or`
nodes. It is built in Python (``col("tokens") > 10``) or parsed from text
(``parse_filter("tokens > 10 and role = 'user'")``), checked against a
dataset's schema once (`hypaware.core.filter_bind.bind_filter`), and then
compiled for whichever reader answers: a pyarrow expression for the cache
and Parquet files (`hypaware.core.filter_bind.to_arrow`), a pyiceberg
expression for Iceberg scans (`hypaware.iceberg.filter.to_iceberg`), where it
is pushed into scan planning.

Text grammar (keywords are case-insensitive)::

    expr    := or
    or      := and ("or" and)*
    and     := not ("and" not)*
    not     := "not" not | primary
    primary := "(" expr ")"
             | column op literal                      op: = == != <> < <= > >=
             | column ["not"] "in" "(" literal ("," literal)* ")"
             | column "is" ["not"] "null"
    column  := name | `any name`                      name: [A-Za-z_][A-Za-z0-9_]*
    literal := 'text' | "text" | number | true | false

A tree straight from the parser holds literals as written (text, numbers,
booleans); binding converts each to its column's type (a time column takes
an ISO time such as ``'2026-01-05T10:00:00Z'``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any, Literal

import attrs

from hypaware.core.errors import FilterError

__all__ = [
    "And",
    "Col",
    "Compare",
    "Filter",
    "IsIn",
    "IsNull",
    "Not",
    "Op",
    "Or",
    "all_of",
    "col",
    "columns_of",
    "parse_filter",
    "parse_time",
]

Op = Literal["==", "!=", "<", "<=", ">", ">="]
OPS: tuple[Op, ...] = ("==", "!=", "<", "<=", ">", ">=")


class Filter:
    """A node of a filter tree; combine nodes with ``&``, ``|`` and ``~``."""

    __slots__ = ()

    def __and__(self, other: Filter) -> Filter:
        return And((self, _checked(other)))

    def __or__(self, other: Filter) -> Filter:
        return Or((self, _checked(other)))

    def __invert__(self) -> Filter:
        return Not(self)


def _checked(other: object) -> Filter:
    if not isinstance(other, Filter):
        raise FilterError(f"filter: cannot combine a filter with {type(other).__name__}")
    return other


@attrs.frozen
class Compare(Filter):
    """``column <op> value``; a null never compares true."""

    column: str
    op: Op
    value: Any

    def __str__(self) -> str:
        return f"{_name(self.column)} {'=' if self.op == '==' else self.op} {_lit(self.value)}"


@attrs.frozen
class IsIn(Filter):
    """``column in (values...)``."""

    column: str
    values: tuple[Any, ...]

    def __str__(self) -> str:
        return f"{_name(self.column)} in ({', '.join(_lit(v) for v in self.values)})"


@attrs.frozen
class IsNull(Filter):
    """``column is null``."""

    column: str

    def __str__(self) -> str:
        return f"{_name(self.column)} is null"


@attrs.frozen
class Not(Filter):
    operand: Filter

    def __str__(self) -> str:
        if isinstance(self.operand, IsNull):
            return f"{_name(self.operand.column)} is not null"
        return f"not ({self.operand})"


@attrs.frozen
class And(Filter):
    operands: tuple[Filter, ...]

    def __str__(self) -> str:
        return " and ".join(f"({o})" for o in self.operands)


@attrs.frozen
class Or(Filter):
    operands: tuple[Filter, ...]

    def __str__(self) -> str:
        return " or ".join(f"({o})" for o in self.operands)


def _name(column: str) -> str:
    return column if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", column) else f"`{column}`"


def _lit(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime | date):
        value = value.isoformat()
    text = str(value)
    return "'" + text.replace("'", "''") + "'"


class Col:
    """A column to build filters from: ``col("tokens") > 10``, ``col("role").isin(["a"])``."""

    __slots__ = ("name",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, value: object) -> Compare:  # type: ignore[override]
        return Compare(self.name, "==", value)

    def __ne__(self, value: object) -> Compare:  # type: ignore[override]
        return Compare(self.name, "!=", value)

    def __lt__(self, value: object) -> Compare:
        return Compare(self.name, "<", value)

    def __le__(self, value: object) -> Compare:
        return Compare(self.name, "<=", value)

    def __gt__(self, value: object) -> Compare:
        return Compare(self.name, ">", value)

    def __ge__(self, value: object) -> Compare:
        return Compare(self.name, ">=", value)

    def isin(self, values: Any) -> IsIn:
        return IsIn(self.name, tuple(values))

    def is_null(self) -> IsNull:
        return IsNull(self.name)

    def is_not_null(self) -> Filter:
        return Not(IsNull(self.name))


def col(name: str) -> Col:
    """The column `name`, to build a filter with Python operators."""
    return Col(name)


def all_of(*filters: Filter | None) -> Filter | None:
    """The filters joined by ``and`` (None ignored); None when there are none."""
    kept = [f for f in filters if f is not None]
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else And(tuple(kept))


def walk(node: Filter) -> Iterator[Filter]:
    """Every node of the tree, `node` first."""
    yield node
    if isinstance(node, Not):
        yield from walk(node.operand)
    elif isinstance(node, And | Or):
        for operand in node.operands:
            yield from walk(operand)


def columns_of(node: Filter) -> set[str]:
    """The columns a filter reads."""
    return {n.column for n in walk(node) if isinstance(n, Compare | IsIn | IsNull)}


# --------------------------------------------------------------------- parser

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<str>'(?:[^']|'')*'|"(?:[^"]|"")*")
      | (?P<num>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
      | (?P<op><=|>=|!=|<>|==|=|<|>)
      | (?P<punct>[(),])
      | (?P<quoted>`[^`]+`)
      | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)
_KEYWORDS = {"and", "or", "not", "in", "is", "null", "true", "false"}
_OP_OF: dict[str, Op] = {
    "=": "==",
    "==": "==",
    "!=": "!=",
    "<>": "!=",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
}
_NULL = object()


@attrs.frozen
class _Tok:
    kind: str
    text: str
    pos: int


def _tokenize(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            start = len(text) - len(text[pos:].lstrip())
            raise FilterError(f"where: unexpected {text[start]!r} at position {start + 1}")
        kind = m.lastgroup
        assert kind is not None
        value = m.group(kind)
        start = m.start(kind)
        if kind == "word" and value.lower() in _KEYWORDS:
            out.append(_Tok("kw", value.lower(), start))
        else:
            out.append(_Tok(kind, value, start))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise FilterError(f"where: {self.text!r} ends too early")
        self.i += 1
        return tok

    def accept(self, kind: str, text: str | None = None) -> bool:
        tok = self.peek()
        if tok is not None and tok.kind == kind and (text is None or tok.text == text):
            self.i += 1
            return True
        return False

    def expect(self, kind: str, text: str) -> None:
        tok = self.peek()
        if not self.accept(kind, text):
            found = "the end" if tok is None else repr(tok.text)
            where = "" if tok is None else f" at position {tok.pos + 1}"
            raise FilterError(f"where: expected {text!r}, found {found}{where}")

    def parse(self) -> Filter:
        if not self.toks:
            raise FilterError("where: the expression is empty")
        expr = self.or_()
        tok = self.peek()
        if tok is not None:
            raise FilterError(f"where: unexpected {tok.text!r} at position {tok.pos + 1}")
        return expr

    def or_(self) -> Filter:
        parts = [self.and_()]
        while self.accept("kw", "or"):
            parts.append(self.and_())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def and_(self) -> Filter:
        parts = [self.not_()]
        while self.accept("kw", "and"):
            parts.append(self.not_())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def not_(self) -> Filter:
        if self.accept("kw", "not"):
            return Not(self.not_())
        return self.primary()

    def primary(self) -> Filter:
        if self.accept("punct", "("):
            expr = self.or_()
            self.expect("punct", ")")
            return expr
        name = self.column()
        tok = self.take()
        if tok.kind == "op":
            value = self.literal(name)
            if value is _NULL:
                raise FilterError(
                    f"where: compare {name!r} with null using 'is null' / 'is not null'"
                )
            return Compare(name, _OP_OF[tok.text], value)
        if tok.kind == "kw" and tok.text == "is":
            negate = self.accept("kw", "not")
            self.expect("kw", "null")
            return Not(IsNull(name)) if negate else IsNull(name)
        negate = False
        if tok.kind == "kw" and tok.text == "not":
            negate = True
            tok = self.take()
        if tok.kind == "kw" and tok.text == "in":
            self.expect("punct", "(")
            values = [self.literal(name)]
            while self.accept("punct", ","):
                values.append(self.literal(name))
            self.expect("punct", ")")
            if any(v is _NULL for v in values):
                raise FilterError(f"where: 'in' takes values for {name!r}, not null")
            found: Filter = IsIn(name, tuple(values))
            return Not(found) if negate else found
        raise FilterError(
            f"where: expected a comparison, 'in' or 'is null' after {name!r}, "
            f"found {tok.text!r} at position {tok.pos + 1}"
        )

    def column(self) -> str:
        tok = self.take()
        if tok.kind == "quoted":
            return tok.text[1:-1]
        if tok.kind == "word":
            return tok.text
        raise FilterError(
            f"where: expected a column name, found {tok.text!r} at position {tok.pos + 1}"
        )

    def literal(self, column: str) -> Any:
        tok = self.take()
        if tok.kind == "str":
            quote = tok.text[0]
            return tok.text[1:-1].replace(quote * 2, quote)
        if tok.kind == "num":
            return float(tok.text) if re.search(r"[.eE]", tok.text) else int(tok.text)
        if tok.kind == "kw" and tok.text in ("true", "false"):
            return tok.text == "true"
        if tok.kind == "kw" and tok.text == "null":
            return _NULL
        raise FilterError(
            f"where: expected a value for {column!r}, found {tok.text!r} at position {tok.pos + 1}"
        )


def parse_filter(text: str) -> Filter:
    """`text` in the filter language above as a tree (literals as written, not yet bound).

    Raises `FilterError` naming the position or the token at fault.
    """
    return _Parser(text).parse()


def parse_time(value: str | datetime | date, *, what: str = "time") -> datetime:
    """A time given as a datetime, a date or an ISO 8601 string, as an aware UTC datetime.

    A date is its midnight UTC; a time without a zone is UTC. Raises
    `FilterError` naming `what` for anything else.
    """
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, date):
        when = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise FilterError(
                f"{what}: {value!r} is not an ISO 8601 date or time "
                "(e.g. 2026-01-05 or 2026-01-05T10:30:00Z)"
            ) from None
    else:
        raise FilterError(f"{what}: expected a datetime, date or ISO string, got {value!r}")
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
