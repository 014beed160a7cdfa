"""Judge engine API: one view per operation, each with its own input and output serializers.

Every object is looked up through a selector scoped by the requesting researcher: ids outside
their datasets (or other researchers' configs) give 404, wherever the id appears.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.http import Http404
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from annotations.selectors import dataset_for_user_or_404
from judging import run_plans, selectors, services
from judging.certification.selectors import version_standing
from judging.config import ConfigError, validate_config
from judging.endpoints import researcher_api
from judging.models import JudgeRun


class ConfigOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    version = serializers.IntegerField()
    config = serializers.JSONField()
    created_at = serializers.DateTimeField()


class ConfigInput(serializers.Serializer):
    config = serializers.JSONField(help_text="A judge configuration: the fields judging.config validates.")


class RunOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    dataset = serializers.IntegerField(source="dataset_id")
    campaign = serializers.IntegerField(source="campaign_id", allow_null=True)
    method = serializers.CharField()
    status = serializers.CharField()
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    failed = serializers.IntegerField()
    parse_errors = serializers.IntegerField()
    cache_hits = serializers.IntegerField()
    calls = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost_usd = serializers.SerializerMethodField()
    cost_known = serializers.BooleanField()
    position_consistency = serializers.FloatField(allow_null=True)
    logprob_fallbacks = serializers.IntegerField()
    sampled_fallbacks = serializers.IntegerField(
        help_text="Judgments scored from sampled replies because the provider returned no log-probabilities."
    )
    error_summary = serializers.JSONField()
    notes = serializers.CharField()
    config = serializers.JSONField(source="config_snapshot")
    prompt_language = serializers.CharField(help_text="Blank when the config asks for per-item detection.")
    estimate = serializers.JSONField(help_text="The launch estimate: expected and worst-case calls, tokens and cost.")
    start_unsent_at = serializers.DateTimeField(
        allow_null=True, help_text="Set while the start waits for the broker, which could not take it at launch."
    )
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    version = serializers.SerializerMethodField(
        help_text="The judge version's fingerprint, set when the run ends; null while it runs or when the provider "
        "named several models during it (version_problem says so)."
    )
    version_problem = serializers.CharField()
    certification = serializers.SerializerMethodField(help_text="certified, suspended or uncertified.")

    def get_version(self, run: JudgeRun) -> str | None:
        return run.version.fingerprint if run.version is not None else None

    def get_certification(self, run: JudgeRun) -> str:
        return version_standing(run.version)

    def get_cost_usd(self, run: JudgeRun) -> float | None:
        # Unknown prices are reported as unknown, never as 0.
        return run.cost_usd if run.cost_known else None


class LaunchInput(serializers.Serializer):
    dataset = serializers.IntegerField()
    config_id = serializers.IntegerField(required=False)
    config = serializers.JSONField(required=False)
    campaign = serializers.IntegerField(required=False, allow_null=True)
    limit = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    name = serializers.CharField(required=False, allow_blank=False, max_length=200)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("config_id" in attrs) == ("config" in attrs):
            raise serializers.ValidationError("give exactly one of config_id or config")
        return attrs


class EstimateOutput(serializers.Serializer):
    units = serializers.IntegerField()
    calls = serializers.IntegerField()
    cached_calls = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost_usd = serializers.FloatField(allow_null=True)
    aspects = serializers.ListField(child=serializers.CharField())
    calls_max = serializers.IntegerField()
    prompt_tokens_max = serializers.IntegerField()
    completion_tokens_max = serializers.IntegerField()
    cost_usd_max = serializers.FloatField(allow_null=True)
    language = serializers.CharField()


class JudgmentOutput(serializers.Serializer):
    id = serializers.IntegerField()
    response = serializers.IntegerField(source="response_id")
    other_response = serializers.IntegerField(source="other_response_id", allow_null=True)
    aspect = serializers.CharField(source="aspect_name")
    sample = serializers.IntegerField()
    pair_order = serializers.IntegerField()
    status = serializers.CharField()
    score = serializers.FloatField(allow_null=True)
    verdict = serializers.CharField()
    reasoning = serializers.CharField()
    summary = serializers.CharField()
    raw_output = serializers.CharField()
    distribution = serializers.JSONField(allow_null=True)
    logprob_fallback = serializers.BooleanField()
    logprob_fallback_reason = serializers.CharField()
    score_mode = serializers.CharField()
    prompt_hash = serializers.CharField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost_usd = serializers.FloatField(allow_null=True)
    latency_s = serializers.FloatField(allow_null=True)
    queue_wait_s = serializers.FloatField(allow_null=True)
    attempts = serializers.IntegerField()
    lost_calls = serializers.IntegerField()
    lost_cost_usd = serializers.FloatField()
    cache_hit = serializers.BooleanField()
    provider_model = serializers.CharField(help_text="The model the provider's reply named.")
    error_kind = serializers.CharField()
    error = serializers.CharField()


class JudgmentQuery(serializers.Serializer):
    status = serializers.ChoiceField(choices=["pending", "claimed", "done", "failed"], required=False)
    offset = serializers.IntegerField(required=False, min_value=0, default=0)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=100)


def _researcher(request: Request) -> User:
    # IsResearcher has already refused anonymous users.
    assert isinstance(request.user, User)
    return request.user


def _errors(exc: ConfigError | services.LaunchError) -> Response:
    detail = exc.errors if isinstance(exc, ConfigError) else [str(exc)]
    return Response({"errors": detail}, status=status.HTTP_400_BAD_REQUEST)


@researcher_api(["GET"], responses=ConfigOutput(many=True))
def config_list(request: Request) -> Response:
    configs = selectors.judge_configs_for_user(request.user).order_by("name", "-version")[:500]
    return Response(ConfigOutput(configs, many=True).data)


@researcher_api(["POST"], request=ConfigInput, responses={201: ConfigOutput})
def config_create(request: Request) -> Response:
    data = ConfigInput(data=request.data)
    data.is_valid(raise_exception=True)
    try:
        config = services.judge_config_create(raw=data.validated_data["config"], owner=_researcher(request))
    except ConfigError as exc:
        return _errors(exc)
    return Response(ConfigOutput(config).data, status=status.HTTP_201_CREATED)


@researcher_api(["GET"], responses=RunOutput(many=True))
def run_list(request: Request) -> Response:
    runs = selectors.judge_runs_for_user(request.user).order_by("-created_at")[:500]
    return Response(RunOutput(runs, many=True).data)


@researcher_api(["GET"], responses=RunOutput)
def run_detail(request: Request, pk: int) -> Response:
    return Response(RunOutput(selectors.judge_run_for_user_or_404(request.user, pk)).data)


def _launch_arguments(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    dataset = dataset_for_user_or_404(request.user, data["dataset"])
    campaign = None
    if data.get("campaign") is not None:
        campaign = selectors.campaigns_of_dataset(dataset.pk).filter(pk=data["campaign"]).first()
        if campaign is None:
            raise Http404("no such campaign on this dataset")
    if "config_id" in data:
        config: Any = selectors.judge_config_for_user_or_404(request.user, data["config_id"])
    else:
        config = data["config"]
    return {"dataset": dataset, "campaign": campaign, "config": config, "limit": data.get("limit")}


@researcher_api(["POST"], request=LaunchInput, responses={201: RunOutput})
def run_launch(request: Request) -> Response:
    data = LaunchInput(data=request.data)
    data.is_valid(raise_exception=True)
    arguments = _launch_arguments(request, data.validated_data)
    try:
        run = services.judge_run_launch(
            launched_by=_researcher(request), name=data.validated_data.get("name"), **arguments
        )
    except (ConfigError, services.LaunchError) as exc:
        return _errors(exc)
    return Response(RunOutput(run).data, status=status.HTTP_201_CREATED)


@researcher_api(["POST"], request=LaunchInput, responses=EstimateOutput)
def run_estimate(request: Request) -> Response:
    data = LaunchInput(data=request.data)
    data.is_valid(raise_exception=True)
    arguments = _launch_arguments(request, data.validated_data)
    config = arguments["config"]
    try:
        cfg = validate_config(config.config if hasattr(config, "config") else config)
        estimate = run_plans.estimate_run(
            dataset=arguments["dataset"],
            cfg=cfg,
            campaign=arguments["campaign"],
            limit=arguments["limit"],
            launched_by=_researcher(request),
        )
    except (ConfigError, services.LaunchError) as exc:
        return _errors(exc)
    return Response(EstimateOutput(estimate).data)


@researcher_api(["POST"], request=None, responses=RunOutput)
def run_cancel(request: Request, pk: int) -> Response:
    run = selectors.judge_run_for_user_or_404(request.user, pk)
    services.judge_run_cancel(run=run)
    run.refresh_from_db()
    return Response(RunOutput(run).data)


@researcher_api(["POST"], request=None, responses=RunOutput)
def run_retry_failed(request: Request, pk: int) -> Response:
    run = selectors.judge_run_for_user_or_404(request.user, pk)
    try:
        services.judge_run_retry_failed(run=run)
    except services.LaunchError as exc:
        return _errors(exc)
    run.refresh_from_db()
    return Response(RunOutput(run).data)


@researcher_api(["GET"], parameters=[JudgmentQuery], responses=JudgmentOutput(many=True))
def run_judgments(request: Request, pk: int) -> Response:
    run = selectors.judge_run_for_user_or_404(request.user, pk)
    query = JudgmentQuery(data=request.query_params)
    query.is_valid(raise_exception=True)
    judgments = selectors.judgments_of_run(run)
    if query.validated_data.get("status"):
        judgments = judgments.filter(status=query.validated_data["status"])
    start = query.validated_data["offset"]
    page = judgments.order_by("id")[start : start + query.validated_data["limit"]]
    return Response(JudgmentOutput(page, many=True).data)
