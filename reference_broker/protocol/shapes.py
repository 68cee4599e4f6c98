"""Response entities for the version a client asked for.

kio has one dataclass per API, version and nesting level, each with exactly
that version's fields. An adapter describes its answer once, with every
field any version has, and `Shapes` keeps what the requested version knows:
one adapter serves the whole version range of its API.
"""

from __future__ import annotations

from dataclasses import fields
from datetime import timedelta
from functools import cache

from kio.index import load_payload_module
from kio.static.constants import EntityType

NO_THROTTLE = timedelta(0)


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


class Shapes:
    def __init__(self, request):
        self._module = load_payload_module(request.__api_key__, request.__version__,
                                           EntityType.response)
        self.version = request.__version__

    def __call__(self, entity: str, /, **values):
        """Entity `entity` of the response module, from the values it has."""
        cls = getattr(self._module, entity)
        known = _field_names(cls)
        if "throttle_time" in known:
            values.setdefault("throttle_time", NO_THROTTLE)
        return cls(**{k: v for k, v in values.items() if k in known})
