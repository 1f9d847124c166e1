"""The version of conformal-frames: the one source (``pyproject.toml`` reads it, ``cf.__version__`` re-exports it)."""

__version__ = "0.4.0.dev0"
