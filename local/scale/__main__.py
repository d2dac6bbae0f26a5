"""``python -m local.scale``: see :mod:`local.scale.run`."""

import sys

from local.scale.run import main

sys.exit(main())
