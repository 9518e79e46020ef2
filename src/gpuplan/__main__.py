"""``python -m gpuplan``: the same as the ``gpuplan`` command."""

import sys

from .cli.main import main

sys.exit(main())
