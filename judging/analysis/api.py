"""Statistics API (researchers only, scoped): the same report functions as the CLI and the dashboard."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from annotations.models import Dataset
from annotations.permissions import IsResearcher
from judging.analysis.reports import JudgeNotFound, agreement_report, correlation_report
from judging.analysis.selectors import (
    EXCLUDED_CHOICES,
    ORIGINS,
    RatingScope,
    ScopeError,
    dataset_for_stats_or_404,
    rating_scope,
    stats_campaign_or_404,
)

# The largest id the database can hold; a larger number cannot name a campaign.
CAMPAIGN_ID_MAX = 2**63 - 1
NOT_A_CAMPAIGN_ID = "campaign must be a campaign id (a positive whole number)."


class ScopeQuery(serializers.Serializer):
    origin = serializers.ChoiceField(
        choices=ORIGINS,
        required=False,
        error_messages={"invalid_choice": f"origin must be one of {', '.join(ORIGINS)}, not " + '"{input}".'},
    )
    excluded = serializers.ChoiceField(
        choices=EXCLUDED_CHOICES,
        required=False,
        error_messages={
            "invalid_choice": f"excluded must be one of {', '.join(EXCLUDED_CHOICES)}, not " + '"{input}".'
        },
    )
    campaign = serializers.IntegerField(
        min_value=1,
        max_value=CAMPAIGN_ID_MAX,
        required=False,
        error_messages={
            "invalid": NOT_A_CAMPAIGN_ID,
            "min_value": NOT_A_CAMPAIGN_ID,
            "max_value": NOT_A_CAMPAIGN_ID,
        },
    )


class CorrelationQuery(ScopeQuery):
    judge = serializers.CharField(max_length=200)


SCOPE_PARAMETERS = [
    OpenApiParameter(
        "origin", str, enum=list(ORIGINS), description="whose ratings: all (default), imported or app raters"
    ),
    OpenApiParameter("campaign", int, description="id of a campaign of the dataset: only the ratings it collected"),
    OpenApiParameter(
        "excluded",
        str,
        enum=list(EXCLUDED_CHOICES),
        description="the raters a researcher excluded: leave-out (default) or include, to compare; the response "
        "lists them under scope.exclusions",
    ),
]


def _scope(request: Request, dataset: Dataset, query: dict[str, Any]) -> RatingScope:
    """404 for a campaign outside the researcher's datasets or of another dataset, 400 for a contradiction."""
    campaign = stats_campaign_or_404(request.user, dataset, query["campaign"]) if "campaign" in query else None
    try:
        return rating_scope(query.get("origin"), campaign, include_excluded=query.get("excluded") == "include")
    except ScopeError as exc:
        raise ValidationError({"origin": [str(exc)]}) from None


@extend_schema(
    parameters=SCOPE_PARAMETERS,
    responses={200: OpenApiTypes.OBJECT},
    description="`agreement N --json` for dataset `pk`.",
)
@api_view(["GET"])
@permission_classes([IsResearcher])
def agreement_view(request: Request, pk: int) -> Response:
    dataset = dataset_for_stats_or_404(request.user, pk)
    query = ScopeQuery(data=request.query_params)
    query.is_valid(raise_exception=True)
    return Response(agreement_report(dataset, _scope(request, dataset, query.validated_data)))


@extend_schema(
    parameters=[OpenApiParameter("judge", str, required=True, description="judge name (free text)"), *SCOPE_PARAMETERS],
    responses={200: OpenApiTypes.OBJECT},
    description="`correlate --dataset N --judge J --json` for dataset `pk`.",
)
@api_view(["GET"])
@permission_classes([IsResearcher])
def correlation_view(request: Request, pk: int) -> Response:
    dataset = dataset_for_stats_or_404(request.user, pk)
    query = CorrelationQuery(data=request.query_params)
    query.is_valid(raise_exception=True)
    scope = _scope(request, dataset, query.validated_data)
    try:
        return Response(correlation_report(dataset, query.validated_data["judge"], scope))
    except JudgeNotFound as exc:
        raise NotFound(str(exc)) from None
