"""`python -m dask_analytics_lab.server server ...`: the package's CLI group."""

import sys

from ..cli import main

sys.exit(main())
