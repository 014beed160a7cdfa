"""The admin cannot store what the importer would refuse.

Every admin registered for the annotations and judging apps is walked as the researcher who owns a dataset (with
every model permission an operator can grant) and as a superuser: the add form, the change form (GET, then POSTs
with bad values: a raw 99 on a 0-3 aspect, a rater of another dataset, an answer moved to another item, NUL bytes,
empty required fields) and the delete view of a row of the dataset. Nothing may change in the database, and no
answer may be a 500. The writes the admin keeps (renaming and sharing a dataset, a campaign's settings, judge
configs, corpus uploads) are shown to store good values and refuse bad ones.
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Group, Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import models
from django.forms.models import model_to_dict
from django.test import Client
from django.urls import reverse

from annotations.campaigns.claims import assignment_skip
from annotations.gold.services import gold_item_set
from annotations.models import (
    Aspect,
    Assignment,
    AssignmentStatus,
    Campaign,
    Dataset,
    GoldItem,
    Item,
    Rater,
    Rating,
    Response,
    Skip,
    SkipReason,
    System,
    Turn,
)
from annotations.rubrics.specs import load_rubric_bytes
from judging import services as judging_services
from judging.factscore.models import FactAnswer, FactReviewCampaign, KnowledgeCorpus, Passage
from judging.models import JudgeConfig, JudgeRun, JudgeScore, Judgment
from tests.factscore.factories import make_fact_dataset
from tests.security.html_checks import offered
from tests.security.world import World, build_world

pytestmark = pytest.mark.django_db

OUR_APPS = ("annotations", "judging")
SAMPLES = Path(__file__).resolve().parents[2] / "annotations" / "sample_data"
METRIC_CONFIG = {"name": "length-judge", "method": "metric", "metric": "length"}

# Admins that keep a legitimate write; every other one of our admins is read-only for everyone.
ADDS = {Campaign, JudgeConfig, KnowledgeCorpus, FactReviewCampaign, GoldItem}
CHANGES = {Dataset, Campaign, JudgeConfig, FactReviewCampaign, GoldItem}


@dataclass
class Tenants:
    world: World
    rows: dict[type, models.Model]  # a row of each admin model in the researcher's datasets
    foreign: dict[type, models.Model]  # a row of the same model in researcher_b's dataset, where one exists


def _our_admins() -> list[tuple[type[models.Model], admin.ModelAdmin]]:
    return [
        (model, model_admin) for model, model_admin in admin.site._registry.items() if model._meta.app_label in OUR_APPS
    ]


def snapshot() -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of our apps (many-to-many tables included), in a stable order."""
    return {
        model._meta.label: list(model._default_manager.order_by("pk").values_list())
        for app in OUR_APPS
        for model in apps.get_app_config(app).get_models(include_auto_created=True)
    }


@pytest.fixture
def tenants(researcher: User, annotator1: User, annotator2: User, outsider: User, settings, tmp_path) -> Tenants:  # type: ignore[no-untyped-def]
    settings.VAR_DIR = tmp_path
    world = build_world(
        researcher=researcher,
        annotator=annotator1,
        annotator_b=annotator2,
        outsider=outsider,
        dataset_a_bytes=(SAMPLES / "lfqa_sample.jsonl").read_bytes(),
        dataset_a_rubric=load_rubric_bytes((SAMPLES / "lfqa_rubric.json").read_bytes()),
    )
    # Researchers work in the admin with the model permissions an operator grants them; the admin's own rules
    # must hold with every permission granted.
    ours = Permission.objects.filter(content_type__app_label__in=OUR_APPS)
    researcher.user_permissions.add(*ours)
    world.researcher_b.user_permissions.add(*ours)
    dataset, other = world.dataset_a, world.dataset_b
    config = judging_services.judge_config_create(raw=METRIC_CONFIG, owner=researcher)
    run = judging_services.judge_run_launch(dataset=dataset, config=config, launched_by=researcher, limit=2)
    fact_dataset = make_fact_dataset(owner=researcher)
    fact_answer = FactAnswer.objects.create(run=run, response=Response.objects.filter(turn__item__dataset=dataset)[0])
    review = FactReviewCampaign.objects.create(name="review-a", run=run, shuffle_seed="0" * 32, created_by=researcher)
    review.annotators.set([annotator1])
    lease = Assignment.objects.get(campaign=world.campaign_a, annotator=annotator1, status=AssignmentStatus.LEASED)
    skip = assignment_skip(assignment=lease, user=annotator1, reason=SkipReason.OTHER, note="not today")
    # A gold item whose tasks nobody was handed, so marking it leaves every lease of campaign A as it was.
    gold_item = Item.objects.filter(dataset=dataset).exclude(
        turns__campaign_tasks__assignments__annotator__isnull=False
    )[0]
    gold_answer = Response.objects.filter(turn__item=gold_item).select_related("system")[0]
    scale = Aspect.objects.filter(dataset=dataset).order_by("position")[0]
    gold = gold_item_set(
        item=gold_item, kind="gold", expected={gold_answer.system.key: {scale.name: scale.min_value}}, by=researcher
    )
    rows: dict[type, models.Model] = {
        Dataset: dataset,
        GoldItem: gold,
        System: System.objects.filter(dataset=dataset)[0],
        Item: Item.objects.filter(dataset=dataset)[0],
        Turn: Turn.objects.filter(item__dataset=dataset)[0],
        Response: Response.objects.filter(turn__item__dataset=dataset)[0],
        Rater: Rater.objects.filter(dataset=dataset)[0],
        Rating: Rating.objects.filter(aspect__dataset=dataset, aspect__min_value=0, aspect__max_value=3)[0],
        Campaign: world.campaign_a,
        Skip: skip,
        JudgeConfig: config,
        JudgeRun: run,
        KnowledgeCorpus: KnowledgeCorpus.objects.get(dataset=fact_dataset),
        Passage: Passage.objects.filter(corpus__dataset=fact_dataset)[0],
        FactReviewCampaign: review,
        FactAnswer: fact_answer,
    }
    foreign: dict[type, models.Model] = {
        Dataset: other,
        System: System.objects.filter(dataset=other)[0],
        Item: Item.objects.filter(dataset=other)[0],
        Turn: Turn.objects.filter(item__dataset=other)[0],
        Response: Response.objects.filter(turn__item__dataset=other)[0],
        Rater: Rater.objects.filter(dataset=other)[0],
        Aspect: Aspect.objects.filter(dataset=other)[0],
        Campaign: world.campaign_b,
    }
    assert {model for model, _ in _our_admins()} == set(rows), "a new admin needs a row here and a rule above"
    return Tenants(world=world, rows=rows, foreign=foreign)


def _post_value(value: Any) -> Any:
    if value is None or value is False:
        return ""
    if value is True:
        return "on"
    if isinstance(value, models.Model):
        return str(value.pk)
    if isinstance(value, (list, tuple, set)) and all(isinstance(v, models.Model) for v in value):
        return [str(v.pk) for v in value]
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return str(value)


def form_of(row: models.Model) -> dict[str, Any]:
    """The row as its admin form would post it back unchanged."""
    data = {name: _post_value(value) for name, value in model_to_dict(row).items()}
    return {name: value for name, value in data.items() if value != ""}


def bad_bodies(model: type[models.Model], tenants: Tenants, user: User) -> Iterator[tuple[str, dict[str, Any]]]:
    """Bodies the importer (or the service behind the form) would refuse from this user."""
    row = tenants.rows[model]
    base = form_of(row)
    yield "empty required fields", {}
    nul: dict[str, Any] = dict(base)
    for field in model._meta.concrete_fields:
        if not field.editable or field.primary_key:
            continue
        if isinstance(field, models.JSONField):
            nul[field.name] = '"bad\\u0000value"'
        elif isinstance(field, (models.CharField, models.TextField)):
            nul[field.name] = "bad\x00value"
    yield "NUL bytes", nul
    foreign: dict[str, Any] = dict(base)
    for field in [*model._meta.concrete_fields, *model._meta.many_to_many]:
        target = tenants.foreign.get(field.related_model) if field.related_model is not None else None
        if target is not None:
            foreign[field.name] = [str(target.pk)] if field.many_to_many else str(target.pk)
    # A superuser may open a campaign on any dataset, and with every field taken from researcher B's dataset this
    # body is a consistent new campaign there (campaign names are unique per dataset, not site-wide).
    if not (user.is_superuser and model is Campaign):
        yield "rows of another researcher's dataset", foreign
    numbers = dict(base)
    for field in model._meta.concrete_fields:
        if isinstance(field, (models.IntegerField, models.FloatField)) and field.editable and not field.primary_key:
            numbers[field.name] = "-99"
    yield "negative numbers", numbers
    yield from _targeted_bodies(model, tenants, user, base)


def _targeted_bodies(
    model: type[models.Model], tenants: Tenants, user: User, base: dict[str, Any]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The values the finding names, and the ones each kept write must refuse."""
    row = tenants.rows[model]
    if model is Rating:
        yield "raw 99 on a 0-3 aspect", {**base, "raw": "99", "value": "99"}
        rater = tenants.foreign[Rater]
        yield "a rater of another dataset", {**base, "rater": str(rater.pk)}
    if model is Response:
        assert isinstance(row, Response)
        elsewhere = (
            Turn.objects.filter(item__dataset_id=row.system.dataset_id).exclude(item_id=row.turn.item_id).first()
        )
        assert elsewhere is not None
        yield "an answer moved to another item", {**base, "turn": str(elsewhere.pk)}
    if model is Dataset:
        yield "an annotator as a member", {**base, "members": [str(tenants.world.annotator.pk)]}
        yield "an annotator as the owner", {**base, "owner": str(tenants.world.annotator.pk)}
        yield "a name of 201 characters", {**base, "name": "x" * 201}
        # Names are unique per owner (another researcher's names are free to use): the owner's other dataset.
        sibling = Dataset.objects.filter(owner_id=row.owner_id).exclude(pk=row.pk).first()  # type: ignore[attr-defined]
        assert sibling is not None
        yield "the name of another of its owner's datasets", {**base, "name": sibling.name}
    if model is Campaign:
        yield "a zero lease", {**base, "lease_minutes": "0"}
        yield "a researcher in the annotator pool", {**base, "annotators": [str(tenants.world.researcher_b.pk)]}
    if model is GoldItem:
        assert isinstance(row, GoldItem)
        ((system, values),) = row.expected.items()
        ((aspect, _value),) = values.items()
        yield "a value outside the aspect's range", {**base, "expected": json.dumps({system: {aspect: 99}})}
        yield "a system of another dataset", {**base, "expected": json.dumps({"ZQSECRET-sys": {aspect: 1}})}
        yield "an attention check without an instruction", {**base, "kind": "attention", "instruction": ""}
    if model is FactReviewCampaign:
        yield "a zero lease", {**base, "lease_minutes": "0"}
        yield "a researcher in the review pool", {**base, "annotators": [str(tenants.world.researcher_b.pk)]}
    if model is JudgeConfig:
        yield "a config with a NUL in its name", {"config_json": json.dumps({**METRIC_CONFIG, "name": "a\x00b"})}
        yield "an unknown method", {"config_json": json.dumps({**METRIC_CONFIG, "method": "astrology"})}
        yield "not JSON", {"config_json": "{not json"}
    if model is KnowledgeCorpus:
        corpus_base = {"dataset": str(tenants.rows[Dataset].pk), "name": "bad corpus", "passage_tokens": "64"}
        yield (
            "a corpus file with a NUL",
            {**corpus_base, "file": _upload(b'{"id": "a", "title": "t", "text": "x\\u0000"}\n')},
        )
        yield "a corpus that is not JSON", {**corpus_base, "file": _upload(b"{not json\n")}
        if not user.is_superuser:  # who sees every dataset may give any of them a corpus
            foreign = {**corpus_base, "dataset": str(tenants.foreign[Dataset].pk)}
            yield (
                "a corpus for another dataset",
                {**foreign, "file": _upload(b'{"id": "a", "title": "t", "text": "x"}\n')},
            )


def _upload(content: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile("corpus.jsonl", content)


def _url(model: type[models.Model], view: str, *args: Any) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _client(user: User) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def _refused(status: int, body: bytes) -> bool:
    """403 (no permission), 302 (sent elsewhere), 405, the form again with its errors (200 or 400), or the request
    hygiene check's 400 that names the field carrying a NUL or a lone surrogate before any view runs."""
    if status == 400 and body.startswith((b"Null characters are not allowed", b"Surrogate characters are not allowed")):
        return b"(field: " in body
    if status in (302, 403, 404, 405):
        return True
    return status in (200, 400) and (b"errornote" in body or b"errorlist" in body)


@pytest.mark.parametrize("role", ["researcher", "superuser"])
def test_no_admin_page_stores_a_value_the_importer_would_refuse(tenants: Tenants, role: str) -> None:
    user = tenants.world.researcher if role == "researcher" else tenants.world.superuser
    client = _client(user)
    problems: list[str] = []
    before = snapshot()

    def check(what: str, response: Any, *, refused: bool = True) -> None:
        status, body = response.status_code, response.content
        if status >= 500:
            problems.append(f"{what}: {status}")
        elif refused and not _refused(status, body):
            problems.append(f"{what}: {status} without an error")
        if snapshot() != before:
            changed = [label for label, rows in snapshot().items() if rows != before[label]]
            problems.append(f"{what}: changed {', '.join(changed)}")
            before.update(snapshot())

    for model, model_admin in _our_admins():
        name = model._meta.label
        row = tenants.rows[model]
        changelist = client.get(_url(model, "changelist"))
        assert changelist.status_code == 200, name
        add = _url(model, "add")
        response = client.get(add)
        if model in ADDS:
            assert response.status_code == 200, name
        elif model is Dataset:
            assert response.status_code == 302 and response["Location"] == reverse("admin:annotations_dataset_import")
        else:
            assert response.status_code == 403, (name, response.status_code)
        for label, body in bad_bodies(model, tenants, user):
            check(f"POST {add} ({label})", client.post(add, body))
        change = _url(model, "change", row.pk)
        page = client.get(change)
        assert page.status_code == 200, (name, page.status_code)
        if model not in CHANGES:
            assert b'name="_save"' not in page.content, f"{name} offers a save button"
        for label, body in bad_bodies(model, tenants, user):
            check(f"POST {change} ({label})", client.post(change, body))
        if not model_admin.has_delete_permission(_request(user), row):
            delete = _url(model, "delete", row.pk)
            assert client.get(delete).status_code == 403, name
            check(f"POST {delete}", client.post(delete, {"post": "yes"}))
            selected = {"action": "delete_selected", "_selected_action": [str(row.pk)], "post": "yes"}
            check(f"delete_selected on {name}", client.post(_url(model, "changelist"), selected), refused=False)
    assert problems == [], "\n".join(problems)


def _request(user: User) -> Any:
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/")
    request.user = user
    return request


def test_judge_scores_and_judgments_have_no_admin() -> None:
    assert JudgeScore not in admin.site._registry and Judgment not in admin.site._registry


def test_imported_rows_are_read_only_for_everyone(tenants: Tenants) -> None:
    for user in (tenants.world.researcher, tenants.world.superuser):
        request = _request(user)
        for model in (System, Item, Turn, Response, Rater, Rating, Skip, Passage, FactAnswer):
            model_admin = admin.site._registry[model]
            row = tenants.rows[model]
            assert model_admin.has_view_permission(request, row)
            assert not model_admin.has_add_permission(request)
            assert not model_admin.has_change_permission(request, row)
            assert not model_admin.has_delete_permission(request, row)


def test_the_owner_renames_and_shares_a_dataset(tenants: Tenants) -> None:
    world = tenants.world
    dataset = world.dataset_a
    client = _client(world.researcher)
    url = reverse("admin:annotations_dataset_change", args=[dataset.pk])
    # Only researchers of the owner's pool are offered as members: another researcher once an operator puts them
    # in a group together, never annotators or the outsider.
    assert str(world.researcher_b.pk) not in offered(client.get(url).content.decode(), "members")
    Group.objects.create(name="lab").user_set.add(world.researcher, world.researcher_b)
    page = client.get(url).content.decode()
    assert str(world.researcher_b.pk) in offered(page, "members")
    for user in (world.annotator, world.annotator_b, world.outsider):
        assert str(user.pk) not in offered(page, "members")
    assert "factuality" in page or dataset.aspects.first().name in page  # type: ignore[union-attr]
    response = client.post(url, {"name": "renamed", "members": [str(world.researcher_b.pk)]})
    assert response.status_code == 302, response.content.decode()[:2000]
    dataset.refresh_from_db()
    assert dataset.name == "renamed" and list(dataset.members.all()) == [world.researcher_b]
    assert dataset.owner == world.researcher  # the owner field is not the researcher's to change


def test_a_researcher_it_is_shared_with_only_reads_it(tenants: Tenants) -> None:
    world = tenants.world
    dataset = world.dataset_a
    dataset.members.add(world.researcher_b)
    client = _client(world.researcher_b)
    before = snapshot()
    url = reverse("admin:annotations_dataset_change", args=[dataset.pk])
    assert client.get(url).status_code == 200
    assert client.post(url, {"name": "taken over"}).status_code == 403
    assert (
        client.post(reverse("admin:annotations_dataset_delete", args=[dataset.pk]), {"post": "yes"}).status_code == 403
    )
    assert snapshot() == before


def test_the_owner_deletes_a_dataset_with_everything_under_it(tenants: Tenants) -> None:
    world = tenants.world
    dataset = world.dataset_a
    other_ratings = Rating.objects.filter(aspect__dataset=world.dataset_b).count()
    client = _client(world.researcher)
    url = reverse("admin:annotations_dataset_delete", args=[dataset.pk])
    confirm = client.get(url)
    assert confirm.status_code == 200 and b"Yes, I\xe2\x80\x99m sure" in confirm.content
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert not Dataset.objects.filter(pk=dataset.pk).exists()
    assert not Rating.objects.filter(aspect__dataset_id=dataset.pk).exists()
    assert not Item.objects.filter(dataset_id=dataset.pk).exists()
    assert Rating.objects.filter(aspect__dataset=world.dataset_b).count() == other_ratings


def test_campaign_settings_change_through_the_service(tenants: Tenants) -> None:
    world = tenants.world
    campaign = world.campaign_a
    client = _client(world.researcher)
    url = reverse("admin:annotations_campaign_change", args=[campaign.pk])
    page = client.get(url).content.decode()
    # The pool offers the researcher's own annotator accounts (B's annotator only once an operator groups them
    # with A), never researchers or the superuser.
    assert str(world.annotator.pk) in offered(page, "annotators")
    assert str(world.annotator_b.pk) not in offered(page, "annotators")
    Group.objects.create(name="lab").user_set.add(world.researcher, world.annotator_b)
    page = client.get(url).content.decode()
    assert str(world.annotator_b.pk) in offered(page, "annotators")
    for user in (world.researcher, world.researcher_b, world.superuser):
        assert str(user.pk) not in offered(page, "annotators")
    body = {**form_of(campaign), "guidelines": "Read twice.", "lease_minutes": "45"}
    response = client.post(url, body)
    assert response.status_code == 302, response.content.decode()[:2000]
    campaign.refresh_from_db()
    assert campaign.guidelines == "Read twice." and campaign.lease_minutes == 45


def test_a_judge_config_edit_is_validated_and_stored_as_a_new_version(tenants: Tenants) -> None:
    config = tenants.rows[JudgeConfig]
    client = _client(tenants.world.researcher)
    url = reverse("admin:judging_judgeconfig_change", args=[config.pk])
    response = client.post(url, {"config_json": json.dumps({**METRIC_CONFIG, "metric": "bleu"})})
    assert response.status_code == 302, response.content.decode()[:2000]
    versions = JudgeConfig.objects.filter(name=METRIC_CONFIG["name"]).order_by("version")
    assert [v.config["metric"] for v in versions] == ["length", "bleu"]


def test_a_bad_corpus_upload_stores_nothing(tenants: Tenants) -> None:
    before = KnowledgeCorpus.objects.count(), Passage.objects.count()
    client = _client(tenants.world.researcher)
    response = client.post(
        reverse("admin:judging_knowledgecorpus_add"),
        {"dataset": str(tenants.rows[Dataset].pk), "name": "nul", "passage_tokens": "64", "file": _upload(b"\x00\n")},
    )
    assert response.status_code in (200, 400)
    assert (KnowledgeCorpus.objects.count(), Passage.objects.count()) == before


def test_review_campaign_settings_change_through_the_service(tenants: Tenants) -> None:
    review = tenants.rows[FactReviewCampaign]
    assert isinstance(review, FactReviewCampaign)
    client = _client(tenants.world.researcher)
    url = reverse("admin:judging_factreviewcampaign_change", args=[review.pk])
    page = client.get(url).content.decode()
    pool = offered(page, "annotators")
    assert str(tenants.world.annotator.pk) in pool
    assert str(tenants.world.annotator_b.pk) not in pool  # in researcher B's pool only
    assert str(tenants.world.researcher_b.pk) not in pool
    body = {**form_of(review), "guidelines": "Check dates.", "lease_minutes": "20"}
    response = client.post(url, body)
    assert response.status_code == 302, response.content.decode()[:2000]
    review.refresh_from_db()
    assert review.guidelines == "Check dates." and review.lease_minutes == 20
