"""The annotator API: the same campaign rules as the web pages, for token-authenticated clients.

One view per operation with its own input and output serializers. Outputs carry only what the task page shows:
candidate numbers and texts, never response ids, system keys, model names, other ratings or judge scores.
"""

import re
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.decorators import api_view, authentication_classes, content_negotiation_class, renderer_classes
from rest_framework.exceptions import AuthenticationFailed, NotFound
from rest_framework.exceptions import PermissionDenied as ApiPermissionDenied
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from annotations.api.tokens import ExpiringTokenAuthentication, expired_token_error, token_is_expired
from annotations.campaigns.answers import IDEMPOTENCY_KEY_RE, MAX_TEXT_CHARS, MISSING, TaskAnswer
from annotations.campaigns.claims import assignment_claim, assignment_skip
from annotations.campaigns.drafts import assignment_draft_save
from annotations.campaigns.errors import (
    AlreadyRated,
    CampaignError,
    DraftInvalid,
    QuotaReached,
    RevisitRefused,
    SubmissionInvalid,
)
from annotations.campaigns.progress import annotator_progress
from annotations.campaigns.selectors import campaign_for_annotator, campaigns_for_annotator
from annotations.campaigns.submissions import submission_create
from annotations.campaigns.tasks import earlier_prompts, leased_assignment, task_candidates
from annotations.models import Assignment, Campaign, SkipReason
from annotations.permissions import unexpected_fields_refusal
from annotations.rubrics.task_sheet import Scale, campaign_scales
from annotations.slots import NotInPool, NotLeased
from annotations.slots.statements import instance_from_row, statement_cursor
from annotations.text.ascii_numbers import ascii_int
from annotations.text.opaque import opaque_ref
from annotations.text.storable import is_storable

# What the annotator API reads of the account; any other field loads on first access (the ORM's deferred fields).
# Timestamps and the password hash are left out: Django's timestamp loader is Python code, run per column and row.
USER_COLUMNS = ("id", "username", "is_active", "is_staff", "is_superuser")
_ACCOUNT_BY_KEY_SQL = """
SELECT token.key, token.user_id, token.created,
       account.id, account.username, account.is_active, account.is_staff, account.is_superuser
FROM authtoken_token token
JOIN auth_user account ON account.id = token.user_id
WHERE token.key = %(key)s
"""


class AnnotatorTokenAuthentication(ExpiringTokenAuthentication):
    """DRF's token authentication with the same checks, reading the token and its user in one SQL statement:
    the ORM's query building for that lookup was the largest single cost of an annotator request."""

    def authenticate_credentials(self, key: str) -> tuple[User, Token]:
        with statement_cursor() as cursor:
            cursor.execute(_ACCOUNT_BY_KEY_SQL, {"key": key})
            row = cursor.fetchone()
        if row is None:
            raise AuthenticationFailed(_("Invalid token."))
        user = instance_from_row(User, USER_COLUMNS, row[3:])
        if not user.is_active:
            raise AuthenticationFailed(_("User inactive or deleted."))
        token = instance_from_row(Token, ("key", "user_id", "created"), row[:3])
        if token_is_expired(token.created):
            raise expired_token_error()
        token.user = user
        return user, token


# The project's default authentication classes (settings.REST_FRAMEWORK), with the token lookup above; a test keeps
# the two lists in step.
ANNOTATOR_AUTHENTICATION = [SessionAuthentication, AnnotatorTokenAuthentication]
# JSON only, in development too: annotator clients are programs, and negotiating against the browsable API's
# renderer cost more CPU per request than the assignment query itself.
ANNOTATOR_RENDERERS = [JSONRenderer]


class PlainJsonNegotiation(DefaultContentNegotiation):
    """Skips parsing the Accept header in the common cases (none, */*, application/json), which all get the one
    JSON renderer; anything else is negotiated as usual (text/html alone still gets 406)."""

    plain_accepts = frozenset({"", "*/*", "application/json"})

    def select_renderer(self, request: Request, renderers: list[Any], format_suffix: str | None = None) -> tuple:  # type: ignore[override]
        meta = request.META
        if format_suffix is None and not meta.get("QUERY_STRING") and meta.get("HTTP_ACCEPT", "") in self.plain_accepts:
            return renderers[0], renderers[0].media_type
        return super().select_renderer(request, renderers, format_suffix)


def annotator_endpoint(methods: list[str]) -> Any:
    """api_view with the annotator API's authentication, renderer and negotiation."""

    def decorate(view: Any) -> Any:
        view = content_negotiation_class(PlainJsonNegotiation)(view)
        view = renderer_classes(ANNOTATOR_RENDERERS)(view)
        view = authentication_classes(ANNOTATOR_AUTHENTICATION)(view)
        return api_view(methods)(view)

    return decorate


class CampaignOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    done = serializers.IntegerField()
    available = serializers.IntegerField()
    has_open_task = serializers.BooleanField()


class OptionOutput(serializers.Serializer):
    value = serializers.FloatField()
    label = serializers.CharField()  # type: ignore[assignment]


class AspectOutput(serializers.Serializer):
    name = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]
    description = serializers.CharField()
    min = serializers.FloatField()
    max = serializers.FloatField()
    options = OptionOutput(many=True)
    allows_missing = serializers.BooleanField()


class CandidateOutput(serializers.Serializer):
    number = serializers.IntegerField()
    text = serializers.CharField()
    earlier_answers = serializers.ListField(child=serializers.CharField())
    instruction = serializers.CharField(allow_blank=True, help_text="An instruction to follow for this answer.")


class TaskOutput(serializers.Serializer):
    campaign = serializers.IntegerField()
    task = serializers.CharField(help_text="The task's reference, for the task's addresses.")
    lease_expires_at = serializers.DateTimeField()
    earlier_prompts = serializers.ListField(child=serializers.CharField())
    prompt = serializers.CharField()
    reference = serializers.CharField(allow_null=True)
    context = serializers.ListField(child=serializers.CharField())  # type: ignore[assignment]
    aspects = AspectOutput(many=True)
    candidates = CandidateOutput(many=True)
    ask_preference = serializers.BooleanField(help_text="Whether this task asks a preference (not with one candidate).")
    rationale_required = serializers.BooleanField()


class AsciiIntegerField(serializers.IntegerField):
    """An integer sent as a JSON number or as ASCII digits: DRF's field passes text to int(), which also reads
    other scripts' digits ("３", "٣")."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, str):
            whole, _, fraction = data.strip().partition(".")
            if ascii_int(whole, signed=True) is None or fraction.strip("0"):
                self.fail("invalid")
        return int(super().to_internal_value(data))


class SubmitInput(serializers.Serializer):
    idempotency_key = serializers.RegexField(IDEMPOTENCY_KEY_RE)
    ratings = serializers.DictField(
        child=serializers.DictField(child=serializers.JSONField(), allow_empty=False),
        help_text='{"<candidate number>": {"<aspect name>": <number> or "NA"}}',
    )
    preference = AsciiIntegerField(required=False, allow_null=True, min_value=1, max_value=999)
    none_appropriate = serializers.BooleanField(default=False)
    rationale = serializers.CharField(required=False, allow_blank=True, max_length=MAX_TEXT_CHARS, default="")
    comment = serializers.CharField(required=False, allow_blank=True, max_length=MAX_TEXT_CHARS, default="")


CANDIDATE_NUMBER = re.compile(r"[0-9]{1,3}")


SUBMIT_FIELDS = frozenset(SubmitInput._declared_fields)


def _plain_text(value: Any) -> str | None:
    """What SubmitInput's rationale and comment fields make of a well-formed string (stripped), else None."""
    if type(value) is not str:
        return None
    text = value.strip()
    if len(text) > MAX_TEXT_CHARS or not is_storable(text):
        return None
    return text


def _well_formed_submit(data: Any) -> dict[str, Any] | None:
    """SubmitInput's validated data for a body it accepts without converting anything, or None to let the
    serializer decide (and name the problems). Building the serializer's fields costs more than a submit's whole
    database work, and clients send well-formed bodies; the parity test feeds both paths the same bodies."""
    if type(data) is not dict:
        return None
    key = data.get("idempotency_key")
    ratings = data.get("ratings")
    if type(key) is not str or not IDEMPOTENCY_KEY_RE.fullmatch(key) or type(ratings) is not dict:
        return None
    for by_aspect in ratings.values():
        if type(by_aspect) is not dict or not by_aspect:
            return None
        if any(type(value) not in (int, float, str, bool) for value in by_aspect.values()):
            return None
    validated: dict[str, Any] = {"idempotency_key": key, "ratings": {k: dict(v) for k, v in ratings.items()}}
    if "preference" in data:
        preference = data["preference"]
        if preference is not None and (type(preference) is not int or not 1 <= preference <= 999):
            return None
        validated["preference"] = preference
    none_appropriate = data.get("none_appropriate", False)
    if type(none_appropriate) is not bool:
        return None
    validated["none_appropriate"] = none_appropriate
    for name in ("rationale", "comment"):
        text = _plain_text(data.get(name, ""))
        if text is None:
            return None
        validated[name] = text
    return validated


def submit_input(data: Any) -> dict[str, Any]:
    """The validated submit body; raises the serializer's ValidationError (a 400 naming each field) otherwise."""
    validated = _well_formed_submit(data)
    if validated is None:
        form = SubmitInput(data=data)
        form.is_valid(raise_exception=True)
        validated = dict(form.validated_data)
    return validated


class SubmitOutput(serializers.Serializer):
    submitted = serializers.BooleanField()
    replayed = serializers.BooleanField()
    seconds_spent = serializers.FloatField()


class SkipInput(serializers.Serializer):
    reason = serializers.ChoiceField(choices=SkipReason.choices)
    note = serializers.CharField(required=False, allow_blank=True, max_length=MAX_TEXT_CHARS, default="")


SKIP_FIELDS = frozenset(SkipInput._declared_fields)


class ProblemOutput(serializers.Serializer):
    field = serializers.CharField()
    message = serializers.CharField()


def _campaign(request: Request, campaign_id: int) -> Campaign:
    try:
        return campaign_for_annotator(request.user, campaign_id)
    except PermissionDenied as exc:
        raise ApiPermissionDenied(str(exc)) from None


def _lease(request: Request, campaign: Campaign, task_id: int) -> Assignment:
    try:
        return leased_assignment(campaign=campaign, task_id=task_id, user=request.user)
    except PermissionDenied as exc:
        raise ApiPermissionDenied(str(exc)) from None


def _aspect_payload(scale: Scale) -> dict[str, Any]:
    aspect = scale.aspect
    return {
        "name": aspect.name,
        "label": aspect.display_label,
        "description": aspect.display_description,
        "min": aspect.min_value,
        "max": aspect.max_value,
        "options": [{"value": o.value, "label": o.label} for o in scale.options],
        "allows_missing": scale.allows_missing,
    }


def _task_payload(request: Request, campaign: Campaign, assignment: Assignment) -> dict[str, Any]:
    """The TaskOutput document, built ready for JSON: the serializer documents it but would only copy it field by
    field, about a millisecond per task on the hot path (tests check the two agree)."""
    turn = assignment.task.turn
    candidates = task_candidates(assignment=assignment, user_id=int(request.user.pk or 0))
    return {
        "campaign": campaign.pk,
        "task": opaque_ref("task", assignment.task_id),
        "lease_expires_at": assignment.lease_expires_at,
        "earlier_prompts": earlier_prompts(turn),
        "prompt": turn.prompt,
        "reference": turn.reference if campaign.show_reference else None,
        "context": turn.context_passages if campaign.show_context else [],
        "aspects": [_aspect_payload(s) for s in campaign_scales(campaign)],
        "candidates": [
            {"number": c.number, "text": c.text, "earlier_answers": c.earlier_answers, "instruction": c.instruction}
            for c in candidates
        ],
        "ask_preference": campaign.ask_preference and len(candidates) > 1,
        "rationale_required": campaign.rationale_required,
    }


@extend_schema(responses=CampaignOutput(many=True))
@annotator_endpoint(["GET"])
def my_campaigns(request: Request) -> Response:
    rows = []
    for campaign in campaigns_for_annotator(request.user):
        progress = annotator_progress(campaign=campaign, user=request.user)
        rows.append(
            {
                "id": campaign.pk,
                "name": campaign.name,
                "done": progress.done,
                "available": progress.available,
                "has_open_task": progress.has_open_task,
            }
        )
    return Response(CampaignOutput(rows, many=True).data)


@extend_schema(request=None, responses={200: TaskOutput, 204: None})
@annotator_endpoint(["POST"])
def next_task(request: Request, campaign_id: int) -> Response:
    """Leases the next task (or resumes the open one); 204 when nothing is left for this annotator."""
    campaign = _campaign(request, campaign_id)
    try:
        assignment = assignment_claim(campaign=campaign, user=request.user)  # type: ignore[arg-type]
    except NotInPool:
        raise NotFound("no such campaign") from None
    if assignment is None:
        return Response(status=status.HTTP_204_NO_CONTENT)
    return Response(_task_payload(request, campaign, assignment))


@extend_schema(responses=TaskOutput)
@annotator_endpoint(["GET"])
def task_detail(request: Request, campaign_id: int, task_id: int) -> Response:
    campaign = _campaign(request, campaign_id)
    assignment = _lease(request, campaign, task_id)
    return Response(_task_payload(request, campaign, assignment))


def _answer_from_payload(campaign: Campaign, data: dict[str, Any]) -> TaskAnswer | list[dict[str, str]]:
    index_of = {s.aspect.name: s.index for s in campaign_scales(campaign)}
    problems: list[dict[str, str]] = []
    ratings: dict[tuple[int, int], Any] = {}
    for number_text, by_aspect in data["ratings"].items():
        if not CANDIDATE_NUMBER.fullmatch(str(number_text)):
            problems.append({"field": f"ratings.{number_text}", "message": "candidate numbers are 1, 2, …"})
            continue
        for aspect_name, raw in by_aspect.items():
            if aspect_name not in index_of:
                problems.append({"field": f"ratings.{number_text}.{aspect_name}", "message": "unknown aspect"})
                continue
            value: Any = raw
            if raw is None or raw == "NA":
                value = MISSING
            ratings[(int(number_text), index_of[aspect_name])] = value
    if problems:
        return problems
    return TaskAnswer(
        ratings=ratings,
        preference=data.get("preference"),
        none_appropriate=data["none_appropriate"],
        rationale=data["rationale"],
        comment=data["comment"],
    )


@extend_schema(request=SubmitInput, responses={201: SubmitOutput, 200: SubmitOutput, 400: ProblemOutput(many=True)})
@annotator_endpoint(["POST"])
def submit_task(request: Request, campaign_id: int, task_id: int) -> Response:
    campaign = _campaign(request, campaign_id)
    refusal = unexpected_fields_refusal(request.data, SUBMIT_FIELDS)
    if refusal is not None:
        return refusal
    validated = submit_input(request.data)
    answer = _answer_from_payload(campaign, validated)
    if isinstance(answer, list):
        return Response({"problems": answer}, status=status.HTTP_400_BAD_REQUEST)
    try:
        result = submission_create(
            campaign=campaign,
            task_id=task_id,
            user=request.user,  # type: ignore[arg-type]
            idempotency_key=validated["idempotency_key"],
            answer=answer,
        )
    except RevisitRefused:
        detail = "this task is already submitted and the campaign does not allow changes; nothing was changed"
        return Response({"detail": detail}, status=status.HTTP_409_CONFLICT)
    except QuotaReached:
        detail = "you have submitted every task your study link allows; this answer was not stored"
        return Response({"detail": detail}, status=status.HTTP_409_CONFLICT)
    except (NotLeased, NotInPool):
        if not campaign.tasks.filter(pk=task_id).exists():
            raise NotFound("no such task") from None
        raise ApiPermissionDenied("this task is not leased to you") from None
    except AlreadyRated:
        detail = (
            "you already rated one of this task's answers in another campaign of the dataset, so this task cannot "
            "take your answer; nothing was stored and the next task request gives it back"
        )
        return Response({"detail": detail}, status=status.HTTP_409_CONFLICT)
    except SubmissionInvalid as invalid:
        problems = [{"field": p.field, "message": p.message} for p in invalid.problems]
        return Response({"problems": problems}, status=status.HTTP_400_BAD_REQUEST)
    payload = {
        "submitted": True,
        "replayed": result.replayed,
        "revised": result.revised,
        "seconds_spent": result.submission.seconds_spent,
    }
    return Response(payload, status=status.HTTP_200_OK if result.replayed or result.revised else 201)


@extend_schema(request=SkipInput, responses={204: None})
@annotator_endpoint(["POST"])
def skip_task(request: Request, campaign_id: int, task_id: int) -> Response:
    campaign = _campaign(request, campaign_id)
    assignment = _lease(request, campaign, task_id)
    refusal = unexpected_fields_refusal(request.data, SKIP_FIELDS)
    if refusal is not None:
        return refusal
    form = SkipInput(data=request.data)
    form.is_valid(raise_exception=True)
    try:
        assignment_skip(
            assignment=assignment,
            user=request.user,  # type: ignore[arg-type]
            reason=form.validated_data["reason"],
            note=form.validated_data["note"],
        )
    except NotLeased:
        raise ApiPermissionDenied("this task is not leased to you") from None
    except CampaignError as exc:
        return Response({"detail": str(exc)}, status=400)
    return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(
    request={"application/json": {"type": "object", "additionalProperties": {"type": "string"}}},
    responses={204: None},
    description="Keeps a draft of the leased task (or of a correction): the task form's own fields as text, "
    '{"r-<candidate>-<aspect>": "3", "preference": "2", "rationale": "..."}. It replaces the earlier draft and never '
    "counts as a rating.",
)
@annotator_endpoint(["POST"])
def draft_task(request: Request, campaign_id: int, task_id: int) -> Response:
    campaign = _campaign(request, campaign_id)
    if not isinstance(request.data, dict):
        return Response({"detail": "send the draft as a JSON object of field names and text values"}, status=400)
    try:
        assignment_draft_save(
            campaign=campaign,
            task_id=task_id,
            user=request.user,  # type: ignore[arg-type]
            values=dict(request.data),
        )
    except NotInPool:
        raise NotFound("no such campaign") from None
    except PermissionDenied as exc:
        raise ApiPermissionDenied(str(exc)) from None
    except DraftInvalid as exc:
        return Response({"detail": str(exc)}, status=400)
    return Response(status=status.HTTP_204_NO_CONTENT)
