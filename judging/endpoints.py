"""What every researcher-only API view of the judge declares: its OpenAPI schema, its HTTP methods and IsResearcher."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, permission_classes

from annotations.permissions import IsResearcher


def researcher_api(methods: list[str], **schema: Any) -> Callable[[Callable[..., Any]], Any]:
    """A DRF function view answering `methods` to researchers only, described by `schema` (extend_schema's
    arguments). Decorators that set more of the view's policy (parser_classes) go below it."""

    def decorate(view: Callable[..., Any]) -> Any:
        return extend_schema(**schema)(api_view(methods)(permission_classes([IsResearcher])(view)))

    return decorate
