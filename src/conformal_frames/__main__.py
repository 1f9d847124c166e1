"""``python -m conformal_frames``: the ``conformal-frames`` command line."""

import sys

from conformal_frames.cli import main

if __name__ == "__main__":  # pragma: no cover - exercised through a subprocess
    sys.exit(main())
