"""ApiVersions: what this broker implements, exactly (dispatch's table)."""

from __future__ import annotations

from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode

from reference_broker.protocol.shapes import Shapes

API_KEY = 18


async def handle(broker, header, request, versions):
    shape = Shapes(request)
    keys = tuple(shape("ApiVersion", api_key=key, min_version=low, max_version=high)
                 for key, (low, high) in sorted(versions.items()))
    return shape("ApiVersionsResponse", error_code=ErrorCode.none, api_keys=keys)


def unsupported(versions):
    """KIP-511: an ApiVersions request of a version we do not know is
    answered in the v0 format with UNSUPPORTED_VERSION and our table, so the
    client can retry with a version both sides speak."""
    return ApiVersionsResponseV0(
        error_code=ErrorCode.unsupported_version,
        api_keys=tuple(ApiVersionV0(api_key=key, min_version=low, max_version=high)
                       for key, (low, high) in sorted(versions.items())))
