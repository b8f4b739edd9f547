"""``python -m mteb_lrd.cli``: the ``mteb-lrd`` command without the installed script."""

from __future__ import annotations

import sys

from mteb_lrd.cli import main

sys.exit(main())
