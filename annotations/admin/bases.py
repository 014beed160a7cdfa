"""Admin bases shared by both apps: rows that are read-only in the admin, and deleting a whole object (a dataset, a
campaign, a run, a corpus) taking the rows under it along."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest


class WholeObjectDeleteAdmin(admin.ModelAdmin):
    """The rows under the object are read-only in their own admins, which refuse deleting them one by one; Django
    would count that as a missing permission and refuse the whole object. Only the object's own permission
    decides here: its rows go with it or not at all."""

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, Any, set[str], Any]:
        deleted, counts, _, protected = super().get_deleted_objects(objs, request)
        refused = {str(self.model._meta.verbose_name) for obj in objs if not self.has_delete_permission(request, obj)}
        return deleted, counts, refused, protected


class ReadOnlyRowsAdmin(admin.ModelAdmin):
    """Rows that only an import, a campaign or a run may write (each checks what it stores): viewable, never added,
    changed or deleted one by one in the admin."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
