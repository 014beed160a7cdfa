"""What the dashboard's pages share: the researcher check, their URL parameters and rating scope, the scope
selector and the table downloads."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.http import urlencode

from annotations.models import Dataset
from annotations.text.ascii_numbers import ascii_int
from judging.analysis import tables
from judging.analysis.selectors import (
    RatingScope,
    ScopeError,
    adjudicated_choice,
    excluded_choice,
    rating_scope,
    stats_campaign_or_404,
    stats_scopes,
)

FORMATS = {"csv": "text/csv; charset=utf-8", "json": "application/json"}


def researcher_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Anonymous users go to the login page; logged-in non-staff users get 403."""

    @wraps(view)
    @login_required
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_staff:
            raise PermissionDenied
        return view(request, *args, **kwargs)

    return wrapper


def query_param(request: HttpRequest, name: str) -> str | None:
    value = request.GET.get(name, "").strip()
    return value or None


def query_string(**params: str | None) -> str:
    present = {key: value for key, value in params.items() if value}
    return "?" + urlencode(present) if present else ""


def request_scope(request: HttpRequest, dataset: Dataset) -> RatingScope:
    """The ratings the page shows, from ``origin`` and ``campaign``: 400 for a value that names no scope, 404 for a
    campaign that is not one of this dataset's among the researcher's."""
    campaign_id = query_param(request, "campaign")
    campaign = None
    if campaign_id is not None:
        campaign_pk = ascii_int(campaign_id)
        if campaign_pk is None:
            raise BadRequest("campaign must be a campaign id")
        campaign = stats_campaign_or_404(request.user, dataset, campaign_pk)
    try:
        include = excluded_choice(query_param(request, "excluded"))
        adjudicated = adjudicated_choice(query_param(request, "human"))
        scope = rating_scope(query_param(request, "origin"), campaign, include_excluded=include)
        return scope.with_adjudicated(adjudicated)
    except ScopeError as exc:
        raise BadRequest(str(exc)) from None


def scope_context(
    request: HttpRequest,
    dataset: Dataset,
    scope: RatingScope,
    page: str,
    keep: dict[str, Any],
    stated: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The scope selector (one submit button per scope, keeping the other filters), the scope's URL parameters
    for every link and form of the page, and, from `stated` (a report's "scope"), the excluded raters the numbers
    leave out or include, with a link to the other choice."""
    params = scope.query()
    action = reverse(page, args=[dataset.pk])
    kept = {name: value for name, value in keep.items() if value}
    exclusions = (stated or {}).get("exclusions") or {"left_out": not scope.include_excluded, "raters": []}
    toggled = scope.with_excluded(not scope.include_excluded).query()
    human_toggled = scope.with_adjudicated(not scope.adjudicated).query()
    return {
        "scope": scope,
        "scope_action": action,
        "scope_choices": [
            {"parameter": option.parameter(), "label": option.label, "current": option.parameter() == scope.parameter()}
            for option in stats_scopes(request.user, dataset)
        ],
        "scope_keep": [
            *kept.items(),
            *([("excluded", "include")] if scope.include_excluded else []),
            *([("human", "adjudicated")] if scope.adjudicated else []),
        ],
        "scope_human_toggle": action + query_string(**kept, **human_toggled),
        "scope_exclusions": exclusions,
        "scope_exclusions_toggle": action + query_string(**kept, **toggled),
        "scope_params": list(params.items()),
        "scope_suffix": "&" + urlencode(params) if params else "",
        "scope_query": query_string(**params),
    }


def table_download(table: dict[str, Any], fmt: str, filename: str) -> HttpResponse:
    body = tables.as_csv(table) if fmt == "csv" else tables.as_json(table)
    response = HttpResponse(body, content_type=FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response
