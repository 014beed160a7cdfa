"""Admin bases shared by both apps: rows that are read-only in the admin, deleting a whole object (a dataset, a
campaign, a run, a corpus) taking the rows under it along, forms that take the request's user, and choices scoped to
what that user may see."""

from collections.abc import Callable
from typing import Any, ClassVar

from django.contrib import admin
from django.db.models import QuerySet
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


def form_for_user(form_class: Any, user: Any) -> Any:
    """`form_class` given `user` on every instance: the admin builds its forms without the request's user, and these
    forms scope their choices by it and name it to the service that writes."""

    class FormForUser(form_class):  # type: ignore[valid-type, misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, user=user, **kwargs)

    return FormForUser


class UserFormAdmin(admin.ModelAdmin):
    """An admin whose form takes the request's user (see `form_for_user`)."""

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        return form_for_user(super().get_form(request, obj, change=change, **kwargs), request.user)


class ScopedChoicesAdmin(admin.ModelAdmin):
    """Foreign-key and many-to-many choices limited to what the request's user may see: `scoped_choices` maps a
    field's name to the rows it offers that user; other fields keep Django's choices."""

    scoped_choices: ClassVar[dict[str, Callable[[Any], QuerySet]]] = {}

    def _offer_scoped(self, db_field: Any, request: HttpRequest, kwargs: dict[str, Any]) -> None:
        offered = self.scoped_choices.get(db_field.name)
        if offered is not None:
            kwargs["queryset"] = offered(request.user)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        self._offer_scoped(db_field, request, kwargs)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        self._offer_scoped(db_field, request, kwargs)
        return super().formfield_for_manytomany(db_field, request, **kwargs)
