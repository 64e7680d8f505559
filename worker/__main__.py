"""``python -m squall.worker``: run one worker process (see :mod:`squall.worker.worker`)."""

import sys

from .worker import main

sys.exit(main())
