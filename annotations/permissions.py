"""What the API admits: who may call its research endpoints, which fields a request may send, and how large a file
it takes."""

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from rest_framework import serializers, status
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response


class IsResearcher(BasePermission):
    message = "Researcher (staff) access is required."

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated and request.user.is_staff)


class UploadField(serializers.FileField):
    """A file of at most IMPORT_MAX_UPLOAD_BYTES, the one upload limit of every import and corpus endpoint."""

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        size = getattr(value, "size", 0) or 0
        if size > settings.IMPORT_MAX_UPLOAD_BYTES:
            raise serializers.ValidationError(
                f"file is {size} bytes; the limit is {settings.IMPORT_MAX_UPLOAD_BYTES} bytes"
            )
        return value


def unexpected_fields_refusal(sent: Iterable[str], accepted: frozenset[str]) -> Response | None:
    """The 400 answer naming the fields a request sent that its endpoint does not take, or None when it sent none."""
    unexpected = sorted(set(sent).difference(accepted))
    if not unexpected:
        return None
    return Response({"detail": f"unexpected fields: {', '.join(unexpected)}"}, status=status.HTTP_400_BAD_REQUEST)
