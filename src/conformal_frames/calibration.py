"""(placeholder: filled in by its issue)."""

from __future__ import annotations

__all__: list[str] = []
#: factories exposed as ``.conformal`` methods
METHODS: list[str] = []
