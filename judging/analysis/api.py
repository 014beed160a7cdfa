"""Statistics API (researchers only, scoped): the same report functions as the CLI and the dashboard."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from annotations.models import Dataset
from judging.analysis.decisions import (
    COMPARISON_LEVELS,
    PLAN_STATISTICS,
    ComparisonError,
    PlanningError,
    PlanRequest,
    judge_comparison_report,
    plan_study,
)
from judging.analysis.judge_reports import (
    DEFAULT_EPSILON,
    METRIC_CHOICES,
    AltTestSettings,
    alt_test_report,
    correlation_report,
)
from judging.analysis.prediction_powered import ppi_report
from judging.analysis.ranking_reports import HUMANS, ranking_report
from judging.analysis.reports import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, JudgeNotFound, ReportError, agreement_report
from judging.analysis.selectors import (
    EXCLUDED_CHOICES,
    HUMAN_SCORE_CHOICES,
    ORIGINS,
    RatingScope,
    ScopeError,
    dataset_for_stats_or_404,
    rating_scope,
    stats_campaign_or_404,
)
from judging.certification.selectors import judge_certification
from judging.endpoints import researcher_api
from judging.statistics.alt_test import DEFAULT_MIN_INSTANCES, DEFAULT_Q
from judging.statistics.correlation import COEFFICIENTS
from judging.statistics.pairwise import DEFAULT_TIES, TIE_CONVENTIONS
from judging.statistics.ppi import TUNINGS
from judging.statistics.ranking import MIN_BOOTSTRAP

# The largest id the database can hold; a larger number cannot name a campaign.
CAMPAIGN_ID_MAX = 2**63 - 1
NOT_A_CAMPAIGN_ID = "campaign must be a campaign id (a positive whole number)."


def _optional_choice(name: str, choices: tuple[str, ...]) -> serializers.ChoiceField:
    """An optional parameter whose refusal names it and its choices."""
    return serializers.ChoiceField(
        choices=choices,
        required=False,
        error_messages={"invalid_choice": f"{name} must be one of {', '.join(choices)}, not " + '"{input}".'},
    )


class ScopeQuery(serializers.Serializer):
    origin = _optional_choice("origin", ORIGINS)
    excluded = _optional_choice("excluded", EXCLUDED_CHOICES)
    human = _optional_choice("human", HUMAN_SCORE_CHOICES)
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


class AltTestQuery(ScopeQuery):
    judge = serializers.CharField(max_length=200)
    aspect = serializers.CharField(max_length=200, required=False)
    epsilon = serializers.FloatField(min_value=0.0, max_value=0.99, required=False, default=DEFAULT_EPSILON)
    q = serializers.FloatField(min_value=0.001, max_value=0.5, required=False, default=DEFAULT_Q)
    metric = serializers.ChoiceField(choices=METRIC_CHOICES, required=False, default="auto")
    min_instances = serializers.IntegerField(
        min_value=2, max_value=100_000, required=False, default=DEFAULT_MIN_INSTANCES
    )


class RankingQuery(ScopeQuery):
    # "source" is an attribute of every serializer field, so the parameter of that name is read by ranking_source.
    aspect = serializers.CharField(max_length=200, required=False)
    reference = serializers.CharField(max_length=200, required=False)
    bootstrap = serializers.IntegerField(
        min_value=MIN_BOOTSTRAP, max_value=10_000, required=False, default=BOOTSTRAP_RESAMPLES
    )
    seed = serializers.IntegerField(min_value=0, max_value=2**32 - 1, required=False, default=BOOTSTRAP_SEED)
    ties = serializers.ChoiceField(choices=list(TIE_CONVENTIONS), required=False)


def ranking_source(request: Request) -> str:
    field = serializers.CharField(max_length=200, allow_blank=False)
    try:
        return str(field.run_validation(request.query_params.get("source", HUMANS)))
    except serializers.ValidationError as exc:
        raise ValidationError({"source": exc.detail}) from None


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
    OpenApiParameter(
        "human",
        str,
        enum=list(HUMAN_SCORE_CHOICES),
        description="an answer's human score: the mean of its ratings (raw, default) or its adjudicated value where "
        "a dispute was settled (adjudicated); agreement among raters always reads the raw ratings",
    ),
]


def _scope(request: Request, dataset: Dataset, query: dict[str, Any]) -> RatingScope:
    """404 for a campaign outside the researcher's datasets or of another dataset, 400 for a contradiction."""
    campaign = stats_campaign_or_404(request.user, dataset, query["campaign"]) if "campaign" in query else None
    try:
        scope = rating_scope(query.get("origin"), campaign, include_excluded=query.get("excluded") == "include")
    except ScopeError as exc:
        raise ValidationError({"origin": [str(exc)]}) from None
    return scope.with_adjudicated(query.get("human") == "adjudicated")


def _scoped_query(
    request: Request, pk: int, query_class: type[serializers.Serializer]
) -> tuple[Dataset, dict[str, Any], RatingScope]:
    """The researcher's dataset (404 otherwise), the query's validated parameters (400 on bad ones) and its scope."""
    dataset = dataset_for_stats_or_404(request.user, pk)
    query = query_class(data=request.query_params)
    query.is_valid(raise_exception=True)
    data = dict(query.validated_data)
    return dataset, data, _scope(request, dataset, data)


def _report_api(**schema: Any) -> Any:
    """A GET view for researchers whose answer is a report's JSON object, described by `schema`."""
    return researcher_api(["GET"], responses={200: OpenApiTypes.OBJECT}, **schema)


@contextmanager
def _report_errors(*refused: type[Exception]) -> Iterator[None]:
    """A judge that is not there is a 404; a report's refusal (one of `refused`) a 400 naming the problem."""
    try:
        yield
    except JudgeNotFound as exc:
        raise NotFound(str(exc)) from None
    except refused as exc:
        raise ValidationError({"detail": [str(exc)]}) from None


@_report_api(
    parameters=SCOPE_PARAMETERS,
    description="`agreement N --json` for dataset `pk`.",
)
def agreement_view(request: Request, pk: int) -> Response:
    dataset, _data, scope = _scoped_query(request, pk, ScopeQuery)
    return Response(agreement_report(dataset, scope))


@_report_api(
    parameters=[OpenApiParameter("judge", str, required=True, description="judge name (free text)"), *SCOPE_PARAMETERS],
    description="`correlate --dataset N --judge J --json` for dataset `pk`.",
)
def correlation_view(request: Request, pk: int) -> Response:
    dataset, data, scope = _scoped_query(request, pk, CorrelationQuery)
    with _report_errors():
        report = correlation_report(dataset, data["judge"], scope)
    return Response({**report, "certification": judge_certification(dataset, data["judge"])})


@_report_api(
    parameters=[
        OpenApiParameter("judge", str, required=True, description="judge name (free text)"),
        OpenApiParameter("aspect", str, description="one aspect (default: every aspect the judge scores)"),
        OpenApiParameter(
            "epsilon",
            float,
            description=f"cost-benefit margin given to the judge, in [0, 0.99] (default {DEFAULT_EPSILON}; the paper "
            "suggests 0.2 for experts, 0.15 for skilled annotators, 0.1 for crowd-workers)",
        ),
        OpenApiParameter("q", float, description=f"false discovery rate, in [0.001, 0.5] (default {DEFAULT_Q})"),
        OpenApiParameter("metric", str, enum=list(METRIC_CHOICES), description="alignment score (default auto)"),
        OpenApiParameter(
            "min_instances",
            int,
            description=f"raters with fewer usable answers are skipped (default {DEFAULT_MIN_INSTANCES})",
        ),
        *SCOPE_PARAMETERS,
    ],
    description="`alt_test --dataset N --judge J --json` for dataset `pk`: the alternative-annotator test "
    "(Calderon, Reichart and Dror 2025) per aspect.",
)
def alt_test_view(request: Request, pk: int) -> Response:
    dataset, data, scope = _scoped_query(request, pk, AltTestQuery)
    settings = AltTestSettings(
        epsilon=data["epsilon"], q=data["q"], metric=data["metric"], min_instances=data["min_instances"]
    )
    with _report_errors(ReportError):
        report = alt_test_report(dataset, data["judge"], data.get("aspect"), settings, scope)
    return Response({**report, "certification": judge_certification(dataset, data["judge"])})


@_report_api(
    parameters=[
        OpenApiParameter("source", str, description="humans (default) or a judge's name"),
        OpenApiParameter("aspect", str, description="rank by mean rating on this aspect instead of pairwise outcomes"),
        OpenApiParameter("reference", str, description="system whose log-strength is 0 (Bradley-Terry only)"),
        OpenApiParameter(
            "bootstrap",
            int,
            description=f"prompt resamples for rank intervals, {MIN_BOOTSTRAP} to 10000 (default 1000)",
        ),
        OpenApiParameter("seed", int, description="bootstrap seed (default 0)"),
        OpenApiParameter(
            "ties",
            str,
            enum=list(TIE_CONVENTIONS),
            description=f"Bradley-Terry only: how ties count: half (half a win to each side), drop (left out) or "
            f"davidson (Davidson's tie model); default {DEFAULT_TIES}",
        ),
        *SCOPE_PARAMETERS,
    ],
    description="`ranking --dataset N --json` for dataset `pk`: Bradley-Terry or mean-rating ranking with rank "
    "intervals; for a judge, Kendall's tau-b with the humans' ranking.",
)
def ranking_view(request: Request, pk: int) -> Response:
    dataset, data, scope = _scoped_query(request, pk, RankingQuery)
    source = ranking_source(request)
    with _report_errors(ReportError):
        return Response(
            ranking_report(
                dataset,
                source,
                data.get("aspect"),
                data.get("reference"),
                n_resamples=data["bootstrap"],
                seed=data["seed"],
                scope=scope,
                ties=data.get("ties"),
            )
        )


class JudgeComparisonQuery(ScopeQuery):
    judge1 = serializers.CharField(max_length=200)
    judge2 = serializers.CharField(max_length=200)
    aspect = serializers.CharField(max_length=200, required=False)
    level = serializers.ChoiceField(choices=COMPARISON_LEVELS, required=False, default="response")
    coefficient = serializers.ChoiceField(choices=COEFFICIENTS, required=False, default="pearson")


@_report_api(
    parameters=[
        OpenApiParameter("judge1", str, required=True, description="the first judge (the one-sided p tests r1 > r2)"),
        OpenApiParameter("judge2", str, required=True, description="the second judge"),
        OpenApiParameter("aspect", str, description="one aspect (default: every aspect both judges scored)"),
        OpenApiParameter("level", str, enum=list(COMPARISON_LEVELS), description="default response"),
        OpenApiParameter("coefficient", str, enum=list(COEFFICIENTS), description="default pearson"),
        *SCOPE_PARAMETERS,
    ],
    description="`compare_judges --dataset N --judges J1 J2 --json` for dataset `pk`: both judges against the same "
    "human scores, the difference r1 - r2 with its 95% interval, Williams's t and Steiger's z.",
)
def compare_judges_view(request: Request, pk: int) -> Response:
    dataset, data, scope = _scoped_query(request, pk, JudgeComparisonQuery)
    with _report_errors(ComparisonError):
        report = judge_comparison_report(
            dataset,
            data["judge1"],
            data["judge2"],
            scope,
            aspect=data.get("aspect"),
            level=data["level"],
            coefficient=data["coefficient"],
        )
    return Response(report)


class PlanQuery(serializers.Serializer):
    statistic = serializers.ChoiceField(choices=PLAN_STATISTICS)
    expected = serializers.FloatField(required=False)
    width = serializers.FloatField(required=False)
    raters = serializers.IntegerField(required=False, min_value=2, max_value=10_000)
    confidence = serializers.FloatField(required=False, default=0.95)
    power = serializers.FloatField(required=False)
    null = serializers.FloatField(required=False, default=0.0)
    significance = serializers.FloatField(required=False, default=0.05)
    alpha_min = serializers.FloatField(required=False)
    smallest_category = serializers.FloatField(required=False)


@_report_api(
    parameters=[PlanQuery],
    description='`plan_study ... --json`: {"items": N} for a target interval width (pearson, spearman, kendall, icc '
    "with raters), for a power against a null value (pearson), or Krippendorff's minimum number of values for two "
    "coders (alpha with alpha_min and smallest_category).",
)
def plan_view(request: Request) -> Response:
    query = PlanQuery(data=request.query_params)
    query.is_valid(raise_exception=True)
    try:
        return Response(plan_study(PlanRequest(**query.validated_data)))
    except PlanningError as exc:
        raise ValidationError({"detail": [str(exc)]}) from None


class PPIQuery(ScopeQuery):
    judge = serializers.CharField(max_length=200)
    aspect = serializers.CharField(max_length=200, required=False)
    tuning = serializers.ChoiceField(choices=TUNINGS, required=False, default="ppi++")


@_report_api(
    parameters=[
        OpenApiParameter("judge", str, required=True, description="judge name (it must score every answer)"),
        OpenApiParameter("aspect", str, description="one aspect (default: every aspect the judge scores)"),
        OpenApiParameter(
            "tuning",
            str,
            enum=list(TUNINGS),
            description="ppi++ (default: the variance-minimising weight on the judge) or ppi (weight 1)",
        ),
        *SCOPE_PARAMETERS,
    ],
    description="`ppi --dataset N --judge J --json` for dataset `pk`: prediction-powered system means and pairwise "
    "differences (Angelopoulos et al. 2023, PPI++ tuning) beside the human-only ones, with the effective number of "
    "human ratings.",
)
def ppi_view(request: Request, pk: int) -> Response:
    dataset, data, scope = _scoped_query(request, pk, PPIQuery)
    with _report_errors(ReportError):
        return Response(ppi_report(dataset, data["judge"], data.get("aspect"), data["tuning"], scope))
