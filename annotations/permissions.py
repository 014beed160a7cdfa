"""What the API admits: who may call its research endpoints, and how large a file it takes."""

from typing import Any

from django.conf import settings
from rest_framework import serializers
from rest_framework.permissions import BasePermission
from rest_framework.request import Request


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
