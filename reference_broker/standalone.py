"""What a broker process does before it imports anything of kio."""

from __future__ import annotations

import sys


def without_hypothesis() -> None:
    """Make Hypothesis unimportable in this process, unless it is loaded.

    kio registers Hypothesis strategies for its types whenever Hypothesis
    can be imported (kio/static/_phantom.py), and building them fills
    Hypothesis's Unicode table in the working directory's .hypothesis/:
    about 4 s of CPU at every broker start in a fresh node directory, where
    the test extras are installed. A broker never generates examples."""
    sys.modules.setdefault("hypothesis", None)
