"""Statistics API (researchers only, scoped): the same report functions as the CLI and the dashboard."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from annotations.permissions import IsResearcher
from judging.analysis.reports import JudgeNotFound, agreement_report, correlation_report
from judging.analysis.selectors import dataset_for_stats_or_404


class CorrelationQuery(serializers.Serializer):
    judge = serializers.CharField(max_length=200)


@extend_schema(responses={200: OpenApiTypes.OBJECT}, description="`agreement N --json` for dataset `pk`.")
@api_view(["GET"])
@permission_classes([IsResearcher])
def agreement_view(request: Request, pk: int) -> Response:
    dataset = dataset_for_stats_or_404(request.user, pk)
    return Response(agreement_report(dataset))


@extend_schema(
    parameters=[OpenApiParameter("judge", str, required=True, description="judge name (free text)")],
    responses={200: OpenApiTypes.OBJECT},
    description="`correlate --dataset N --judge J --json` for dataset `pk`.",
)
@api_view(["GET"])
@permission_classes([IsResearcher])
def correlation_view(request: Request, pk: int) -> Response:
    dataset = dataset_for_stats_or_404(request.user, pk)
    query = CorrelationQuery(data=request.query_params)
    query.is_valid(raise_exception=True)
    try:
        return Response(correlation_report(dataset, query.validated_data["judge"]))
    except JudgeNotFound as exc:
        raise NotFound(str(exc)) from None
