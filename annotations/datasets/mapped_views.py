"""The mapped import page: a table and a mapping, a preview of the first items and the rubric, then the import."""

import json

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from annotations.datasets.mapped_import import MappedTable, mapped_import, mapped_preview
from annotations.datasets.mapping import (
    Mapping,
    MappingError,
    load_mapping_bytes,
    ready_made_mapping,
    ready_made_mappings,
)
from annotations.datasets.tables import DEFAULT_DUPLICATES
from annotations.errors import DatasetImportError, RubricError
from annotations.forms import MappedImportForm


def _mapping(form: MappedImportForm) -> Mapping:
    if form.cleaned_data["mapping"]:
        return ready_made_mapping(form.cleaned_data["mapping"])
    upload = form.cleaned_data["mapping_file"]
    return load_mapping_bytes(upload.read(), name=upload.name)


@require_http_methods(["GET", "POST"])
@login_required
def mapped_import_page(request: HttpRequest) -> HttpResponse:
    """GET shows the form; POST with "preview" checks everything and shows the first items (writing nothing), POST
    with "import" imports all rows or nothing and goes to the new dataset's overview."""
    if not request.user.is_staff:
        raise PermissionDenied("researcher access is required")
    ready_made = ready_made_mappings()
    form = MappedImportForm(request.POST or None, request.FILES or None, ready_made=ready_made)
    context: dict[str, object] = {"form": form, "ready_made": ready_made}
    previewing = "preview" in request.POST
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        duplicates = form.cleaned_data["duplicates"] or DEFAULT_DUPLICATES
        try:
            mapping = _mapping(form)
            tables = [MappedTable(upload.name, upload)]
            if previewing:
                preview = mapped_preview(tables=tables, mapping=mapping, duplicates=duplicates)
                context["preview"] = preview
                context["preview_json"] = [_pretty(item) for item in preview.items]
            elif not form.cleaned_data["name"]:
                form.add_error("name", _("give the dataset a name to import it"))
            else:
                imported = mapped_import(
                    tables=tables,
                    mapping=mapping,
                    name=form.cleaned_data["name"],
                    owner=request.user,
                    duplicates=duplicates,
                )
                return HttpResponseRedirect(reverse("dashboard-overview", args=[imported.result.dataset.pk]))
        except (MappingError, RubricError) as exc:
            context["error"] = str(exc)
        except DatasetImportError as exc:
            context["error"] = _("%(error)s (nothing was imported)") % {"error": exc}
    status = 400 if request.method == "POST" and (form.errors or "error" in context) else 200
    return render(request, "datasets/import_mapped.html", context, status=status)


def _pretty(item: object) -> str:
    return json.dumps(item, ensure_ascii=False, indent=2)
