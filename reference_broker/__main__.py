"""`python -m reference_broker --node-id 1 --listen HOST:PORT ...`"""

import sys

from reference_broker.main import main

sys.exit(main())
