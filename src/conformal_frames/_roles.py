"""A role given as an expression: :class:`ExprColumn`, the column an expression becomes.

Every role that names a column (``y``, ``lo``, ``hi``, ``score``,
``weights``, ``counts``, a quantile or a member column, ...) also takes a
narwhals expression (``nw.col("y") * 2``, any backend) or, on polars
frames, a polars expression (``pl.col("y") * 2``).  The parameter checks
(:mod:`conformal_frames._validate`) turn an expression into an
:class:`ExprColumn`: a ``str`` whose value is the name of an internal column
(``__cf_e_...``, a function of the expression's text) and which carries the
expression.  The metrics therefore see a column name as always: their
structural keys, the rows two metrics share and the input checks are those
of a column.  At the frame entry
(:func:`conformal_frames.engine.resolve_roles`) each expression is evaluated
once into its column, on a copy of the caller's frame (lazy stays lazy).

What the user reads names the expression, not the internal column: the
``repr`` of an :class:`ExprColumn` (which every message uses, ``column
{name!r}``) is the expression's text in parentheses, e.g. ``column
(col(y).__mul__(2)) has missing (null/NaN) or infinite values: 3 rows``, and
its declared name in a summary's state columns is :attr:`ExprColumn.declared`
(``~nw_col%28y%29...``).

A leaf module: every layer may import it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, overload

if TYPE_CHECKING:
    import narwhals.stable.v2 as nw
    import polars as pl

    #: a role's column: its name, a narwhals expression, or a polars expression (on polars frames)
    Column: TypeAlias = str | nw.Expr | pl.Expr
else:
    Column: TypeAlias = Any

__all__ = [
    "PREFIX",
    "Column",
    "ExprColumn",
    "as_role",
    "escaped",
    "is_expression",
    "is_polars_expression",
    "output_name",
    "role",
    "roles",
    "shown",
]

#: characters a declared name keeps as they are; every other one is %-escaped, so a
#: name is a valid column name on every backend (Spark reads a dot as a struct field)
_PLAIN = re.compile(r"[A-Za-z0-9_]")

#: the prefix of the internal column of an expression role
PREFIX = "__cf_e_"


def escaped(text: str) -> str:
    """``text`` with every character but letters, digits and ``_`` written ``%XX`` (UTF-8 bytes).

    >>> escaped("col(y)")
    'col%28y%29'
    """
    out = "".join(c if _PLAIN.match(c) else "".join(f"%{b:02X}" for b in c.encode()) for c in text)
    if out[:1].isdigit():  # a name never starts like a number
        out = f"%{ord(out[0]):02X}{out[1:]}"
    return out or "%"


def shown(name: Any) -> str:
    """A column as messages show it: ``'y'``, and an expression role's column as its text, ``(col(y).__mul__(2))``.

    Reads the text back from an internal column's name too (a schema's
    plain strings, e.g. the inputs a summary recorded).

    >>> import narwhals.stable.v2 as nw
    >>> role = ExprColumn(nw.col("y") * 2)
    >>> shown("y"), shown(role), shown(str(role))
    ("'y'", '(col(y).__mul__(2))', '(col(y).__mul__(2))')
    """
    if isinstance(name, ExprColumn) or not isinstance(name, str) or not name.startswith(PREFIX):
        return repr(name)
    body = name[len(PREFIX) + 3 :]
    text = re.sub(
        r"(%[0-9A-F]{2})+", lambda m: bytes.fromhex(m.group(0).replace("%", "")).decode(errors="replace"), body
    )
    return text if text.startswith("[") and text.endswith("]") else f"({text})"


def is_polars_expression(value: Any) -> bool:
    """Whether ``value`` is a native polars expression (polars is not imported for the check)."""
    pl = sys.modules.get("polars")
    return pl is not None and isinstance(value, pl.Expr)


def is_expression(value: Any) -> bool:
    """Whether ``value`` is a narwhals or a polars expression."""
    nw = sys.modules.get("narwhals.expr")
    return (nw is not None and isinstance(value, nw.Expr)) or is_polars_expression(value)


class ExprColumn(str):
    """The internal column of an expression role: a column name that carries its expression.

    ``str(role)`` is the column's name (``__cf_e_nw_col%28y%29%2E__mul__%282%29``),
    ``repr(role)`` the expression's text as messages show it (``(col(y).__mul__(2))``).
    Two roles of the same text are the same column (the rows they feed are
    shared between metrics), whatever the objects.
    """

    __slots__ = ("expr", "kind", "text")
    expr: Any
    #: ``"nw"`` (a narwhals expression) or ``"pl"`` (a polars expression)
    kind: str
    #: the expression's text: narwhals' ``repr``, polars' ``str``
    text: str

    def __new__(cls, expr: Any) -> ExprColumn:
        kind = "pl" if is_polars_expression(expr) else "nw"
        text = str(expr) if kind == "pl" else repr(expr)
        self = super().__new__(cls, f"{PREFIX}{kind}_{escaped(text)}")
        self.expr, self.kind, self.text = expr, kind, text
        return self

    def __repr__(self) -> str:
        text = self.text
        return text if text.startswith("[") and text.endswith("]") else f"({text})"

    def __reduce__(self) -> tuple[Any, ...]:  # pickled as the plain column name (an expression may not pickle)
        return (str, (str(self),))

    def __copy__(self) -> ExprColumn:  # immutable: a copy of a metric keeps its expression
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> ExprColumn:
        return self

    @property
    def declared(self) -> str:
        """The role in a declared (summary state) name: ``~nw_`` or ``~pl_`` and the escaped text.

        A plain column's declared name never holds a ``~``: the two never meet.
        """
        return f"~{self.kind}_{escaped(self.text)}"


#: narwhals' name methods a frame-free output name follows: ``name.<method>(**kwargs)`` of the name so far
_NAME_METHODS: dict[str, Any] = {
    "name.prefix": lambda n, kw: f"{kw['prefix']}{n}",
    "name.suffix": lambda n, kw: f"{n}{kw['suffix']}",
    "name.to_lowercase": lambda n, kw: n.lower(),
    "name.to_uppercase": lambda n, kw: n.upper(),
}


def _narwhals_output_name(expr: Any) -> str | None:
    """The output name of a narwhals expression read from its nodes (no frame), else ``None``.

    Polars' rule, which narwhals follows: the name of the expression's root
    column (``nw.col("g")``, one name), then ``alias``, ``name.keep``,
    ``name.prefix`` / ``suffix`` / ``to_lowercase`` / ``to_uppercase``; any other
    method keeps it.  Another root (a literal, a selector, several columns) or
    ``name.map`` is not known without a frame: ``None``.
    """
    nodes = getattr(expr, "_nodes", None)  # narwhals' expression nodes (internal; absent before narwhals 2.x nodes)
    if not nodes:
        return None
    try:
        root = nodes[0]
        names = root.kwargs.get("names") if root.name == "col" else None
        if not isinstance(names, (list, tuple)) or len(names) != 1 or not isinstance(names[0], str):
            return None
        name = first = names[0]
        for node in nodes[1:]:
            if node.name == "alias":
                name = str(node.kwargs["name"])
            elif node.name == "name.keep":
                name = first
            elif node.name in _NAME_METHODS:
                name = _NAME_METHODS[node.name](name, node.kwargs)
            elif node.name.startswith("name."):
                return None
    except (AttributeError, KeyError, IndexError, TypeError):  # another narwhals layout: not known
        return None
    return name


def output_name(column: str) -> str:
    """The name a role's column shows in an output's name: a column's name, an expression's output name.

    A polars expression's is ``expr.meta.output_name()``; a narwhals
    expression's is read from its nodes (its root column, ``alias``,
    ``name.prefix`` ...: see :func:`_narwhals_output_name`).  An expression whose
    output name is not known without a frame (a literal root, ``name.map``)
    keeps its internal column's name.

    >>> import narwhals.stable.v2 as nw
    >>> output_name("g"), output_name(as_role(nw.col("g").str.to_uppercase().alias("G")))
    ('g', 'G')
    """
    if not isinstance(column, ExprColumn):
        return column
    if column.kind == "pl":
        try:
            return str(column.expr.meta.output_name())
        except Exception:  # polars' own error: no single output name (pl.all(), ...)
            return str(column)
    found = _narwhals_output_name(column.expr)
    return str(column) if found is None else found


#: narwhals' text of a bare column, ``col(y)``
_BARE = re.compile(r"col\(([^,()]+)\)")


def _bare_column(value: Any) -> str | None:
    """The column a bare column expression (``nw.col("y")``, ``pl.col("y")``) names, else ``None``."""
    if is_polars_expression(value):
        return str(value.meta.output_name()) if value.meta.is_column() else None
    match = _BARE.fullmatch(repr(value))
    return match.group(1) if match else None


def as_role(value: Any) -> Any:
    """``value`` as a role: an expression becomes its :class:`ExprColumn`, anything else is returned as is.

    A bare column (``nw.col("y")``, ``pl.col("y")``) is the column's name: the
    same role as ``"y"`` (rows, messages and summaries alike).
    """
    if isinstance(value, str) or not is_expression(value):
        return value
    bare = _bare_column(value)
    return bare if bare is not None else ExprColumn(value)


@overload
def role(value: None) -> None: ...
@overload
def role(value: Column) -> str: ...
def role(value: Column | None) -> str | None:
    """A role parameter (``Column``) as a metric's field holds it: a column name (an expression's :class:`ExprColumn`).

    The factories pass their role parameters through this typed converter to
    the metric's fields (which hold ``str``).  A value of another type is
    returned as it is: the field's check says what is wrong with it.

    >>> import narwhals.stable.v2 as nw
    >>> role("y"), role(nw.col("y")), repr(role(nw.col("y") * 2)), role(None)
    ('y', 'y', '(col(y).__mul__(2))', None)
    """
    out: str | None = as_role(value)
    return out


@overload
def roles(value: None) -> None: ...
@overload
def roles(value: Column | Sequence[Column]) -> str | tuple[str, ...]: ...
def roles(value: Column | Sequence[Column] | None) -> str | tuple[str, ...] | None:
    """:func:`role` for a parameter that takes one column or a list of them (a tuple of names).

    >>> roles(["y", "y2"]), roles("y")
    (('y', 'y2'), 'y')
    """
    given: Any = as_role(value)
    if isinstance(given, (list, tuple)) and given and all(isinstance(v, str) or is_expression(v) for v in given):
        return tuple(as_role(v) for v in given)
    return given  # a name, or any other value: the field's check says what is wrong with it
