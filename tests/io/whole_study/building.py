"""The one function that builds the whole study (its design in design.py), step by step, and what it made."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.test import override_settings
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.adjudication.models import Dispute
from annotations.adjudication.services import adjudication_rule_set, dispute_resolve
from annotations.campaigns.setup import campaign_create
from annotations.models import Campaign, Dataset, HumanSampling, Rater, RaterExclusion, Response, StopRule
from annotations.quality.services import rater_exclude
from judging import services as judging_services
from judging.certification.certificates import certificate_request
from judging.certification.reference_sets import reference_set_create
from judging.hybrid import services as hybrid
from judging.models import (
    Certificate,
    CertificateStatus,
    HybridApplyStatus,
    HybridCalibration,
    JudgeRun,
    JudgeScore,
    Judgment,
    JudgmentStatus,
    RunStatus,
)
from tests.conftest import (
    CAST_PASSWORD,
    WorkerProcess,
    _empty_broker,
    wait_for,
)
from tests.fakeprovider import FakeProvider
from tests.io.whole_study.design import (
    ACTIVE_ANNOTATOR,
    ANNOTATORS,
    ASPECT,
    CAMPAIGN,
    EXCLUDED,
    EXCLUSION_REASON,
    HUMAN_SHARE,
    HYBRID_CAMPAIGN,
    JUDGE,
    MAPPED_NAME,
    NAME,
    RATIONALE,
    REGULAR_ITEMS,
    RUBRIC,
    SETTLED_ITEM,
    SPAN_JUDGE,
    SPANS,
    STATED,
    STOP_SYSTEM,
    STOP_WIDTH,
    STOPPING_ANNOTATOR,
    STOPPING_CAMPAIGN,
    SYSTEMS,
    WORKER_ENV,
    annotator_value,
    span_judge_reply,
    span_token,
    study_lines,
    summeval_lines,
    truth,
)
from tests.judging.certification_data import SNAPSHOT
from tests.judging.hybrid_data import judge_config, sampling_and_stopping_set, script_judge
from tests.judging.span_judge_data import span_judge_config


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


def command(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@dataclass
class Study:
    """What the build made, for the seams to read; the judge's part is filled in by its step."""

    researcher: User
    adjudicator: User
    annotators: dict[str, User]
    dataset: Dataset
    mapped: Dataset
    campaign: Campaign
    exclusion: RaterExclusion
    excluded_pseudonym: str
    settled: Dispute
    tasks_rated: dict[str, int]
    work: Path
    run: JudgeRun = field(init=False)
    run_units: int = 0
    # The run's scores in the database the moment it first read as succeeded (see ScoreWritesHeld).
    scores_when_succeeded: int = -1
    certificate: Certificate = field(init=False)
    hybrid_campaign: Campaign = field(init=False)
    calibration: HybridCalibration = field(init=False)
    active_rated: int = 0  # hybrid tasks the fourth annotator rated: every one drawn for humans
    span_run: JudgeRun = field(init=False)
    # The span run's done judgments with their spans, and its scores, the moment it first read as succeeded.
    span_when_succeeded: tuple[int, int] = (-1, -1)
    stopping_campaign: Campaign = field(init=False)
    stopping_rated: int = 0  # tasks the fifth annotator rated before the campaign stopped
    stop_checks: list[str] = field(default_factory=list)  # what each check after an answer said

    @property
    def later_ratings(self) -> int:
        """The fourth and fifth annotators' ratings of the scale aspect (one answer per task, none on gold)."""
        return self.active_rated + self.stopping_rated


def api_client(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def rate_every_task(user: User, campaign: Campaign, *, after_each: Callable[[], object] | None = None) -> int:
    """Rates, through the annotator API, every task the campaign hands this annotator, reading
    each candidate's system, item and stated quality from its text and marking its error spans where the campaign
    asks for them; prefers the answer it rates highest where asked. Returns the tasks rated."""
    client = api_client(user)
    asked = set(campaign.aspects.values_list("name", flat=True))
    rated = 0
    while True:
        claimed = client.post(reverse("api-annotate-next", args=[campaign.pk]))
        if claimed.status_code == 204:
            return rated
        assert claimed.status_code == 200, claimed.content
        task = claimed.json()
        ratings: dict[str, dict[str, Any]] = {}
        values = {}
        for candidate in task["candidates"]:
            system, i, _stated = STATED.match(candidate["text"]).groups()  # type: ignore[union-attr]
            values[candidate["number"]] = annotator_value(user.username, int(i), SYSTEMS.index(system))
            ratings[str(candidate["number"])] = {ASPECT: values[candidate["number"]]}
            if SPANS in asked:
                ratings[str(candidate["number"])][SPANS] = json.dumps(span_token(user.username, candidate["text"]))
        body: dict[str, Any] = {"idempotency_key": f"{user.username}-{rated}", "ratings": ratings}
        if campaign.ask_preference:
            body["preference"] = max(values, key=lambda number: (values[number], -number))
            body["rationale"] = RATIONALE
        submitted = client.post(reverse("api-annotate-submit", args=[campaign.pk, task["task"]]), body, format="json")
        assert submitted.status_code == 201, submitted.content
        rated += 1
        assert rated <= len(SYSTEMS) * (REGULAR_ITEMS + 1), "the campaign kept handing out tasks"
        if after_each is not None:
            after_each()
    return rated


ACTIVE = (RunStatus.QUEUED, RunStatus.RUNNING)


def _run_status(run: JudgeRun) -> str:
    run.refresh_from_db(fields=["status"])
    return str(run.status)


def _run_versioned(run: JudgeRun) -> bool:
    run.refresh_from_db()
    return run.version_id is not None or bool(run.version_problem)


def wait_for_run(run: JudgeRun) -> JudgeRun:
    wait_for(lambda: _run_status(run) not in ACTIVE, timeout=240, message=str(run))
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, (run.status, run.notes)
    return run


class ScoreWritesHeld:
    """On Postgres, a second connection holds a SHARE lock on the judge score table: every read goes on, every
    write of a score waits. That holds still the moment a run ends, so a test can see, without racing the worker,
    whether the run reads as ended before its scores are written. SQLite cannot lock one table: there this does
    nothing."""

    def __init__(self) -> None:
        self.connection: Any = None

    def __enter__(self) -> ScoreWritesHeld:
        if connection.vendor == "postgresql":
            self.connection = connections.create_connection(DEFAULT_DB_ALIAS)
            self.connection.ensure_connection()
            self.connection.set_autocommit(False)
            with self.connection.cursor() as cursor:
                cursor.execute(f"LOCK TABLE {JudgeScore._meta.db_table} IN SHARE MODE")
        return self

    def someone_waits(self) -> bool:
        if self.connection is None:
            return False
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE relation = %s::regclass AND NOT granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                [JudgeScore._meta.db_table],
            )
            return bool(cursor.fetchone()[0])

    def release(self) -> None:
        if self.connection is not None:
            self.connection.commit()
            self.connection.close()
            self.connection = None

    def __exit__(self, *exc: object) -> None:
        self.release()


def stored_scores(run: JudgeRun) -> int:
    return JudgeScore.objects.filter(judge=run.judge).count()


def first_look_at_the_end(
    run: JudgeRun, held: ScoreWritesHeld, stored: Callable[[JudgeRun], Any] = stored_scores
) -> Any:
    """What the run has stored (its scores, or what `stored` reads) at the first moment it reads as succeeded: waits
    until the run has ended or a score write waits on the held lock. A run that ends in one transaction with its
    scores is still running while its write waits; one that reports success first has already committed it."""
    wait_for(lambda: _run_status(run) not in ACTIVE or held.someone_waits(), timeout=240, message=str(run))
    if _run_status(run) == RunStatus.SUCCEEDED:
        found = stored(run)
        held.release()
        return found
    held.release()
    wait_for_run(run)
    return stored(run)


def stored_spans_and_scores(run: JudgeRun) -> tuple[int, int]:
    """The run's done judgments that hold their spans, and its scores."""
    done = Judgment.objects.filter(run=run, status=JudgmentStatus.DONE, spans__isnull=False, score__isnull=False)
    return done.count(), stored_scores(run)


def build_study(work: Path) -> Study:
    """Builds the study through the product's own entry points, committed (a Celery worker reads it)."""
    with judge_backend() as fake:  # started first: the worker gets ready while the annotators rate
        return _build(work, fake)


@contextmanager
def judge_backend() -> Iterator[FakeProvider]:
    """The fake provider on a real socket, scripted as the study's judge, and a real Celery worker."""
    fake = FakeProvider().start()
    worker = None
    try:
        script_judge(fake)
        _empty_broker(settings.CELERY_BROKER_URL)
        worker = WorkerProcess(settings.CELERY_BROKER_URL, WORKER_ENV).start()
        yield fake
    finally:
        if worker is not None:
            worker.stop()
        fake.stop()


def _build(work: Path, fake: FakeProvider) -> Study:
    cache.clear()
    researcher = User.objects.create_user("researcher", password=CAST_PASSWORD, is_staff=True)
    adjudicator = User.objects.create_user("adjudicator1", password=CAST_PASSWORD)
    annotators = {
        name: User.objects.create_user(name, password=CAST_PASSWORD)
        for name in (*ANNOTATORS, ACTIVE_ANNOTATOR, STOPPING_ANNOTATOR)
    }
    dataset, mapped = import_the_files(work, researcher)

    # The campaign: three raters per task, gold tasks, an adjudication rule; the annotators rate over HTTP.
    campaign = campaign_create(
        name=CAMPAIGN,
        dataset=dataset,
        raters_per_item=3,
        annotators=[annotators[name] for name in ANNOTATORS],
        created_by=researcher,
        gold_rate=0.2,
    )
    adjudication_rule_set(campaign=campaign, max_spread=1, preference_splits=False, adjudicators=[adjudicator])
    tasks_rated = {name: rate_every_task(annotators[name], campaign) for name in ANNOTATORS}

    # The adjudicator settles one dispute; the researcher then excludes the annotator who caused them.
    settled = settle_the_dispute_of(campaign, SETTLED_ITEM, adjudicator)
    rater = Rater.objects.get(dataset=dataset, user=annotators[EXCLUDED])
    exclusion = rater_exclude(rater=rater, reason=EXCLUSION_REASON, by=researcher, campaign=campaign)

    study = Study(
        researcher=researcher,
        adjudicator=adjudicator,
        annotators=annotators,
        dataset=dataset,
        mapped=mapped,
        campaign=campaign,
        exclusion=exclusion,
        excluded_pseudonym=rater.pseudonym,
        settled=settled,
        tasks_rated=tasks_rated,
        work=work,
    )
    judge_certify_and_fill_a_hybrid_campaign(study, fake)
    run_the_span_judge(study, fake)
    rate_until_the_stopping_rule_is_met(study)
    return study


def import_the_files(work: Path, researcher: User) -> tuple[Dataset, Dataset]:
    """The study's JSONL with its rubric (gold item included), and a public format through its built-in mapping."""
    data = write_jsonl(work / "study.jsonl", study_lines())
    rubric = work / "study.rubric.json"
    rubric.write_text(json.dumps(RUBRIC), encoding="utf-8")
    command("import_dataset", str(data), "--name", NAME, "--rubric", str(rubric), "--owner", researcher.username)
    summeval = write_jsonl(work / "model_annotations.aligned.jsonl", summeval_lines())
    command(
        "import_mapped",
        str(summeval),
        "--mapping",
        "summeval",
        "--dataset",
        MAPPED_NAME,
        "--owner",
        researcher.username,
    )
    return Dataset.objects.get(name=NAME), Dataset.objects.get(name=MAPPED_NAME)


def settle_the_dispute_of(campaign: Campaign, item: str, adjudicator: User) -> Dispute:
    """The adjudicator gives every disputed answer of the item its stated quality."""
    dispute = Dispute.objects.get(campaign=campaign, task__turn__item__external_id=item)
    truths = {
        response.pk: truth(int(item[1:]), SYSTEMS.index(response.system.key))
        for response in Response.objects.filter(turn__item=dispute.task.turn.item).select_related("system")
    }
    values = {(entry["response_id"], entry["aspect_id"]): truths[entry["response_id"]] for entry in dispute.spreads}
    return dispute_resolve(dispute=dispute, adjudicator=adjudicator, values=values, reason="the stated quality")


def judge_certify_and_fill_a_hybrid_campaign(study: Study, fake: FakeProvider) -> None:
    """The judge on a real worker against the fake provider; certified on the experts' ratings; then a hybrid
    campaign whose confident tasks it fills."""
    with override_settings(JUDGE_API_BASE_ALLOWLIST=["127.0.0.1"]):
        config = judge_config(fake, name=JUDGE)
        with ScoreWritesHeld() as held:
            run = judging_services.judge_run_launch(dataset=study.dataset, config=config, launched_by=None)
            study.scores_when_succeeded = first_look_at_the_end(run, held)
        # Whatever the first look saw, the later seams need the scores and the version: wait for them (bounded).
        wait_for(lambda: JudgeScore.objects.filter(judge=run.judge).count() == run.total, timeout=60)
        wait_for(lambda: _run_versioned(run), timeout=60, message="the run's version")
        assert run.version is not None, run.version_problem
        study.run, study.run_units = run, run.total
        experts = reference_set_create(dataset=study.dataset, name="experts", owner=study.researcher, origin="import")
        study.certificate = certificate_request(
            version=run.version, reference_set=experts, requested_by=study.researcher
        )
        wait_for(lambda: _certificate_status(study.certificate) not in PENDING, timeout=240, message="certificate")
        study.hybrid_campaign = campaign_create(
            name=HYBRID_CAMPAIGN,
            dataset=study.dataset,
            raters_per_item=2,
            candidates_per_task=1,
            aspects=[ASPECT],
            annotators=[study.annotators[ACTIVE_ANNOTATOR]],
            ask_preference=False,
            rationale_required=False,
        )
        sampling_and_stopping_set(
            study.hybrid_campaign, human_sampling=HumanSampling.UNCERTAINTY, human_share=HUMAN_SHARE
        )
        calibration = hybrid.hybrid_calibrate(
            campaign=study.hybrid_campaign, version=run.version, target=0.8, delta=0.1, min_kept=10, user=None
        )
        study.calibration = hybrid.hybrid_apply(calibration=calibration, user=None)
        wait_for(lambda: _apply_status(study.calibration) == HybridApplyStatus.DONE, timeout=240, message="hybrid")
    study.active_rated = rate_every_task(study.annotators[ACTIVE_ANNOTATOR], study.hybrid_campaign)


def run_the_span_judge(study: Study, fake: FakeProvider) -> None:
    """An error-span judge on the worker; on Postgres its first look as succeeded is held still as the scale run's."""
    fake.script(default={"served_model": SNAPSHOT})
    fake.content_fn = span_judge_reply
    with override_settings(JUDGE_API_BASE_ALLOWLIST=["127.0.0.1"]):
        config = span_judge_config(fake, SPAN_JUDGE)
        with ScoreWritesHeld() as held:
            run = judging_services.judge_run_launch(dataset=study.dataset, config=config, launched_by=None)
            study.span_when_succeeded = first_look_at_the_end(run, held, stored_spans_and_scores)
    wait_for(lambda: stored_scores(run) == run.total, timeout=60, message="the span run's scores")
    study.span_run = run


def rate_until_the_stopping_rule_is_met(study: Study) -> None:
    """The stopping campaign's rule is read after each answer here, as well as by the worker the answer enqueues it
    on, so the campaign stops at the same answer whatever the worker's pace (the check is safe twice)."""
    campaign = campaign_create(
        name=STOPPING_CAMPAIGN,
        dataset=study.dataset,
        raters_per_item=1,
        candidates_per_task=1,
        aspects=[ASPECT],
        annotators=[study.annotators[STOPPING_ANNOTATOR]],
        ask_preference=False,
        rationale_required=False,
    )
    aspect = campaign.aspects.get()
    sampling_and_stopping_set(
        campaign, stop_rule=StopRule.WIDTH, stop_aspect_id=aspect.pk, stop_first=STOP_SYSTEM, stop_width=STOP_WIDTH
    )

    def check() -> None:
        study.stop_checks.append(hybrid.campaign_stop_check(campaign_id=campaign.pk))

    check()  # before any answer: nothing to decide yet
    study.stopping_rated = rate_every_task(study.annotators[STOPPING_ANNOTATOR], campaign, after_each=check)
    campaign.refresh_from_db()
    study.stopping_campaign = campaign


PENDING = (CertificateStatus.PENDING, CertificateStatus.EVALUATING)


def _certificate_status(certificate: Certificate) -> str:
    certificate.refresh_from_db()
    return str(certificate.status)


def _apply_status(calibration: HybridCalibration) -> str:
    calibration.refresh_from_db()
    return str(calibration.apply_status)


# ---------------------------------------------------------------- reading the outputs
