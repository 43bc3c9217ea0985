"""A small filter language for ``hypaware query --where``, parsed without eval.

Grammar (keywords are case-insensitive)::

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

Literals are converted to the column's type (a time column takes an ISO
time such as ``'2026-01-05T10:00:00Z'``), so a mistyped literal or an
unknown column is an error that names it, before any data is read.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.core.registry import did_you_mean
from hypaware.querying.errors import QueryInputError

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc

__all__ = ["parse_where"]

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
            raise QueryInputError(f"where: unexpected {text[start]!r} at position {start + 1}")
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
    def __init__(self, text: str, schema: pa.Schema) -> None:
        self.text = text
        self.schema = schema
        self.toks = _tokenize(text)
        self.i = 0

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise QueryInputError(f"where: {self.text!r} ends too early")
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
            raise QueryInputError(f"where: expected {text!r}, found {found}{where}")

    def parse(self) -> pc.Expression:
        if not self.toks:
            raise QueryInputError("where: the expression is empty")
        expr = self.or_()
        tok = self.peek()
        if tok is not None:
            raise QueryInputError(f"where: unexpected {tok.text!r} at position {tok.pos + 1}")
        return expr

    def or_(self) -> pc.Expression:
        expr = self.and_()
        while self.accept("kw", "or"):
            expr = expr | self.and_()
        return expr

    def and_(self) -> pc.Expression:
        expr = self.not_()
        while self.accept("kw", "and"):
            expr = expr & self.not_()
        return expr

    def not_(self) -> pc.Expression:
        if self.accept("kw", "not"):
            return ~self.not_()
        return self.primary()

    def primary(self) -> pc.Expression:
        import pyarrow.compute as pc

        if self.accept("punct", "("):
            expr = self.or_()
            self.expect("punct", ")")
            return expr
        name, field = self.column()
        ref = pc.field(name)
        tok = self.take()
        if tok.kind == "op":
            value = self.literal(field)
            if value is None:
                raise QueryInputError(
                    f"where: compare {name!r} with null using 'is null' / 'is not null'"
                )
            ops = {
                "=": ref.__eq__,
                "==": ref.__eq__,
                "!=": ref.__ne__,
                "<>": ref.__ne__,
                "<": ref.__lt__,
                "<=": ref.__le__,
                ">": ref.__gt__,
                ">=": ref.__ge__,
            }
            result: pc.Expression = ops[tok.text](value)
            return result
        if tok.kind == "kw" and tok.text == "is":
            negate = self.accept("kw", "not")
            self.expect("kw", "null")
            return ref.is_valid() if negate else ref.is_null()
        negate = False
        if tok.kind == "kw" and tok.text == "not":
            negate = True
            tok = self.take()
        if tok.kind == "kw" and tok.text == "in":
            self.expect("punct", "(")
            values = [self.literal(field)]
            while self.accept("punct", ","):
                values.append(self.literal(field))
            self.expect("punct", ")")
            import pyarrow as pa

            expr = ref.isin(pa.array(values, type=field.type))
            return ~expr if negate else expr
        raise QueryInputError(
            f"where: expected a comparison, 'in' or 'is null' after {name!r}, "
            f"found {tok.text!r} at position {tok.pos + 1}"
        )

    def column(self) -> tuple[str, pa.Field]:
        tok = self.take()
        if tok.kind == "quoted":
            name = tok.text[1:-1]
        elif tok.kind == "word":
            name = tok.text
        else:
            raise QueryInputError(
                f"where: expected a column name, found {tok.text!r} at position {tok.pos + 1}"
            )
        index = self.schema.get_field_index(name)
        if index < 0:
            raise QueryInputError(
                f"where: no column {name!r}{did_you_mean(name, self.schema.names)} "
                f"(columns: {', '.join(self.schema.names)})"
            )
        return name, self.schema.field(index)

    def literal(self, field: pa.Field) -> Any:
        tok = self.take()
        if tok.kind == "str":
            quote = tok.text[0]
            raw: Any = tok.text[1:-1].replace(quote * 2, quote)
        elif tok.kind == "num":
            raw = float(tok.text) if re.search(r"[.eE]", tok.text) else int(tok.text)
        elif tok.kind == "kw" and tok.text in ("true", "false"):
            raw = tok.text == "true"
        elif tok.kind == "kw" and tok.text == "null":
            return None
        else:
            raise QueryInputError(
                f"where: expected a value for {field.name!r}, found {tok.text!r} "
                f"at position {tok.pos + 1}"
            )
        return convert_literal(raw, field)


def convert_literal(raw: Any, field: pa.Field) -> pa.Scalar:
    """`raw` as a scalar of `field`'s type; `QueryInputError` naming the column if it is not one."""
    import pyarrow as pa

    typ = field.type
    try:
        if pa.types.is_timestamp(typ) or pa.types.is_date(typ):
            if not isinstance(raw, str):
                raise ValueError("expected an ISO date or time in quotes")
            when = parse_time(raw, what=f"value for {field.name!r}")
            if pa.types.is_date(typ):
                return pa.scalar(when.date(), type=typ)
            if typ.tz is None:
                return pa.scalar(when.astimezone(UTC).replace(tzinfo=None), type=typ)
            return pa.scalar(when, type=typ)
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            if not isinstance(raw, str):
                raise ValueError("expected text in quotes")
            return pa.scalar(raw, type=typ)
        if pa.types.is_boolean(typ) and not isinstance(raw, bool):
            raise ValueError("expected true or false")
        return pa.scalar(raw).cast(typ)
    except QueryInputError:
        raise
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
        raise QueryInputError(
            f"where: {raw!r} is not a value of column {field.name!r} ({typ}): {exc}"
        ) from exc


def parse_time(value: str | datetime | date, *, what: str = "time") -> datetime:
    """A time given as a datetime, a date or an ISO 8601 string, as an aware UTC datetime.

    A date is its midnight UTC; a time without a zone is UTC. Raises
    `QueryInputError` naming `what` for anything else.
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
            raise QueryInputError(
                f"{what}: {value!r} is not an ISO 8601 date or time "
                "(e.g. 2026-01-05 or 2026-01-05T10:30:00Z)"
            ) from None
    else:
        raise QueryInputError(f"{what}: expected a datetime, date or ISO string, got {value!r}")
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def parse_where(text: str, schema: pa.Schema) -> pc.Expression:
    """`text` in the filter language above as a pyarrow expression over `schema`.

    Raises `QueryInputError` naming the position, the column or the value at fault.
    """
    return _Parser(text, schema).parse()
