"""Progress bars on stderr for long work (a leaf: every layer may use it).

A caller that takes ``progress=`` opens a bar with :func:`task`; work that
runs in steps reports them with :func:`steps` (a block of a known number of
steps, e.g. the directions of a worst-slab search) or :func:`advance` (steps
counted from inside a running query, e.g. the chunks of a bootstrap).  Without
an open bar both are no-ops, so the numerics never depend on it.  The bar is
tqdm's when tqdm is installed (``pip install conformal-frames[progress]``),
otherwise one plain line on stderr, rewritten in place.

``progress`` is ``False`` (no bar), ``True`` (a bar) or ``None`` (a bar when
stderr is a terminal).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["advance", "check_progress", "enabled", "steps", "task"]

#: the open bars, innermost last (steps go to the innermost)
_ACTIVE: list[_Bar] = []
_LOCK = threading.RLock()
#: seconds between two rewrites of the plain line
_INTERVAL = 0.2


def check_progress(value: Any) -> bool | None:
    """``progress=`` checked: ``True``, ``False`` or ``None``."""
    if value is None or isinstance(value, bool):
        return value
    msg = f"progress= must be True, False or None (a bar when stderr is a terminal), got {value!r}"
    raise TypeError(msg)


def enabled(progress: bool | None) -> bool:
    """Whether ``progress`` asks for a bar (``None``: when stderr is a terminal)."""
    if progress is None:
        isatty = getattr(sys.stderr, "isatty", None)
        return bool(isatty is not None and isatty())
    return bool(progress)


class _Bar:
    """A bar over a growing number of steps: tqdm's, or a plain line."""

    def __init__(self, desc: str) -> None:
        self.desc = desc
        self.total = 0
        self.done = 0
        self.seen: dict[Hashable, int] = {}
        self._last = 0.0
        #: tqdm's bar, opened at the first steps (a task without steps prints nothing)
        self._tqdm: Any = None

    def _open_tqdm(self, what: str) -> Any:
        if self._tqdm is None:
            try:
                from tqdm import tqdm
            except ImportError:
                return None
            # opened with its first total and name: no empty "0it" line first
            self._tqdm = tqdm(
                total=self.total, desc=self._label(what), file=sys.stderr, leave=False, dynamic_ncols=True
            )
        return self._tqdm

    def expect(self, steps: int, what: str) -> None:
        self.total += steps
        if self._open_tqdm(what) is not None:
            self._tqdm.total = self.total
            self._tqdm.set_description(self._label(what), refresh=False)
            self._tqdm.refresh()
        else:
            self.what = what
            self._line(force=True)

    def update(self, steps: int) -> None:
        self.done += steps
        if self._tqdm is not None:
            self._tqdm.update(steps)
        else:
            self._line(force=self.done >= self.total)

    def _line(self, *, force: bool) -> None:
        now = time.monotonic()
        if not force and now - self._last < _INTERVAL:
            return
        self._last = now
        sys.stderr.write(f"\r{self._label(getattr(self, 'what', ''))} {self.done}/{self.total}")
        sys.stderr.flush()

    def _label(self, what: str) -> str:
        """The bar's name, then what its current steps are (a step that starts with the name: the step alone)."""
        if not what:
            return self.desc
        return what if what.startswith(self.desc) else f"{self.desc}: {what}"

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
        elif self.total:
            self._line(force=True)
            sys.stderr.write("\n")
            sys.stderr.flush()


@contextmanager
def task(desc: str, progress: bool | None) -> Iterator[None]:
    """A bar named ``desc`` while the block runs, if ``progress`` asks for one.

    Nested tasks (``report`` calling ``evaluate``) share the outer bar.
    """
    if not enabled(check_progress(progress)) or _ACTIVE:
        yield
        return
    bar = _Bar(desc)
    with _LOCK:
        _ACTIVE.append(bar)
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE.remove(bar)
        bar.close()


@contextmanager
def steps(what: str, total: int) -> Iterator[Callable[[int], None]]:
    """A block of ``total`` steps of the open bar; yields ``tick(k)`` (a no-op without a bar)."""
    with _LOCK:
        bar = _ACTIVE[-1] if _ACTIVE else None
        if bar is not None:
            bar.expect(total, what)
    if bar is None:
        yield _nothing
        return

    def tick(k: int) -> None:
        with _LOCK:
            bar.update(k)

    yield tick


def _nothing(k: int) -> None:
    return None


def advance(key: Hashable, what: str, total: int) -> None:
    """One step of ``total`` of the work ``key`` (called from inside a running query).

    The first step of a key adds its ``total`` to the open bar's.
    """
    with _LOCK:
        if not _ACTIVE:
            return
        bar = _ACTIVE[-1]
        if key not in bar.seen:
            bar.seen[key] = total
            bar.expect(total, what)
        bar.update(1)
