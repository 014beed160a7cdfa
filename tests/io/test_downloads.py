"""The four dataset downloads (JSONL, JSONL with judges, flat CSV, flat JSONL) from the pages, the API and the command
line: named after the dataset, for its researcher only, GET only, writing nothing; and the preferences collected in
a campaign, in the JSONL export (kept by a re-import) and as rows of the flat export."""

import csv
import io
import json
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from annotations.campaigns.answers import MISSING, TaskAnswer
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.tasks import task_candidates
from annotations.datasets.downloads import EXPORT_KINDS, export_disposition, safe_file_stem
from annotations.datasets.exporting import iter_export_lines
from annotations.datasets.flat_export import iter_flat_rows
from annotations.datasets.importing import dataset_import
from annotations.errors import DatasetImportError
from annotations.models import Campaign, Dataset, Rater, Rating, RatingOrigin, Response, Submission
from judging.models import JudgeKind, JudgeScore
from tests.annotate.factories import make_campaign, make_dataset, submit_answer
from tests.conftest import client_for
from tests.factories import JudgeFactory
from tests.io.helpers import assert_json_equal, row_counts

NAME = "demo-llm-jp"
FILENAMES = {
    "jsonl": "demo-llm-jp.jsonl",
    "judges-jsonl": "demo-llm-jp.judges.jsonl",
    "flat-csv": "demo-llm-jp.flat.csv",
    "flat-jsonl": "demo-llm-jp.flat.jsonl",
}
API_QUERIES: dict[str, dict[str, str]] = {
    "jsonl": {},
    "judges-jsonl": {"include_judges": "true"},
    "flat-csv": {"flat": "csv"},
    "flat-jsonl": {"flat": "jsonl"},
}
CLI_FLAGS = {
    "jsonl": [],
    "judges-jsonl": ["--include-judges"],
    "flat-csv": ["--flat", "--format", "csv"],
    "flat-jsonl": ["--flat"],
}


def page_url(dataset: Dataset, kind: str) -> str:
    return reverse("dataset-export", args=[dataset.pk, kind])


def api_url(dataset: Dataset) -> str:
    return reverse("api-dataset-export", args=[dataset.pk])


def body_of(response: Any) -> str:
    raw = b"".join(response.streaming_content) if response.streaming else response.content
    return str(raw.decode("utf-8"))


def submit_all(campaign: Campaign, user: User, *, preference: int = 1, none_appropriate: bool = False) -> int:
    """The user rates every task left for them, preferring candidate `preference`; returns how many they did."""
    done = 0
    while (assignment := assignment_claim(campaign=campaign, user=user)) is not None:
        candidates = task_candidates(assignment=assignment, user_id=user.pk)
        ratings = {}
        for candidate in candidates:
            ratings[(candidate.number, 1)] = 2
            ratings[(candidate.number, 2)] = MISSING if candidate.number == 1 else 0
        answer = TaskAnswer(
            ratings=ratings,
            preference=min(preference, len(candidates)),
            none_appropriate=none_appropriate,
            rationale=f"reason of {user.username}",
            comment=f"comment of {user.username}",
        )
        key = f"download-{user.pk}-{assignment.task_id}"
        submit_answer(campaign, assignment, user, key, answer, now=assignment.leased_at + timedelta(seconds=5))
        done += 1
    return done


@pytest.fixture
def dataset(researcher: User) -> Dataset:
    dataset = make_dataset(NAME, owner=researcher, items=2, systems=3)
    run = JudgeFactory(dataset=dataset, name="judge run", kind=JudgeKind.RUN)
    JudgeScore.objects.create(
        judge=run,
        response=Response.objects.filter(turn__item__dataset=dataset).first(),
        aspect_name="factuality",
        value=2,
    )
    return dataset


@pytest.fixture
def rated(dataset: Dataset, annotator1: User, annotator2: User) -> Campaign:
    campaign = make_campaign(dataset, [annotator1, annotator2], name="first round", raters_per_item=2)
    assert submit_all(campaign, annotator1, preference=2) == 2
    assert submit_all(campaign, annotator2, preference=1, none_appropriate=True) == 2
    return campaign


# --- who may download what ------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("kind", sorted(FILENAMES))
def test_owner_downloads_each_export_named_after_the_dataset(kind: str, researcher: User, rated: Campaign) -> None:
    dataset = rated.dataset
    owner = client_for(researcher)
    before = row_counts()
    for response in (owner.get(page_url(dataset, kind)), owner.get(api_url(dataset), API_QUERIES[kind])):
        assert response.status_code == 200
        assert response.streaming
        assert response["Content-Disposition"] == f'attachment; filename="{FILENAMES[kind]}"'
        assert response["Content-Type"] == EXPORT_KINDS[kind].content_type
        assert response["X-Content-Type-Options"] == "nosniff"
        body = body_of(response)
        if kind == "flat-csv":
            rows = list(csv.DictReader(io.StringIO(body, newline="")))
            assert {row["kind"] for row in rows} == {"rating", "preference"}
        else:
            lines = [json.loads(line) for line in body.splitlines()]
            if kind.startswith("flat"):
                assert {line["kind"] for line in lines} == {"rating", "preference"}
            else:
                assert [line["id"] for line in lines] == ["q0", "q1"]
                assert all(len(line["turns"][0]["preferences"]) == 2 for line in lines)
                judged = [
                    answer
                    for line in lines
                    for answer in line["turns"][0]["responses"].values()
                    if "judge run" in answer.get("auto_evals", {})
                ]
                assert len(judged) == (1 if kind == "judges-jsonl" else 0)
    assert row_counts() == before  # reads never write


@pytest.mark.django_db
@pytest.mark.parametrize("kind", sorted(FILENAMES))
def test_post_to_a_download_is_405(kind: str, researcher: User, dataset: Dataset) -> None:
    owner = client_for(researcher)
    assert owner.post(page_url(dataset, kind)).status_code == 405
    assert owner.post(api_url(dataset), API_QUERIES[kind]).status_code == 405


@pytest.mark.django_db
@pytest.mark.parametrize("kind", sorted(FILENAMES))
def test_nobody_else_downloads(kind: str, dataset: Dataset, annotator1: User, outsider: User, rated: Campaign) -> None:
    other = User.objects.create_user("researcher2", password="x-password-123", is_staff=True)
    for user in (annotator1, outsider):  # annotator1 rated this dataset; still not a researcher
        assert client_for(user).get(page_url(dataset, kind)).status_code == 403
        assert client_for(user).get(api_url(dataset), API_QUERIES[kind]).status_code == 403
    assert client_for(other).get(page_url(dataset, kind)).status_code == 404
    assert client_for(other).get(api_url(dataset), API_QUERIES[kind]).status_code == 404
    anonymous = client_for(None).get(page_url(dataset, kind))
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    assert client_for(None).get(api_url(dataset), API_QUERIES[kind]).status_code in {401, 403}


@pytest.mark.django_db
def test_unknown_export_kind_is_404(researcher: User, dataset: Dataset) -> None:
    assert client_for(researcher).get(page_url(dataset, "xml")).status_code == 404


@pytest.mark.django_db
def test_pages_offer_the_four_downloads_as_links(researcher: User, annotator1: User, rated: Campaign) -> None:
    dataset = rated.dataset
    hrefs = [f'href="{page_url(dataset, kind)}"' for kind in FILENAMES]
    owner = client_for(researcher)
    for url in (
        reverse("home"),
        reverse("dashboard-index"),
        reverse("dashboard-dataset", args=[dataset.pk]),
        reverse("dashboard-judges", args=[dataset.pk]),
        reverse("campaign-progress", args=[rated.pk]),
    ):
        page = owner.get(url).content.decode("utf-8")
        assert all(href in page for href in hrefs), url
    annotator_home = client_for(annotator1).get(reverse("home")).content.decode("utf-8")
    assert not any(href in annotator_home for href in hrefs)


# --- file names -----------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_non_ascii_name_gets_a_utf8_filename_and_an_ascii_fallback(researcher: User) -> None:
    dataset = make_dataset("日本語 評価/第1回", owner=researcher, items=1, systems=2)
    response = client_for(researcher).get(page_url(dataset, "flat-csv"))
    assert response.status_code == 200
    header = response["Content-Disposition"]
    header.encode("ascii")  # a header value must be ASCII
    assert header == (
        f'attachment; filename="dataset-{dataset.pk}.flat.csv"; '
        f"filename*=UTF-8''{quote('日本語-評価-第1回.flat.csv', safe='')}"
    )
    charset, language, encoded = header.split("; filename*=", 1)[1].split("'", 2)
    assert (charset, language) == ("UTF-8", "")
    assert unquote(encoded, encoding=charset, errors="strict") == "日本語-評価-第1回.flat.csv"


@pytest.mark.django_db
def test_a_name_with_nothing_usable_falls_back_to_the_id(researcher: User) -> None:
    dataset = make_dataset("../..", owner=researcher, items=1, systems=2)
    assert export_disposition(dataset, "jsonl") == f'attachment; filename="dataset-{dataset.pk}.jsonl"'
    only_japanese = make_dataset("評価", owner=researcher, items=1, systems=2)
    assert export_disposition(only_japanese, "jsonl").startswith(f'attachment; filename="dataset-{only_japanese.pk}.')


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        ("demo-llm-jp", "demo-llm-jp"),
        ("My dataset (v2)", "My-dataset-v2"),
        ("../../etc/passwd", "etc-passwd"),
        (".hidden", "hidden"),
        ('a"b\\c;d\r\ne', "a-b-c-d-e"),
        ("evil\u202etxt.exe", "evil-txt.exe"),
        ("ＡＢＣ１２３", "ABC123"),
        ("日本語データ", "日本語データ"),
        ("x" * 300, "x" * 100),
        ("", ""),
    ],
)
def test_safe_file_stem(name: str, stem: str) -> None:
    assert safe_file_stem(name) == stem


@pytest.mark.django_db
@pytest.mark.parametrize("kind", sorted(FILENAMES))
def test_cli_writes_each_export_into_a_directory_under_the_download_name(
    kind: str, rated: Campaign, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("export_dataset", NAME, "--out", str(tmp_path), *CLI_FLAGS[kind])
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILENAMES[kind]]
    written = (tmp_path / FILENAMES[kind]).read_bytes().decode("utf-8")
    call_command("export_dataset", NAME, *CLI_FLAGS[kind])
    assert capsys.readouterr().out == written  # without --out, standard output as before
    api = client_for(rated.dataset.owner).get(api_url(rated.dataset), API_QUERIES[kind])
    assert body_of(api) == written


# --- preferences ----------------------------------------------------------------------------------------------


def _expected_preferences(campaign: Campaign) -> dict[tuple[str, str], dict[str, Any]]:
    """(item id, rater pseudonym) -> what the export must say, worked out from the stored submissions."""
    expected = {}
    for submission in Submission.objects.filter(assignment__campaign=campaign).select_related(
        "assignment__task__turn__item", "preferred_response__system"
    ):
        assignment = submission.assignment
        rater = Rater.objects.get(dataset=campaign.dataset, user_id=assignment.annotator_id)
        expected[(assignment.task.turn.item.external_id, rater.pseudonym)] = {
            "rater": rater.pseudonym,
            "campaign": campaign.name,
            "candidates": [r.system.key for r in assignment.task.responses.order_by("position")],
            "preferred": submission.preferred_response.system.key if submission.preferred_response else None,
            "none_appropriate": submission.none_appropriate,
            "reason": submission.rationale,
            "comment": submission.comment,
        }
    return expected


@pytest.mark.django_db
def test_jsonl_export_carries_each_raters_preference_with_the_system_key(
    rated: Campaign, annotator1: User, annotator2: User
) -> None:
    lines = [json.loads(line) for line in iter_export_lines(dataset=rated.dataset)]
    expected = _expected_preferences(rated)
    assert len(expected) == 4
    pseudonym = {
        user.username: Rater.objects.get(dataset=rated.dataset, user=user).pseudonym
        for user in (annotator1, annotator2)
    }
    for line in lines:
        turn = line["turns"][0]
        assert list(turn)[-2:] == ["responses", "preferences"]
        preferences = turn["preferences"]
        assert [p["rater"] for p in preferences] == [pseudonym["annotator1"], pseudonym["annotator2"]]
        for preference in preferences:
            assert preference == expected[(line["id"], preference["rater"])]
            assert preference["preferred"] in turn["responses"]
            assert preference["rater"] in next(iter(turn["responses"].values()))["raters"]
        first, second = preferences
        assert (first["none_appropriate"], first["reason"]) == (False, "reason of annotator1")
        assert (second["none_appropriate"], second["comment"]) == (True, "comment of annotator2")
    assert "annotator1" not in json.dumps([p["rater"] for line in lines for p in line["turns"][0]["preferences"]])


@pytest.mark.django_db
def test_preferred_system_is_the_candidate_the_annotator_picked(researcher: User, annotator1: User) -> None:
    dataset = make_dataset("picked", owner=researcher, items=1, systems=4)
    campaign = make_campaign(dataset, [annotator1], raters_per_item=1, candidates_per_task=2)
    picked = []
    while (assignment := assignment_claim(campaign=campaign, user=annotator1)) is not None:
        candidates = task_candidates(assignment=assignment, user_id=annotator1.pk)
        ratings = {(c.number, s): 1 for c in candidates for s in (1, 2)}
        picked.append(Response.objects.get(pk=candidates[-1].response_id).system.key)
        submit_answer(
            campaign,
            assignment,
            annotator1,
            f"pick-{assignment.task_id}-x",
            TaskAnswer(ratings=ratings, preference=len(candidates), rationale="why"),
        )
    (line,) = [json.loads(x) for x in iter_export_lines(dataset=dataset)]
    preferences = line["turns"][0]["preferences"]
    assert [p["preferred"] for p in preferences] == picked
    assert all(len(p["candidates"]) == 2 and p["preferred"] in p["candidates"] for p in preferences)
    assert sorted(k for p in preferences for k in p["candidates"]) == sorted(line["turns"][0]["responses"])


@pytest.mark.django_db
def test_flat_export_has_one_row_per_rating_and_one_per_submission(rated: Campaign) -> None:
    dataset = rated.dataset
    rows = list(iter_flat_rows(dataset=dataset))
    ratings = Rating.objects.filter(response__turn__item__dataset=dataset)
    submissions = Submission.objects.filter(assignment__campaign__dataset=dataset)
    assert len(rows) == ratings.count() + submissions.count() == 2 * 3 * 2 * 2 + 4
    rating_rows = [r for r in rows if r["kind"] == "rating"]
    preference_rows = [r for r in rows if r["kind"] == "preference"]
    assert len(rating_rows) == ratings.count() and len(preference_rows) == submissions.count()
    # The task's reason and comment are on its preference row, not repeated on every rating.
    assert {(r["rationale"], r["comment"]) for r in rating_rows} == {("", "")}
    assert {r["campaign"] for r in rating_rows} == {"first round"}
    assert all(r["origin"] == RatingOrigin.APP for r in rows)
    expected = _expected_preferences(rated)
    for row in preference_rows:
        want = expected[(row["item_id"], row["rater"])]
        assert (row["preferred"], row["none_appropriate"], row["rationale"], row["comment"], row["campaign"]) == (
            want["preferred"],
            want["none_appropriate"],
            want["reason"],
            want["comment"],
            want["campaign"],
        )
        assert row["candidates"] == want["candidates"]
        assert row["system"] is None and row["aspect"] is None and row["value"] is None
        assert row["seconds_spent"] == pytest.approx(5) and row["created_at"]
    # Grouped by turn: each turn's ratings, then its preferences.
    kinds = [(r["item_id"], r["kind"]) for r in rows]
    assert (
        kinds
        == [("q0", "rating")] * 12 + [("q0", "preference")] * 2 + [("q1", "rating")] * 12 + [("q1", "preference")] * 2
    )


@pytest.mark.django_db
def test_round_trip_with_preferences_is_json_equal(rated: Campaign, researcher: User) -> None:
    first = list(iter_export_lines(dataset=rated.dataset))
    copy = dataset_import(stream=io.BytesIO("".join(first).encode("utf-8")), name="copy", owner=researcher).dataset
    second = list(iter_export_lines(dataset=copy))
    assert_json_equal([json.loads(x) for x in second], [json.loads(x) for x in first])
    # The copy's flat export shows the same preferences, now as imported ones.
    original = [r for r in iter_flat_rows(dataset=rated.dataset) if r["kind"] == "preference"]
    copied = [r for r in iter_flat_rows(dataset=copy) if r["kind"] == "preference"]
    assert [r["origin"] for r in copied] == ["import"] * 4
    keep = ("item_id", "turn", "rater", "campaign", "candidates", "preferred", "none_appropriate", "rationale")
    assert [{k: r[k] for k in keep} for r in copied] == [{k: r[k] for k in keep} for r in original]


@pytest.mark.django_db
def test_preferences_collected_on_a_copy_follow_the_imported_ones(
    rated: Campaign, researcher: User, annotator3: User
) -> None:
    exported = "".join(iter_export_lines(dataset=rated.dataset))
    copy = dataset_import(stream=io.BytesIO(exported.encode("utf-8")), name="copy", owner=researcher).dataset
    campaign = make_campaign(copy, [annotator3], name="second round", raters_per_item=1, aspects=["factuality"])
    assert submit_all_factuality(campaign, annotator3) == 2
    for line in (json.loads(x) for x in iter_export_lines(dataset=copy)):
        preferences = line["turns"][0]["preferences"]
        assert [p["campaign"] for p in preferences] == ["first round", "first round", "second round"]


def submit_all_factuality(campaign: Campaign, user: User) -> int:
    done = 0
    while (assignment := assignment_claim(campaign=campaign, user=user)) is not None:
        candidates = task_candidates(assignment=assignment, user_id=user.pk)
        submit_answer(
            campaign,
            assignment,
            user,
            f"again-{assignment.task_id}-x",
            TaskAnswer(ratings={(c.number, 1): 3 for c in candidates}, preference=1, rationale="ok"),
        )
        done += 1
    return done


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("preferences", "field"),
    [
        ({"rater": "a"}, "turns[0].preferences"),
        (["a"], "turns[0].preferences[0]"),
        ([{"preferred": 3}], "turns[0].preferences[0].preferred"),
        ([{"none_appropriate": "yes"}], "turns[0].preferences[0].none_appropriate"),
        ([{"candidates": "a,b"}], "turns[0].preferences[0].candidates"),
    ],
)
def test_import_refuses_malformed_preferences(preferences: Any, field: str) -> None:
    line = {"id": "x", "turns": [{"prompt": "p", "responses": {"a": {"response": "r"}}, "preferences": preferences}]}
    with pytest.raises(DatasetImportError) as caught:
        dataset_import(stream=io.BytesIO(json.dumps(line).encode()), name="bad")
    assert caught.value.field == field
    assert not Dataset.objects.filter(name="bad").exists()


@pytest.mark.django_db
def test_import_keeps_unknown_keys_of_a_preference() -> None:
    line = {
        "id": "x",
        "turns": [
            {
                "prompt": "p",
                "responses": {"a": {"response": "r"}, "b": {"response": "s"}},
                "preferences": [{"rater": "w1", "preferred": "b", "confidence": 0.9}],
            }
        ],
    }
    dataset = dataset_import(stream=io.BytesIO(json.dumps(line).encode()), name="extra").dataset
    assert_json_equal([json.loads(x) for x in iter_export_lines(dataset=dataset)], [line])
    (row,) = list(iter_flat_rows(dataset=dataset))
    assert (row["kind"], row["rater"], row["preferred"], row["origin"]) == ("preference", "w1", "b", "import")


@pytest.mark.django_db
def test_cli_flat_with_judges_warns_and_writes_the_flat_export(rated: Campaign, tmp_path: Path) -> None:
    err = io.StringIO()
    call_command("export_dataset", NAME, "--flat", "--include-judges", "--out", str(tmp_path), stderr=err)
    assert "ignored with --flat" in err.getvalue()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo-llm-jp.flat.jsonl"]


@pytest.mark.django_db
def test_a_campaign_without_the_preference_question_still_exports_the_reason(
    researcher: User, annotator1: User
) -> None:
    dataset = make_dataset("no-preference", owner=researcher, items=1, systems=2)
    campaign = make_campaign(dataset, [annotator1], raters_per_item=1, ask_preference=False)
    assignment = assignment_claim(campaign=campaign, user=annotator1)
    candidates = task_candidates(assignment=assignment, user_id=annotator1.pk)
    submit_answer(
        campaign,
        assignment,
        annotator1,
        "no-preference-1",
        TaskAnswer(ratings={(c.number, s): 1 for c in candidates for s in (1, 2)}, rationale="both vague"),
    )
    (line,) = [json.loads(x) for x in iter_export_lines(dataset=dataset)]
    (preference,) = line["turns"][0]["preferences"]
    assert (preference["preferred"], preference["none_appropriate"], preference["reason"]) == (
        None,
        False,
        "both vague",
    )
