"""The whole study behind tests/io/test_whole_study.py: its design, and the one function that builds it.

The design is small enough to hold in one's head, and every number a seam checks follows from it:

- sixteen regular items q00..q15 and one gold item q16, each one turn with the answers of three systems; answer
  (i, s) states its true quality, 1 + (i + 2s) mod 5 on a 1-5 scale, in its text, so raters and the fake judge can
  read it;
- three imported experts (named in the file) rate every regular answer: one exactly, two within a point;
- three annotators rate every task of a campaign through the annotator API (a task is one turn's three answers) and
  pick a preferred answer; the third rates items q00..q03 upside down, which disputes those tasks (the rule: a
  spread above one point); the adjudicator settles q00's dispute, then the researcher excludes the third annotator;
- a judge reads the stated quality (sure and right below 5, hesitant and a point low at 5), runs on a real Celery
  worker against the fake provider, is certified on the experts' ratings, and fills a second, hybrid campaign;
- beside the scale aspect, an MQM span aspect: every annotator marks the word "answers" of an answer below quality 5
  as one error (major below 3, minor at 3 or 4) and confirms "no error" at 5; the excluded annotator also marks the
  word "question" as a minor error everywhere, so their spans differ from everyone's and their scores stay within a
  point (no span dispute); an error-span judge marks what the first two annotators mark, on the worker;
- the hybrid campaign (two raters per task) draws its human tasks by the judge's uncertainty; a fourth annotator
  rates each of them once, so every task drawn is rated and a slot of each is left;
- a third campaign states a stopping rule (the interval of sys_a's mean quality no wider than STOP_WIDTH); a fifth
  annotator rates until it stops, the rule read after each answer;
- a SummEval-shaped sample is imported through the built-in `summeval` mapping as a second dataset.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
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
    PROJECT_ROOT,
    WorkerProcess,
    _empty_broker,
    database_url_for_subprocess,
    wait_for,
)
from tests.fakeprovider import FakeProvider
from tests.judging.certification_data import SNAPSHOT
from tests.judging.hybrid_data import judge_config, sampling_and_stopping_set, script_judge
from tests.judging.span_judge_data import span_judge_config

NAME = "whole study"
MAPPED_NAME = "whole study summeval"
CAMPAIGN = "whole study campaign"
HYBRID_CAMPAIGN = "whole study hybrid"
STOPPING_CAMPAIGN = "whole study stopping"
JUDGE = "study judge"
SPAN_JUDGE = "study span judge"
ASPECT = "quality"
SPANS = "errors"
SEVERITIES = {"minor": 1, "major": 5}
SYSTEMS = ("sys_a", "sys_b", "sys_c")
REGULAR_ITEMS = 16
GOLD_ITEM = REGULAR_ITEMS  # q16
EXPERTS = ("expert_1", "expert_2", "expert_3")
ANNOTATORS = ("annotator1", "annotator2", "annotator3")
EXCLUDED = "annotator3"
ACTIVE_ANNOTATOR = "annotator4"  # rates every task the hybrid campaign sends to humans, once
STOPPING_ANNOTATOR = "annotator5"  # rates the stopping campaign until it stops
HUMAN_SHARE = 0.5  # the expected share of the hybrid campaign's tasks drawn for humans
STOP_SYSTEM, STOP_WIDTH = "sys_a", 3.2
UPSIDE_DOWN_ITEMS = range(4)  # where the excluded annotator rates 6 - truth
SETTLED_ITEM = "q00"
EXCLUSION_REASON = "rates the first items upside down"
RATIONALE = "Read the stated quality,\nthen rated it."  # a line break, kept by every output
WORKER_ENV = {
    "JUDGE_API_BASE_ALLOWLIST": "127.0.0.1",
    "JUDGE_RETRY_BASE_MS": "20",
    "JUDGE_RETRY_CAP_S": "1",
    "JUDGE_LEASE_S": "10",
    "JUDGE_TIME_SLICE_S": "30",
}
RUBRIC = {
    "aspects": [
        {"name": ASPECT, "label": "Quality", "description": "How good is the answer?", "min": 1, "max": 5, "ideal": 5},
        {
            "name": SPANS,
            "kind": "spans",
            "label": "Errors",
            "description": "Mark every error in the answer.",
            "spans": {
                "categories": ["Accuracy/Mistranslation", "Fluency/Grammar"],
                "severities": SEVERITIES,
                "no_error_confirmation": True,
            },
        },
    ]
}
STATED = re.compile(r"^(sys_[abc]) answers question (\d+) \(true quality (\d)\)")


def item_id(i: int) -> str:
    return f"q{i:02d}"


def truth(i: int, s: int) -> int:
    return 1 + (i + 2 * s) % 5


def _clip(value: int) -> int:
    return min(5, max(1, value))


def expert_values(i: int, s: int) -> list[int]:
    t = truth(i, s)
    return [t, _clip(t + (i + s) % 3 - 1), _clip(t + (i + s + 1) % 3 - 1)]


def annotator_value(username: str, i: int, s: int) -> int:
    t = truth(i, s)
    if i == GOLD_ITEM:
        return t  # everyone passes the gold item
    if username == "annotator2":
        return _clip(t + (i + s + 2) % 3 - 1)
    if username == EXCLUDED and i in UPSIDE_DOWN_ITEMS:
        return 6 - t
    return t


def _marked(text: str, word: str, category: str, severity: str) -> dict[str, Any]:
    start = text.index(word)
    return {"start": start, "end": start + len(word), "category": category, "severity": severity}


def span_token(username: str, text: str) -> dict[str, Any]:
    """What the annotator marks on an answer, read from its stated quality (see the module's design)."""
    t = int(STATED.match(text).group(3))  # type: ignore[union-attr]
    spans = []
    if t < 5:
        spans.append(_marked(text, "answers", "Accuracy/Mistranslation", "major" if t < 3 else "minor"))
    if username == EXCLUDED:
        spans.append(_marked(text, "question", "Fluency/Grammar", "minor"))
    return {"no_error": not spans, "spans": spans}


def mqm_score(token: dict[str, Any]) -> float:
    """The MQM score of a span token under the study's scheme: the sum of its errors' severity weights."""
    return float(sum(SEVERITIES[span["severity"]] for span in token["spans"]))


def span_judge_reply(body: dict[str, Any]) -> str:
    """The error-span judge marks what the first two annotators mark, quoting the word."""
    found = re.search(r"true quality (\d)", body["messages"][-1]["content"])
    t = int(found.group(1)) if found else 5
    errors = [] if t == 5 else [{"quote": "answers", "category": "Accuracy/Mistranslation", "severity": "minor"}]
    if errors and t < 3:
        errors[0]["severity"] = "major"
    return "Read the stated quality.\n" + json.dumps({"errors": errors})


def study_lines() -> list[dict[str, Any]]:
    lines = []
    for i in range(REGULAR_ITEMS + 1):
        responses: dict[str, Any] = {}
        for s, system in enumerate(SYSTEMS):
            answer: dict[str, Any] = {"response": f"{system} answers question {i} (true quality {truth(i, s)})."}
            if i != GOLD_ITEM:  # the gold item measures the annotators; it carries no imported ratings
                answer["human_evals"] = {ASPECT: expert_values(i, s)}
                answer["raters"] = list(EXPERTS)
            responses[system] = answer
        line: dict[str, Any] = {
            "id": item_id(i),
            "turns": [{"prompt": f"Question {i}: explain it.", "responses": responses}],
        }
        if i == GOLD_ITEM:
            expected = {system: {ASPECT: truth(i, s)} for s, system in enumerate(SYSTEMS)}
            line["gold"] = {"kind": "gold", "expected": expected, "tolerance": 0}
        lines.append(line)
    return lines


def summeval_lines() -> list[dict[str, Any]]:
    """Two summaries of one document as Yale-LILY's model_annotations.aligned.jsonl has them (three experts)."""

    def marks(c: int, s: int, f: int, r: int) -> dict[str, int]:
        return {"coherence": c, "consistency": s, "fluency": f, "relevance": r}

    document = "dm-test-8764fb95bfad8ee849274873a92fb8d6b400eee2"
    reference = "Andros Townsend an 83rd minute sub in Tottenham 's draw with Burnley ."
    rows = [
        (
            "M11",
            "paul merson was brought on with only seven minutes remaining .",
            [(1, 1, 3, 2), (2, 5, 5, 3), (1, 1, 3, 2)],
        ),
        ("M13", "andros townsend scored the equaliser .", [(4, 5, 5, 4), (3, 5, 5, 4), (4, 5, 5, 3)]),
        ("M17", "tottenham drew with burnley .", [(3, 4, 4, 4), (3, 4, 5, 4), (2, 4, 4, 3)]),
    ]
    return [
        {
            "id": document,
            "decoded": decoded,
            "expert_annotations": [marks(*m) for m in expert],
            "turker_annotations": [marks(3, 3, 3, 3)] * 5,
            "references": [reference, "crowd ref"],
            "model_id": model,
            "filepath": f"cnndm/dailymail/stories/{document[8:]}.story",
        }
        for model, decoded, expert in rows
    ]


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


def cli_json(*args: str) -> dict[str, Any]:
    return json.loads(command(*args, "--json"))  # type: ignore[no-any-return]


def export_file(name: str, path: Path, *flags: str) -> Path:
    """`export_dataset NAME [flags]` into `path` (a folder for --hf-folder)."""
    target = ["--hf-folder", str(path)] if "--hf-folder" in flags else [*flags, "--out", str(path)]
    command("export_dataset", name, *target)
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_csv(path: Path) -> list[dict[str, Any]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def parquet_rows(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()  # type: ignore[no-any-return]


HF_PROGRAM = """
import json, sys
from datasets import load_dataset
out = {"features": {}}
card = open(f"{sys.argv[1]}/README.md", encoding="utf-8").read()
for table in ("answers", "ratings", "preferences"):
    # The card's configs name the tables written; a table without rows has no file, since datasets cannot load one.
    if f"data_files: data/{table}.parquet" not in card:
        out[table] = []
        continue
    ds = load_dataset("parquet", data_files=f"{sys.argv[1]}/data/{table}.parquet", cache_dir=sys.argv[2])["train"]
    out[table] = ds.to_list()
    out["features"][table] = {k: str(v) for k, v in ds.features.items()}
print(json.dumps(out, default=str))
"""


def load_hf_folder(folder: Path, cache_dir: Path) -> dict[str, Any]:
    """The folder's three tables as `datasets` loads them (offline, in a child process: `datasets` is heavy and
    keeps state), and its dataset card."""
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(cache_dir / "home"))
    done = subprocess.run(
        [sys.executable, "-c", HF_PROGRAM, str(folder), str(cache_dir)],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    loaded["card"] = (folder / "README.md").read_text(encoding="utf-8")
    return loaded


def mentions_as_excluded(value: Any, pseudonym: str) -> bool:
    """Whether some key that speaks of exclusion, anywhere in the JSON value, names the pseudonym."""
    if isinstance(value, dict):
        return any(
            ("exclu" in str(key).lower() and pseudonym in json.dumps(inner)) or mentions_as_excluded(inner, pseudonym)
            for key, inner in value.items()
        )
    if isinstance(value, list):
        return any(mentions_as_excluded(inner, pseudonym) for inner in value)
    return False


def run_gate(folder: Path, dataset: str, rules: list[dict[str, Any]]) -> tuple[int, str, dict[str, Any]]:
    """`manage.py gate RULES --report R` in its own process, as CI runs it: (exit status, output, the JSON report)."""
    folder.mkdir(parents=True, exist_ok=True)
    rules_file = folder / "rules.json"
    rules_file.write_text(json.dumps({"dataset": dataset, "rule": rules}), encoding="utf-8")
    report = folder / "gate-report.json"
    env = dict(os.environ, DATABASE_URL=database_url_for_subprocess(), DJANGO_SETTINGS_MODULE="evalsite.settings")
    done = subprocess.run(
        [sys.executable, "manage.py", "gate", str(rules_file), "--report", str(report)],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr, json.loads(report.read_text(encoding="utf-8"))
