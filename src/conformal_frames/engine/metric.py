"""The base class of metric objects (:class:`Metric`) and the factory decorators
:func:`no_weights` and :func:`no_counts`."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

import narwhals.stable.v2 as nw

from conformal_frames._validate import validate_fields
from conformal_frames.engine.query import Query
from conformal_frames.engine.spec import Spec
from conformal_frames.results import TestResult

__all__ = ["Metric", "ResultKind", "no_counts", "no_weights"]

ResultKind = Literal["score", "test", "table"]
T = TypeVar("T")


def no_weights(metric: str, why: str | None = None) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorate the factory of a metric without a weighted version.

    ``weights=`` (or ``counts=``) then raises ``TypeError("<metric> has no
    weighted version (<why>): ...")`` instead of Python's generic message.
    """
    reason = f" ({why})" if why else ""

    def decorate(fn: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            for option in ("weights", "counts"):
                if option in kwargs:
                    msg = (
                        f"{metric} has no weighted version{reason}: {option}= is not supported "
                        "(see the Weights section of the docs)"
                    )
                    raise TypeError(msg)
            return fn(*args, **kwargs)

        wrapper.__handled_keywords__ = ("weights", "counts")  # type: ignore[attr-defined]  # its own message
        return wrapper

    return decorate


def no_counts(metric: str, why: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorate the factory of a weighted metric whose outputs cannot be those of repeated rows.

    ``counts=`` then raises ``TypeError("<metric> takes no counts= (<why>) ...")``.
    """

    def decorate(fn: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            if "counts" in kwargs:
                msg = f"{metric} takes no counts= ({why}); see the Frequency counts section of the Weights docs"
                raise TypeError(msg)
            return fn(*args, **kwargs)

        wrapper.__handled_keywords__ = ("counts",)  # type: ignore[attr-defined]  # its own message
        return wrapper

    return decorate


@dataclass(frozen=True, kw_only=True)
class Metric:
    """Base class of metric objects (like polars expressions).

    Subclasses define ``default_name``, ``kind`` and :meth:`build`, which
    registers the metric's statistics on a :class:`Query` and returns its
    finalize expressions: ``{suffix: expr}``, the main output under ``""``
    (``None`` for an output a numpy step, per-group step or table fills).
    """

    name: str | None = None

    default_name: ClassVar[str] = "metric"
    #: what a direct eager, ungrouped call returns: a float ("score"), a
    #: result object ("test": see ``result``) or a frame
    kind: ClassVar[ResultKind] = "score"
    #: the frame returned by a direct call is this long table (not evaluate's)
    long: ClassVar[bool] = False
    #: result class of a test (kind "test"), built by :meth:`test_result`
    result: ClassVar[type[TestResult]] = TestResult
    #: for a metric :func:`~conformal_frames.summarize` refuses (its statistics
    #: do not merge exactly: per-group numpy steps, ordered windows, tables
    #: not built with :meth:`Query.cells`), the mergeable metric its error
    #: names instead, e.g. ``"auroc"``; ``None``: "evaluate it on the rows"
    mergeable_alternative: ClassVar[str | None] = None

    def __post_init__(self) -> None:
        validate_fields(self)  # the same checks as the factories

    @property
    def output_name(self) -> str:
        return self.name if self.name is not None else self.default_name

    def alias(self, name: str) -> Metric:
        """The same metric with its output column(s) named ``name``."""
        if not isinstance(name, str) or not name:
            msg = f"alias must be a non-empty string, got {name!r}"
            raise TypeError(msg)
        return dataclasses.replace(self, name=name)

    def build(self, q: Query) -> dict[str, nw.Expr | None]:  # pragma: no cover - abstract
        raise NotImplementedError

    def counts_columns(self) -> set[str | None]:
        """The ``counts=`` columns of this metric's rows (``None``: uncounted rows).

        The one-counts-column rule of an evaluation (:meth:`Plan.of`) reads
        it; a composite metric (a skill score) answers for the metrics it
        combines.
        """
        return {getattr(self, "counts", None)}

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        """Reshape evaluate's wide output to this metric's long output."""
        return frame

    def prepare(self, frame: nw.LazyFrame) -> nw.LazyFrame:
        """The input frame as this metric reads it (default: unchanged).

        E.g. set metrics turn a pandas column of Python lists into an Arrow
        list column.  Must return a new frame, never modify the caller's.
        """
        return frame

    @property
    def reshapes(self) -> bool:
        """Whether :meth:`prepare` may reshape the input: then ``evaluate`` compiles the query on every call
        (no compiled-query cache).  A metric whose ``prepare`` reshapes only some of its input forms
        answers per instance."""
        return type(self).prepare is not Metric.prepare

    def notices(self) -> dict[str, str]:
        """Counted outputs that warn on an eager result: ``{output column: message}``.

        The message's ``{count}`` is the column's total over the groups and
        ``{rows}`` the same as "1 row" / "3 rows"; no warning when it is 0
        (or the column is absent).  Default: none.
        """
        return {}

    def test_result(self, row: Mapping[str, Any]) -> TestResult:
        """A test's result object from its output row ``{column: value}``."""
        return self.result.from_row(row, self.output_name)

    def outputs(self, built: Mapping[str, nw.Expr | None]) -> dict[str, nw.Expr | None]:
        base = self.output_name
        return {(f"{base}_{s}" if s else base): e for s, e in built.items()}

    def output_dtypes(self, built: Mapping[str, nw.Expr | None]) -> dict[str, Any]:
        """The outputs (column names) of a declared dtype; the others are Float64.

        Default: a count of rows (suffix ``n`` or ``..._n``) is Int64 (see the
        output contract in ``docs/conventions.md``).  A metric with another
        integer output (e.g. a number of groups) extends this.
        """
        named = self.outputs(built)
        return {c: nw.Int64 for s, c in zip(built, named) if s == "n" or s.endswith("_n")}

    def output_names(self, schema: Mapping[str, Any], keys: Sequence[str] = ()) -> list[str]:
        """The wide output columns of this metric in :func:`evaluate`, in order.

        ``schema`` maps the frame's column names to narwhals dtypes (e.g.
        ``nw.from_native(df).collect_schema()``); raises as evaluation would
        for a missing column or a wrong dtype.  Nothing is computed.
        """
        return list(self.definition(schema, keys).outputs)

    def definition(self, schema: Mapping[str, Any], keys: Sequence[str] = ()) -> Spec:
        """This metric's definition on a frame of ``schema`` grouped by ``keys``, as a value.

        Raises as evaluation would for a missing column or a wrong dtype;
        nothing is computed.

        >>> import narwhals.stable.v2 as nw
        >>> import conformal_frames as cf
        >>> spec = cf.coverage("y", "lo", "hi").definition({c: nw.Float64() for c in ("y", "lo", "hi")})
        >>> [s.state for s in spec.stats], spec.mergeable, spec.single_pass
        (['cf_sum__covered[y,lo,hi]'], True, True)
        """
        return Query(schema=schema, keys=list(keys)).record(self)[1]
