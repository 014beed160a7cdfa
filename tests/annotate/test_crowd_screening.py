"""Consent and screening on study links: consent first, then the questions; declining or failing ends the session
before any task, with the platform's screened-out answer, and is recorded without an account or a task slot."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotations.models import Assignment, AssignmentStatus, Campaign
from annotations.recruitment.models import (
    CrowdWorker,
    LinkScreening,
    Platform,
    RecruitmentLink,
    ScreeningOutcome,
)
from annotations.recruitment.rules import ScreeningInvalid, parse_questions, screening_passes
from annotations.recruitment.services import RecruitmentError, link_create, link_screening_set
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotate.test_recruitment import PID, arrival_of, mturk_url, prolific_url

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_counters")]


@pytest.fixture
def campaign(researcher: User, annotator1: User) -> Campaign:
    return make_campaign(make_dataset(owner=researcher, items=2), [annotator1], name="Crowd study")


@pytest.fixture
def prolific(campaign: Campaign, researcher: User) -> RecruitmentLink:
    return link_create(campaign=campaign, platform=Platform.PROLIFIC, created_by=researcher, completion_code="OK1")


QUESTIONS = "Are you a native English speaker? | *Yes | No\nHow old are you? | Under 18 | *18 or over"


def screen(link: RecruitmentLink, *, consent: str = "You agree to **take part**.", rule: str = "all") -> None:
    link_screening_set(link=link, consent_text=consent, questions_text=QUESTIONS, rule=rule, screened_out_code="SCR-1")


def start(client: Client, url: str) -> tuple[str, str]:
    page = client.get(url)
    assert page.status_code == 200
    return url.split("?", 1)[0], arrival_of(page)


def consent_then_questions(client: Client, url: str) -> tuple[str, str, Any]:
    path, arrival = start(client, url)
    consent = client.post(path, {"arrival": arrival})
    assert consent.status_code == 200 and "take part" in consent.content.decode()
    assert 'name="q-0"' not in consent.content.decode()  # consent comes first, alone
    questions = client.post(path, {"arrival": arrival, "step": "consent", "consent": "agree"})
    assert questions.status_code == 200 and 'name="q-0"' in questions.content.decode()
    proof = questions.content.decode().split('name="consent_proof" value="', 1)[1].split('"', 1)[0]
    return path, arrival, proof


def screened_on_prolific(link: RecruitmentLink, native_speaker: str) -> tuple[Client, Any]:
    """A new participant through the screened Prolific link, past the consent, sending the screening answers: 18 or
    over, and `native_speaker` to the first question. Their client and the answer to those answers."""
    screen(link)
    client = Client()
    path, arrival, proof = consent_then_questions(client, prolific_url(link))
    answers = {"q-0": native_speaker, "q-1": "18 or over"}
    return client, client.post(path, {"arrival": arrival, "step": "screening", "consent_proof": proof, **answers})


# --- rules --------------------------------------------------------------------------------------------------------


def test_questions_are_parsed_from_lines_with_marked_choices() -> None:
    assert parse_questions(QUESTIONS) == [
        {"text": "Are you a native English speaker?", "choices": ["Yes", "No"], "accepted": ["Yes"]},
        {"text": "How old are you?", "choices": ["Under 18", "18 or over"], "accepted": ["18 or over"]},
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [("Only a question", "at least two choices"), ("Q? | Yes | No", "mark the accepted"), ("Q? | *A | A", "twice")],
)
def test_bad_question_lines_are_refused_by_line(text: str, problem: str) -> None:
    with pytest.raises(ScreeningInvalid, match=problem):
        parse_questions(text)


def test_rule_all_and_any() -> None:
    questions = parse_questions(QUESTIONS)
    assert screening_passes(questions=questions, rule="all", answers={0: "Yes", 1: "18 or over"})
    assert not screening_passes(questions=questions, rule="all", answers={0: "No", 1: "18 or over"})
    assert screening_passes(questions=questions, rule="any", answers={0: "No", 1: "18 or over"})
    assert not screening_passes(questions=questions, rule="any", answers={0: "No", 1: "Under 18"})
    assert not screening_passes(questions=questions, rule="all", answers={0: "Maybe", 1: "18 or over"})


def test_setting_refuses_a_bad_line_and_saves_nothing(prolific) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RecruitmentError, match="Line 2"):
        link_screening_set(
            link=prolific, consent_text="c", questions_text="Q? | *A | B\nbroken", rule="all", screened_out_code="X"
        )
    assert not LinkScreening.objects.exists()


# --- the participant's way ----------------------------------------------------------------------------------------


def test_passing_joins_after_consent_and_questions(prolific, campaign) -> None:  # type: ignore[no-untyped-def]
    _, joined = screened_on_prolific(prolific, native_speaker="Yes")
    assert joined.status_code == 303 and joined["Location"] == reverse("annotate-campaign", args=[campaign.pk])
    assert CrowdWorker.objects.filter(link=prolific, platform_worker_id=PID).exists()
    assert ScreeningOutcome.objects.get().outcome == "passed"


def test_failing_the_screening_ends_with_the_screened_out_code_and_takes_no_slot(prolific, campaign) -> None:  # type: ignore[no-untyped-def]
    client, page = screened_on_prolific(prolific, native_speaker="No")
    assert page.status_code == 200
    text = page.content.decode()
    assert "SCR-1" in text and PID not in text
    outcome = ScreeningOutcome.objects.get()
    assert outcome.outcome == "screened_out" and outcome.answers["Are you a native English speaker?"] == "No"
    assert not CrowdWorker.objects.exists()
    assert not Assignment.objects.filter(campaign=campaign).exclude(status=AssignmentStatus.FREE).exists()
    assert "_auth_user_id" not in client.session
    # Coming back with the same id, even in a new session, ends the same way: no second try.
    again_path, again = start(client, prolific_url(prolific, session="sess-2"))
    retry = client.post(again_path, {"arrival": again})
    assert "SCR-1" in retry.content.decode() and not CrowdWorker.objects.exists()


def test_declining_consent_ends_likewise(prolific) -> None:  # type: ignore[no-untyped-def]
    screen(prolific)
    client = Client()
    path, arrival = start(client, prolific_url(prolific))
    page = client.post(path, {"arrival": arrival, "step": "consent", "consent": "decline"})
    assert page.status_code == 200 and "SCR-1" in page.content.decode()
    assert "chose not to take part" in page.content.decode()
    assert ScreeningOutcome.objects.get().outcome == "declined"
    assert not CrowdWorker.objects.exists()


def test_questions_cannot_skip_consent(prolific) -> None:  # type: ignore[no-untyped-def]
    screen(prolific)
    client = Client()
    path, arrival = start(client, prolific_url(prolific))
    forged = client.post(
        path, {"arrival": arrival, "step": "screening", "consent_proof": "x", "q-0": "Yes", "q-1": "18 or over"}
    )
    assert forged.status_code == 200 and "consent-agree" in forged.content.decode()
    assert not CrowdWorker.objects.exists() and not ScreeningOutcome.objects.exists()


def test_mturk_screened_out_is_asked_to_return_the_hit(mturk) -> None:  # type: ignore[no-untyped-def]
    link_screening_set(link=mturk, consent_text="", questions_text=QUESTIONS, rule="all", screened_out_code="SCR-1")
    client = Client()
    path, arrival = start(client, mturk_url(mturk))
    questions = client.post(path, {"arrival": arrival})
    assert 'name="q-0"' in questions.content.decode()  # no consent text: straight to the questions
    page = client.post(path, {"arrival": arrival, "step": "screening", "q-0": "No", "q-1": "Under 18"})
    text = page.content.decode()
    assert 'id="mturk-return"' in text and "SCR-1" not in text
    assert "https://www.mturk.com;" in page.headers["Content-Security-Policy"]  # MTurk may frame it


# --- the researcher's page ----------------------------------------------------------------------------------------


def test_researcher_sets_consent_and_questions(prolific, researcher, campaign) -> None:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(researcher)
    url = reverse("crowd-link-screening", args=[campaign.pk, "prolific"])
    assert client.get(url).status_code == 200
    response = client.post(
        url, {"consent_text": "Agree?", "questions": QUESTIONS, "rule": "any", "screened_out_code": "NOPE"}
    )
    assert response.status_code == 303
    screening = LinkScreening.objects.get(link=prolific)
    assert screening.rule == "any" and screening.screened_out_code == "NOPE" and len(screening.questions) == 2
    page = client.get(url).content.decode()
    assert "*Yes" in page  # shown back in the form it was written in
    bad = client.post(url, {"consent_text": "", "questions": "broken", "rule": "all", "screened_out_code": "X"})
    assert bad.status_code == 422 and "broken" in bad.content.decode()


def test_screening_page_access(prolific, campaign, annotator1) -> None:  # type: ignore[no-untyped-def]
    url = reverse("crowd-link-screening", args=[campaign.pk, "prolific"])
    client = Client()
    assert client.get(url).status_code == 302  # to the login page
    client.force_login(annotator1)
    assert client.get(url).status_code == 403
    stranger = User.objects.create_user("other-researcher", is_staff=True)
    client.force_login(stranger)
    assert client.get(url).status_code == 404
    client.force_login(User.objects.get(username="researcher"))
    assert client.put(url).status_code == 405
    assert client.get(reverse("crowd-link-screening", args=[campaign.pk, "mturk"])).status_code == 404
