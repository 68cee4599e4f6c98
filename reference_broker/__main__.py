"""`python -m reference_broker --node-id 1 --listen HOST:PORT ...`"""

import sys

from reference_broker.standalone import without_hypothesis

without_hypothesis()
from reference_broker.main import main  # noqa: E402 — after Hypothesis is blocked

sys.exit(main())
