"""A small two-tenant world for sweeps: two researchers with one dataset and one campaign each, annotators in the
pools, an outsider, a superuser. Optional features (judge runs, FActScore) are added when their modules exist.

    world = build_world(researcher=..., annotators=[...], outsider=...)
    world.params_a  # URL parameter values that point into tenant A
"""

import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from django.contrib.auth.models import User
from django.utils import timezone

from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.setup import campaign_create
from annotations.datasets.importing import dataset_import
from annotations.models import Dataset, Response
from annotations.recruitment.models import Platform
from annotations.recruitment.services import crowd_session_complete, crowd_worker_join, link_create
from annotations.text.opaque import opaque_ref
from tests.conftest import CAST_PASSWORD

SAMPLE = Path(__file__).resolve().parents[2] / "annotations" / "sample_data" / "llm_jp_sample.jsonl"


@dataclass
class Cast:
    """The people of a world: two researchers, each owning one tenant, an annotator in tenant A's pool and one in
    tenant B's only, an outsider and a superuser. The sweeps sign in as `role_names`, and as no one."""

    researcher: User
    researcher_b: User
    annotator: User
    annotator_b: User
    outsider: User
    superuser: User
    role_names: ClassVar[tuple[str, ...]] = (
        "annotator",
        "annotator_b",
        "outsider",
        "researcher",
        "researcher_b",
        "superuser",
    )

    @property
    def roles(self) -> dict[str, User | None]:
        return {"anonymous": None, **{name: getattr(self, name) for name in self.role_names}}


@dataclass
class World(Cast):
    """The annotator holds a lease in campaign A."""

    dataset_a: Dataset
    dataset_b: Dataset
    campaign_a: Any = None
    campaign_b: Any = None
    task_a: Any = None
    task_b: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    role_names: ClassVar[tuple[str, ...]] = ("annotator", "researcher", "outsider", "superuser")

    def _params(self, side: str) -> dict[str, str]:
        """URL parameters naming side a's or side b's dataset, campaign and task, and that side's extras."""
        dataset, campaign, task = (getattr(self, f"{name}_{side}") for name in ("dataset", "campaign", "task"))
        values = {"pk": str(dataset.pk), "dataset_id": str(dataset.pk)}
        if campaign is not None:
            values["campaign_id"] = str(campaign.pk)
        if task is not None:
            values["task_id"] = opaque_ref("task", task.pk)
        values.update({k: str(v) for k, v in self.extra.get(f"params_{side}", {}).items()})
        return values

    @property
    def params_a(self) -> dict[str, str]:
        return self._params("a")

    @property
    def params_b(self) -> dict[str, str]:
        return self._params("b")


def _user(username: str, **flags: bool) -> User:
    return User.objects.create_user(
        username=username, password=CAST_PASSWORD, email=f"{username}@example.test", **flags
    )


def _cast(*, researcher: User, annotator: User, annotator_b: User, outsider: User) -> dict[str, User]:
    """The `Cast` by its fields' names: the people given, and the two only the worlds have, researcher B and a
    superuser."""
    return {
        "researcher": researcher,
        "researcher_b": _user("researcher_b", is_staff=True),
        "annotator": annotator,
        "annotator_b": annotator_b,
        "outsider": outsider,
        "superuser": _user("root", is_staff=True, is_superuser=True),
    }


def build_world(
    *,
    researcher: User,
    annotator: User,
    annotator_b: User,
    outsider: User,
    dataset_a_bytes: bytes | None = None,
    dataset_a_rubric: Any = None,
) -> World:
    cast = _cast(researcher=researcher, annotator=annotator, annotator_b=annotator_b, outsider=outsider)
    researcher_b = cast["researcher_b"]
    data_a = dataset_a_bytes if dataset_a_bytes is not None else SAMPLE.read_bytes()
    preset = None if dataset_a_rubric is not None else "llm-human-eval-jp"
    dataset_a = dataset_import(
        stream=io.BytesIO(data_a), name="tenant-a", preset=preset, rubric=dataset_a_rubric, owner=researcher
    ).dataset
    dataset_b = dataset_import(
        stream=io.BytesIO(SAMPLE.read_bytes()), name="tenant-b", preset="llm-human-eval-jp", owner=researcher_b
    ).dataset
    world = World(**cast, dataset_a=dataset_a, dataset_b=dataset_b)
    world.campaign_a = campaign_create(
        name="campaign-a", dataset=dataset_a, raters_per_item=2, annotators=[annotator], created_by=researcher
    )
    world.campaign_b = campaign_create(
        name="campaign-b", dataset=dataset_b, raters_per_item=2, annotators=[annotator_b], created_by=researcher_b
    )
    claimed_a = assignment_claim(campaign=world.campaign_a, user=annotator)
    claimed_b = assignment_claim(campaign=world.campaign_b, user=annotator_b)
    world.task_a = claimed_a.task if claimed_a else None
    world.task_b = claimed_b.task if claimed_b else None
    return world


# --- the full world: every feature, tenant A full of hostile data ------------------------------------------------

TENANT_PATHS = [
    "dataset",
    "item__dataset",
    "turn__item__dataset",
    "system__dataset",
    "aspect__dataset",
    "response__turn__item__dataset",
    "run__dataset",
    "judge__dataset",
    "campaign__dataset",
    "task__campaign__dataset",
    "corpus__dataset",
    "answer__run__dataset",
    "campaign__run__dataset",
    "task__campaign__run__dataset",
    "assignment__campaign__run__dataset",
    "fact__answer__run__dataset",
]


@dataclass
class FullWorld(Cast):
    """Researcher A also owns fact dataset A and the runs on A; the annotator is in campaign A's pool and fact review
    A's pool, with leases in both."""

    dataset: Dataset  # A: the hostile dataset
    dataset_b: Dataset
    fact_dataset: Dataset
    campaign: Any
    task: Any
    campaign_b: Any  # on dataset B, whose system keys, model names, raters, judges and a co-rater's rationale
    task_b: Any  # all contain SECRET: annotators must never see it
    run: Any  # judge run on A whose provider output carries the corpus
    run_b: Any
    fact_run: Any
    fact_answer: Any
    review_campaign: Any
    review_task: Any
    secrets: dict[str, list[str]] = field(default_factory=dict)  # names annotators must never see
    worker: Any = None  # came through campaign A's study link and finished their session
    link: Any = None  # campaign A's study link
    link_b: Any = None
    dispute: Any = None  # an open dispute over campaign A's task
    dispute_b: Any = None

    def params_for(self, route: str) -> dict[str, str]:
        """URL parameter values that point into tenant A, by what the route is about."""
        values: dict[str, str] = {"table": "agreement", "fmt": "csv", "slug": "cli", "kind": "jsonl"}
        if "judges/tables" in route:
            values["table"] = "levels"
        if "rankings/tables" in route:
            values["table"] = "ranking-humans"
        if route.startswith("factscore/review/"):
            values["campaign_id"] = str(self.review_campaign.pk)
            values["task_id"] = str(self.review_task.pk)
        else:
            values["campaign_id"] = str(self.campaign.pk)
            values["task_id"] = opaque_ref("task", self.task.pk)
        if "judging/runs/" in route or "judgerun/" in route:
            values["pk"] = str(self.run.pk)
        else:
            values["pk"] = str(self.dataset.pk)
        values["run_id"] = str(self.fact_run.pk)
        values["answer_id"] = str(self.fact_answer.pk)
        values["dataset_id"] = str(self.fact_dataset.pk if route.startswith("factscore/") else self.dataset.pk)
        values.update(_tenant_params(self.dataset, self.link, self.dispute))
        return values

    def params_for_b(self, route: str) -> dict[str, str]:
        """The same, pointing into tenant B where B has such an object (FActScore objects exist in A only)."""
        values = self.params_for(route)
        if not route.startswith("factscore/"):
            values["campaign_id"] = str(self.campaign_b.pk)
            values["task_id"] = opaque_ref("task", self.task_b.pk)
            values["dataset_id"] = str(self.dataset_b.pk)
            values.update(_tenant_params(self.dataset_b, self.link_b, self.dispute_b))
            values["pk"] = str(
                self.run_b.pk if ("judging/runs/" in route or "judgerun/" in route) else self.dataset_b.pk
            )
        return values

    def query_for(self, route: str) -> dict[str, str]:
        if route.startswith("dashboard/") and "judges" in route:
            return {"judge": self.run.name}
        return {}

    def admin_object_id(self, model: Any) -> str | None:
        """The id of a tenant-A row of an admin model, or any row for models without a tenant."""
        from django.core.exceptions import FieldError

        manager = model._default_manager
        for path in TENANT_PATHS:
            for dataset in (self.dataset, self.fact_dataset):
                try:
                    row = manager.filter(**{path: dataset}).order_by("pk").first()
                except (FieldError, ValueError, TypeError):
                    break
                if row is not None:
                    return str(row.pk)
        if model is Dataset:
            return str(self.dataset.pk)
        row = manager.order_by("pk").first()
        return str(row.pk) if row else None


def _tenant_params(dataset: Dataset, link: Any, dispute: Any) -> dict[str, str]:
    """URL parameter values for a tenant's rater, item, study link and dispute, the last two where the tenant has
    them."""
    values = {"rater_id": _first_rater_id(dataset), "item_id": _first_item_id(dataset)}
    if link is not None:
        values |= {"token": link.token, "platform": link.platform}
    if dispute is not None:
        values["dispute_id"] = str(dispute.pk)
    return values


def _first_rater_id(dataset: Dataset) -> str:
    from annotations.models import Rater

    rater = Rater.objects.filter(dataset=dataset).order_by("pk").first()
    assert rater is not None, f"the world's dataset {dataset.pk} has no rater"
    return str(rater.pk)


SECRET = "ZQSECRET"


def _secret_dataset(*, owner: User) -> Dataset:
    """Tenant B: the sample with every name an annotator must not see marked with SECRET."""
    from annotations.rubrics.specs import PRESETS, parse_rubric

    text = SAMPLE.read_text(encoding="utf-8")
    text = text.replace('"sys_', f'"{SECRET}-sys-').replace("synth-rater-", f"{SECRET}-rater-")
    text = text.replace("demo-judge", f"{SECRET}-judge")
    keys = sorted({key for key in re.findall(rf'"({SECRET}-sys-[a-z])"', text)})
    rubric = parse_rubric(
        {**PRESETS["llm-human-eval-jp"], "systems": {key: f"{SECRET}-model/{key}" for key in keys}}, source="file"
    )
    return dataset_import(stream=io.BytesIO(text.encode()), name="tenant-b", rubric=rubric, owner=owner).dataset


def _submit_secret_rating(campaign: Any, user: User) -> None:
    """A co-rater in campaign B submits a rating whose rationale carries SECRET."""
    from annotations.campaigns.answers import TaskAnswer
    from annotations.campaigns.claims import assignment_claim
    from annotations.campaigns.submissions import submission_create
    from annotations.campaigns.tasks import task_candidates
    from annotations.rubrics.task_sheet import campaign_scales

    assignment = assignment_claim(campaign=campaign, user=user)
    assert assignment is not None
    candidates = task_candidates(assignment=assignment, user_id=user.pk)
    scales = campaign_scales(campaign)
    answer = TaskAnswer(
        ratings={(c.number, s.index): 3.0 for c in candidates for s in scales},
        preference=candidates[0].number,
        rationale=f"{SECRET}-rationale of another rater",
        comment=f"{SECRET}-comment of another rater",
    )
    submission_create(
        campaign=campaign, task_id=assignment.task_id, user=user, idempotency_key="secret-submit-1", answer=answer
    )


def build_full_world(
    *,
    researcher: User,
    annotator: User,
    annotator_b: User,
    outsider: User,
    provider: Any,
    fact_provider: Any,
    capture: Any,
) -> FullWorld:
    """Needs Celery eager, `provider` (tests/security/recorder.RecordingServer, allowlisted) and `fact_provider`
    (tests/factscore/fakeworld.FactWorldProvider scripted with script_world), and django_capture_on_commit_callbacks
    as `capture`."""
    from annotations.campaigns.claims import assignment_claim
    from annotations.campaigns.setup import campaign_create
    from judging import services as engine
    from judging.factscore import services as fact_services
    from judging.factscore.models import FactAnswer
    from tests.factscore.factories import factscore_config, make_fact_dataset
    from tests.security.hostile import (
        CORPUS,
        MARKDOWN_PAYLOADS,
        MARKUP_PAYLOADS,
        NAME_CORPUS,
        hostile_judge_output,
        import_hostile_dataset,
    )

    cast = _cast(researcher=researcher, annotator=annotator, annotator_b=annotator_b, outsider=outsider)
    researcher_b = cast["researcher_b"]
    # Researchers work in the admin, so an operator gives them the model permissions of our apps; scoping must
    # hold with every permission granted, not only because the admin refuses permission-less staff.
    from django.contrib.auth.models import Permission

    ours = Permission.objects.filter(content_type__app_label__in=["annotations", "judging"])
    researcher.user_permissions.add(*ours)
    researcher_b.user_permissions.add(*ours)
    dataset = import_hostile_dataset(name="hostile " + MARKUP_PAYLOADS[1][:150], owner=researcher).dataset
    dataset_b = _secret_dataset(owner=researcher_b)
    guidelines = "\n\n".join(MARKDOWN_PAYLOADS + MARKUP_PAYLOADS[:5])
    campaign = campaign_create(
        name="campaign " + MARKUP_PAYLOADS[0][:150],
        dataset=dataset,
        raters_per_item=2,
        annotators=[annotator],
        created_by=researcher,
        guidelines=guidelines,
        show_reference=True,
        show_context=True,
    )
    annotator_c = _user("annotator_c")
    campaign_b = campaign_create(
        name="campaign-b",
        dataset=dataset_b,
        raters_per_item=2,
        annotators=[annotator_b, annotator_c],
        created_by=researcher_b,
    )
    lease = assignment_claim(campaign=campaign, user=annotator)
    assert lease is not None
    _submit_secret_rating(campaign_b, annotator_c)
    lease_b = assignment_claim(campaign=campaign_b, user=annotator_b)
    assert lease_b is not None

    provider.content = hostile_judge_output("\n".join(CORPUS[:20]), score=3)
    config = {
        "name": "judge " + MARKUP_PAYLOADS[4][:100],
        "method": "single",
        "model": "openai/gpt-4o-mini",
        "api_base": provider.base_url,
        "aspects": [NAME_CORPUS[0]],
        "max_retries": 0,
        "timeout_s": 5,
        "cache": False,
    }
    with capture(execute=True):
        run = engine.judge_run_launch(dataset=dataset, config=config, launched_by=researcher, limit=12)
    with capture(execute=True):
        run_b = engine.judge_run_launch(
            dataset=dataset_b,
            config={**config, "name": f"{SECRET}-run-b", "aspects": None},
            launched_by=researcher_b,
            limit=4,
        )
    run.refresh_from_db()
    run_b.refresh_from_db()

    fact_dataset = make_fact_dataset(owner=researcher)
    with capture(execute=True):
        fact_run = engine.judge_run_launch(
            dataset=fact_dataset, config=factscore_config(fact_provider), launched_by=researcher
        )
    fact_run.refresh_from_db()
    review_campaign = fact_services.fact_review_campaign_create(
        name="review " + MARKUP_PAYLOADS[0][:100], run=fact_run, raters_per_answer=2, annotators=[annotator]
    )
    review_lease = fact_services.fact_review_claim(campaign=review_campaign, user=annotator)
    assert review_lease is not None

    secrets = {
        "system keys": list(dataset.systems.values_list("key", flat=True)),
        "model names": [name for name in dataset.systems.values_list("model_name", flat=True) if name],
        "judge names": list(dataset.judges.values_list("name", flat=True)),
        "rater ids": list(dataset.raters.values_list("external_id", flat=True).exclude(external_id=None)),
    }
    link = link_create(campaign=campaign, platform=Platform.PROLIFIC, created_by=researcher, completion_code="OK")
    link_b = link_create(campaign=campaign_b, platform=Platform.INVITE, created_by=researcher_b)
    worker_session = crowd_worker_join(link=link, platform_worker_id="matrix-worker-canary", session_key="s-1")
    crowd_session_complete(session=worker_session)
    from annotations.models import Dispute

    dispute = Dispute.objects.create(task=lease.task, campaign=campaign, found_at=timezone.now())
    dispute_b = Dispute.objects.create(task=lease_b.task, campaign=campaign_b, found_at=timezone.now())
    return FullWorld(
        dispute=dispute,
        dispute_b=dispute_b,
        worker=worker_session.worker.user,
        link=link,
        link_b=link_b,
        **cast,
        dataset=dataset,
        dataset_b=dataset_b,
        fact_dataset=fact_dataset,
        campaign=campaign,
        task=lease.task,
        campaign_b=campaign_b,
        task_b=lease_b.task,
        run=run,
        run_b=run_b,
        fact_run=fact_run,
        fact_answer=FactAnswer.objects.filter(run=fact_run).order_by("pk").first(),
        review_campaign=review_campaign,
        review_task=review_lease.task,
        secrets=secrets,
    )


@dataclass
class OldWork:
    """What a database holds after lost tasks and before projection on write: see age_full_world."""

    stalled: Any  # tests.judging.stalled.StalledRuns on dataset A
    unprojected_run: Any  # a finished FActScore run on the fact dataset with judgments and no facts at all
    targets: list[tuple[str, dict[str, str]]]  # GETs that show these runs, beyond the URL walk's own ids


def age_full_world(world: FullWorld, *, capture: Any, fact_provider: Any) -> OldWork:
    """Add to a full world what only reads must leave alone: runs whose task was lost (a unit claimed with an expired
    lease, pending units with no task in flight, a queued run never started), a finished FActScore run whose judgments
    were never projected, and the world's own FActScore run with judgments newer than its facts (both as a database
    from before projection on write holds them)."""
    from django.urls import reverse
    from django.utils import timezone

    from judging import services as engine
    from judging.factscore.models import FactAnswer
    from judging.models import JudgeRun, Judgment
    from tests.factscore.factories import factscore_config
    from tests.judging.stalled import make_stalled_runs

    responses = list(Response.objects.filter(turn__item__dataset=world.dataset).order_by("pk")[:2])
    stalled = make_stalled_runs(world.dataset, responses)
    with capture(execute=True):
        unprojected = engine.judge_run_launch(
            dataset=world.fact_dataset, config=factscore_config(fact_provider), launched_by=world.researcher
        )
    FactAnswer.objects.filter(run=unprojected).delete()
    JudgeRun.objects.filter(method="factscore").update(results_projected_at=None)
    Judgment.objects.filter(run=world.fact_run).update(finished_at=timezone.now())
    unprojected.refresh_from_db()
    fact_dashboard = reverse("dashboard-judges", args=[world.fact_dataset.pk])
    targets: list[tuple[str, dict[str, str]]] = [
        (reverse("admin:judging_judgerun_change", args=[stalled.running.pk]), {}),
        (reverse("admin:judging_judgerun_change", args=[stalled.queued.pk]), {}),
        (reverse("admin:judging_judgerun_change", args=[unprojected.pk]), {}),
        (reverse("factscore:report", args=[unprojected.pk]), {}),
        (reverse("factscore:api-report", args=[unprojected.pk]), {"answers": "1"}),
        (fact_dashboard, {"judge": unprojected.judge.name}),
        (fact_dashboard, {"judge": world.fact_run.judge.name}),
    ]
    for run in (unprojected, world.fact_run):
        for table in ("factscore-systems", "factscore-estimator"):
            path = reverse("dashboard-judge-table", args=[world.fact_dataset.pk, table, "csv"])
            targets.append((path, {"judge": run.judge.name}))
    return OldWork(stalled=stalled, unprojected_run=unprojected, targets=targets)


def _first_item_id(dataset: Dataset) -> str:
    from annotations.models import Item

    item = Item.objects.filter(dataset=dataset).order_by("pk").first()
    assert item is not None, f"the world's dataset {dataset.pk} has no item"
    return str(item.pk)
