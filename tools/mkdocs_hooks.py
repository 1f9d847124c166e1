"""mkdocs hooks: the family pages are written by their own issues.

A nav entry whose page does not exist yet is dropped (logged at INFO, so
``mkdocs build --strict`` stays green while a family page is still being
written); every page that exists is in the nav and built strictly.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.conformal_frames")


def _prune(items: list[Any], docs: Path) -> list[Any]:
    kept: list[Any] = []
    for item in items:
        if isinstance(item, dict):
            ((title, value),) = item.items()
            if isinstance(value, list):
                sub = _prune(value, docs)
                if sub:
                    kept.append({title: sub})
            elif (
                isinstance(value, str) and not value.startswith(("http://", "https://")) and not (docs / value).exists()
            ):
                log.info("nav: %s (%s) does not exist yet; left out", title, value)
            else:
                kept.append(item)
        elif isinstance(item, str) and not (docs / item).exists():
            log.info("nav: %s does not exist yet; left out", item)
        else:
            kept.append(item)
    return kept


def on_config(config: Any) -> Any:
    if config.nav:
        config.nav = _prune(config.nav, Path(config.docs_dir))
    return config
