"""Every annotation view for every role: success, wrong method (405, or a redirect for a GET on a POST-only
step), no access (403/404, login for anonymous)."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.setup import campaign_create
from annotations.campaigns.tasks import task_candidates
from annotations.models import Assignment, AssignmentStatus, Rating, RatingOrigin, Skip, Submission
from tests.annotate.factories import SYSTEM_NAMES, make_campaign, make_dataset
from tests.conftest import CAST_PASSWORD, login

pytestmark = pytest.mark.django_db


@pytest.fixture
def campaign(researcher, annotators):
    dataset = make_dataset(owner=researcher, items=3, turns=2)
    return make_campaign(
        dataset,
        annotators,
        name="Voice study 2026",
        raters_per_item=2,
        show_reference=True,
        guidelines="# Read me\n*carefully*",
    )


@pytest.fixture
def leased(campaign, annotator1):
    return assignment_claim(campaign=campaign, user=annotator1)


def task_url(campaign, assignment, action: str = "") -> str:  # type: ignore[no-untyped-def]
    name = {"": "annotate-task", "submit": "annotate-submit", "skip": "annotate-skip"}[action]
    return reverse(name, args=[campaign.pk, assignment.task_id])


def complete_form(assignment, user, **extra) -> dict[str, str]:  # type: ignore[no-untyped-def]
    data = {"idempotency_key": "form-key-0001", "preference": "2", "rationale": "Candidate 2 is accurate"}
    for candidate in task_candidates(assignment=assignment, user_id=user.pk):
        data[f"r-{candidate.number}-1"] = "3"
        data[f"r-{candidate.number}-2"] = "na"
    data.update(extra)
    return data


def assert_login_redirect(response) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == 302 and reverse("login") in response["Location"]


# --- home -------------------------------------------------------------------------------------------------------


def test_home_annotator_sees_own_campaign_and_progress(campaign, annotator1):
    response = login(annotator1).get(reverse("home"))
    assert response.status_code == 200
    body = response.content.decode()
    assert campaign.name in body and "<progress" in body and "0 of 6 tasks done" in body
    assert reverse("annotate-next", args=[campaign.pk]) in body


def test_home_outsider_sees_no_campaign(campaign, outsider):
    body = login(outsider).get(reverse("home")).content.decode()
    assert campaign.name not in body and "not in any annotation campaign" in body


def test_home_researcher_sees_datasets_and_campaign_progress_link(campaign, researcher):
    body = login(researcher).get(reverse("home")).content.decode()
    assert reverse("campaign-progress", args=[campaign.pk]) in body and campaign.dataset.name in body


def test_home_anonymous_and_wrong_method(campaign, annotator1):
    assert_login_redirect(Client().get(reverse("home")))
    assert login(annotator1).post(reverse("home")).status_code == 405


# --- campaign page and next -------------------------------------------------------------------------------------


def test_campaign_page_roles(campaign, annotator1, outsider, researcher):
    url = reverse("annotate-campaign", args=[campaign.pk])
    response = login(annotator1).get(url)
    assert response.status_code == 200
    assert "<h1>Read me</h1>" in response.content.decode()  # guidelines rendered from markdown
    assert login(outsider).get(url).status_code == 404  # outside the pool: out of scope
    assert login(researcher).get(url).status_code == 404  # researchers are not in the pool
    assert login(annotator1).post(url).status_code == 405
    assert login(annotator1).get(reverse("annotate-campaign", args=[campaign.pk + 999])).status_code == 404
    assert_login_redirect(Client().get(url))


def test_next_leases_and_redirects_to_the_task(campaign, annotator1, outsider):
    url = reverse("annotate-next", args=[campaign.pk])
    client = login(annotator1)
    assert client.get(url)["Location"] == reverse("annotate-campaign", args=[campaign.pk])  # GET never leases
    assert not Assignment.objects.filter(annotator=annotator1).exists()
    response = client.post(url)
    assert response.status_code == 303
    assignment = Assignment.objects.get(annotator=annotator1, status=AssignmentStatus.LEASED)
    assert response["Location"] == task_url(campaign, assignment)
    assert client.post(url)["Location"] == task_url(campaign, assignment)  # resume
    assert login(outsider).post(url).status_code == 404
    assert_login_redirect(Client().post(url))


def test_next_when_nothing_is_left(researcher, annotator1):
    campaign = make_campaign(make_dataset(owner=researcher, items=1), [annotator1], raters_per_item=1)
    client = login(annotator1)
    lease = assignment_claim(campaign=campaign, user=annotator1)
    client.post(task_url(campaign, lease, "submit"), complete_form(lease, annotator1))
    response = client.post(reverse("annotate-next", args=[campaign.pk]), follow=True)
    assert "no more tasks for you" in response.content.decode()


def test_submitting_the_last_task_says_saved_without_promising_a_next_one(researcher, annotator1):
    campaign = make_campaign(make_dataset(owner=researcher, items=2), [annotator1], raters_per_item=1)
    client = login(annotator1)
    first = assignment_claim(campaign=campaign, user=annotator1)
    body = client.post(task_url(campaign, first, "submit"), complete_form(first, annotator1), follow=True)
    assert "Saved. Here is your next task." in body.content.decode()
    last = Assignment.objects.get(annotator=annotator1, status=AssignmentStatus.LEASED)
    form = complete_form(last, annotator1, idempotency_key="form-key-0002")
    body = client.post(task_url(campaign, last, "submit"), form, follow=True)
    text = body.content.decode()
    assert "Saved." in text and "no more tasks for you" in text
    assert "Here is your next task" not in text


# --- task page --------------------------------------------------------------------------------------------------


def test_task_page_shows_blinded_shuffled_candidates(campaign, leased, annotator1):
    response = login(annotator1).get(task_url(campaign, leased))
    assert response.status_code == 200
    body = response.content.decode()
    for number in range(1, 5):
        assert f"Candidate {number}" in body
    for key, model in SYSTEM_NAMES.items():
        assert key not in body and model not in body
    assert "unieval" not in body  # judge names and scores stay hidden
    assert "Reference answer" in body and "Passage A" in body
    assert 'data-key="n"' in body  # N/A offered where the aspect allows missing …
    factuality = re.search(r'<div class="scale-buttons" role="radiogroup" id="r-1-1".*?</div>', body, re.S)
    assert factuality and "N/A" not in factuality.group(0)  # … and only there
    assert "Keyboard shortcuts" in body
    candidates = task_candidates(assignment=leased, user_id=annotator1.pk)
    positions = [body.index(c.text) for c in candidates]
    assert positions == sorted(positions)  # shown in this annotator's order


def test_task_page_refuses_anyone_without_the_lease(campaign, leased, annotator2, outsider, researcher):
    url = task_url(campaign, leased)
    assert login(annotator2).get(url).status_code == 403  # in the pool, but not leased to them
    assert login(outsider).get(url).status_code == 404
    assert login(researcher).get(url).status_code == 404
    assert_login_redirect(Client().get(url))


def test_task_page_wrong_method_and_foreign_task(researcher, campaign, leased, annotator1):
    client = login(annotator1)
    assert client.post(task_url(campaign, leased)).status_code == 405
    other = campaign_create(name="other", dataset=make_dataset("other", owner=researcher), annotators=[annotator1])
    foreign = other.tasks.first()
    assert client.get(reverse("annotate-task", args=[campaign.pk, foreign.pk])).status_code == 404


def test_second_turn_shows_the_conversation(researcher, annotator1):
    campaign = make_campaign(make_dataset(owner=researcher, items=1, turns=2), [annotator1], raters_per_item=1)
    client = login(annotator1)
    seen = []
    for _ in range(2):
        lease = assignment_claim(campaign=campaign, user=annotator1)
        body = client.get(task_url(campaign, lease)).content.decode()
        seen.append((lease.task.turn.index, body))
        client.post(
            task_url(campaign, lease, "submit"), complete_form(lease, annotator1, idempotency_key=f"turn-{lease.pk}-ab")
        )
    second = dict(seen)[1]
    assert "Earlier question 1" in second and "Question 0 turn 0" in second
    assert "Its answers to the earlier questions" in second and "Answer number" in second


# --- submit -----------------------------------------------------------------------------------------------------


def test_submit_saves_and_loads_the_next_task(campaign, leased, annotator1):
    client = login(annotator1)
    response = client.post(task_url(campaign, leased, "submit"), complete_form(leased, annotator1))
    assert response.status_code == 303
    nxt = Assignment.objects.get(annotator=annotator1, status=AssignmentStatus.LEASED)
    assert nxt.task_id != leased.task_id and response["Location"] == task_url(campaign, nxt)
    assert Rating.objects.filter(origin=RatingOrigin.APP).count() == 8
    assert Submission.objects.get().rationale == "Candidate 2 is accurate"
    assert client.get(task_url(campaign, leased, "submit")).status_code == 403  # done: no longer the user's task


def test_double_submit_changes_nothing(campaign, leased, annotator1):
    client = login(annotator1)
    data = complete_form(leased, annotator1)
    first = client.post(task_url(campaign, leased, "submit"), data)
    second = client.post(task_url(campaign, leased, "submit"), data)
    assert first.status_code == second.status_code == 303
    assert Submission.objects.count() == 1 and Rating.objects.filter(origin=RatingOrigin.APP).count() == 8


def test_invalid_submit_lists_every_missing_field_and_keeps_values(campaign, leased, annotator1):
    data = {"idempotency_key": "keep-values-1", "r-1-1": "2", "r-2-2": "na", "comment": "my <b>comment</b>"}
    response = login(annotator1).post(task_url(campaign, leased, "submit"), data)
    assert response.status_code == 422
    body = response.content.decode()
    summary = re.search(r'<div class="error-summary".*?</div>', body, re.S).group(0)
    for field in ["r-1-2", "r-2-1", "r-3-1", "r-3-2", "r-4-1", "r-4-2", "preference", "rationale"]:
        assert f'href="#{field}"' in summary
    assert 'href="#r-1-1"' not in summary and 'href="#r-2-2"' not in summary
    assert '<input type="radio" name="r-1-1" value="2" data-key="2" checked>' in body
    assert '<input type="radio" name="r-2-2" value="na" data-key="n" checked>' in body
    assert "my &lt;b&gt;comment&lt;/b&gt;</textarea>" in body
    assert 'value="keep-values-1"' in body  # same key, so a later fix cannot double-count
    assert not Submission.objects.exists()


@pytest.mark.parametrize("field", ["rationale", "comment"])
def test_submit_with_a_nul_character_is_refused_not_a_500(campaign, leased, annotator1, field):
    client = Client(raise_request_exception=False)
    client.force_login(annotator1)
    body = complete_form(leased, annotator1, **{field: "accurate\x00"})
    response = client.post(task_url(campaign, leased, "submit"), body)
    # the request hygiene check answers before the view, naming the field
    assert response.status_code == 400
    assert field in response.content.decode()
    assert not Submission.objects.exists() and not Rating.objects.filter(origin=RatingOrigin.APP).exists()


def test_htmx_submit_gets_a_partial_or_a_client_redirect(campaign, leased, annotator1):
    client = login(annotator1)
    bad = client.post(task_url(campaign, leased, "submit"), {"idempotency_key": "htmx-key-01"}, HTTP_HX_REQUEST="true")
    assert bad.status_code == 422
    assert bad.content.decode().lstrip().startswith('<form id="task-form"') and b"<html" not in bad.content
    good = client.post(task_url(campaign, leased, "submit"), complete_form(leased, annotator1), HTTP_HX_REQUEST="true")
    assert good.status_code == 200 and good["HX-Redirect"].startswith(f"/annotate/{campaign.pk}/tasks/")


def test_submit_for_a_task_not_leased_to_you_is_403(campaign, leased, annotator1, annotator2, outsider):
    data = complete_form(leased, annotator1)
    assert login(annotator2).post(task_url(campaign, leased, "submit"), data).status_code == 403
    assert login(outsider).post(task_url(campaign, leased, "submit"), data).status_code == 404
    assert_login_redirect(Client().post(task_url(campaign, leased, "submit"), data))
    assert not Submission.objects.exists()


def test_submit_ignores_over_posted_fields(campaign, leased, annotator1, annotator2):
    data = complete_form(leased, annotator1, rater="1", annotator=str(annotator2.pk), status="free", is_staff="1")
    assert login(annotator1).post(task_url(campaign, leased, "submit"), data).status_code == 303
    assert set(Rating.objects.filter(origin=RatingOrigin.APP).values_list("rater__user", flat=True)) == {annotator1.pk}
    annotator1.refresh_from_db()
    assert not annotator1.is_staff


def test_submit_refuses_ratings_for_candidates_not_shown(campaign, leased, annotator1):
    data = complete_form(leased, annotator1, **{"r-9-1": "3"})
    response = login(annotator1).post(task_url(campaign, leased, "submit"), data)
    assert response.status_code == 422 and not Submission.objects.exists()


def test_submit_needs_csrf(campaign, leased, annotator1):
    client = Client(enforce_csrf_checks=True)
    client.login(username=annotator1.username, password=CAST_PASSWORD)
    assert client.post(task_url(campaign, leased, "submit"), complete_form(leased, annotator1)).status_code == 403
    assert client.post(reverse("annotate-next", args=[campaign.pk])).status_code == 403


def test_removed_annotator_is_refused_at_once(campaign, leased, annotator1):
    from annotations.campaigns.setup import campaign_annotator_remove

    campaign_annotator_remove(campaign=campaign, user=annotator1)
    client = login(annotator1)
    assert client.get(task_url(campaign, leased)).status_code == 404  # no longer in scope
    assert client.post(task_url(campaign, leased, "submit"), complete_form(leased, annotator1)).status_code == 404
    assert campaign.name not in client.get(reverse("home")).content.decode()


# --- skip -------------------------------------------------------------------------------------------------------


def test_skip_with_reason(campaign, leased, annotator1, annotator2):
    client = login(annotator1)
    response = client.post(task_url(campaign, leased, "skip"), {"reason": "offensive", "note": "rude"})
    assert response.status_code == 303
    assert Skip.objects.get(annotator=annotator1).reason == "offensive"
    assert client.get(task_url(campaign, leased, "skip")).status_code == 403  # skipped: no longer the user's task
    assert login(annotator2).post(task_url(campaign, leased, "skip"), {"reason": "other"}).status_code == 403


def test_skip_without_reason_goes_back_to_the_task(campaign, leased, annotator1):
    response = login(annotator1).post(task_url(campaign, leased, "skip"), {"reason": ""})
    assert response.status_code == 303 and response["Location"] == task_url(campaign, leased)
    assert not Skip.objects.exists()


# --- researcher progress ----------------------------------------------------------------------------------------


def test_progress_page_for_researchers_only(campaign, leased, researcher, annotator1, outsider, django_user_model):
    url = reverse("campaign-progress", args=[campaign.pk])
    login(annotator1).post(task_url(campaign, leased, "submit"), complete_form(leased, annotator1))
    response = login(researcher).get(url)
    assert response.status_code == 200
    body = response.content.decode()
    assert "annotator1" in body and "Median seconds per task" in body and "1/2" in body
    assert login(annotator1).get(url).status_code == 403
    assert login(outsider).get(url).status_code == 403
    other = django_user_model.objects.create_user("other-researcher", password=CAST_PASSWORD, is_staff=True)
    assert login(other).get(url).status_code == 404  # not their dataset
    assert login(researcher).post(url).status_code == 405
    assert_login_redirect(Client().get(url))


# --- untrusted text ---------------------------------------------------------------------------------------------


def test_hostile_dataset_renders_inert_on_every_annotator_page(researcher, annotator1):
    from tests.security.hostile import import_hostile_dataset
    from tests.security.html_checks import assert_no_active_payload

    dataset = import_hostile_dataset(owner=researcher).dataset
    campaign = campaign_create(
        name="hostile",
        dataset=dataset,
        raters_per_item=1,
        annotators=[annotator1],
        show_reference=True,
        guidelines='<script data-pwn="g">alert(1)</script> [x](javascript:alert(1))',
    )
    client = login(annotator1)
    assert_no_active_payload(client.get(reverse("home")).content, where="home")
    assert_no_active_payload(client.get(reverse("annotate-campaign", args=[campaign.pk])).content, where="campaign")
    pages = 0
    while pages < 12:
        lease = assignment_claim(campaign=campaign, user=annotator1)
        if lease is None:
            break
        assert_no_active_payload(client.get(task_url(campaign, lease)).content, where=f"task {lease.task_id}")
        bad = client.post(task_url(campaign, lease, "submit"), {"idempotency_key": "hostile-0001"}, HTTP_HX_REQUEST="1")
        assert_no_active_payload(bad.content, where="partial")
        client.post(task_url(campaign, lease, "skip"), {"reason": "other"})
        pages += 1
    assert pages == 12
    assert_no_active_payload(login(researcher).get(reverse("campaign-progress", args=[campaign.pk])).content)


def test_a_task_of_one_answer_asks_no_preference(researcher, annotator1):
    # The campaign asks for a preference, but a task showing one answer has nothing to choose between.
    campaign = make_campaign(
        make_dataset(owner=researcher, items=2, systems=1), [annotator1], raters_per_item=1, ask_preference=True
    )
    client = login(annotator1)
    leased = assignment_claim(campaign=campaign, user=annotator1)
    page = client.get(task_url(campaign, leased)).content.decode()
    assert 'name="preference"' not in page and "Reason for your ratings" in page
    form = complete_form(leased, annotator1)
    del form["preference"]
    assert client.post(task_url(campaign, leased, "submit"), form).status_code == 303
    submission = Submission.objects.get()
    assert submission.preferred_response_id is None and submission.rationale == "Candidate 2 is accurate"


def test_a_task_of_two_answers_still_needs_the_preference(campaign, leased, annotator1):
    form = complete_form(leased, annotator1)
    del form["preference"]
    response = login(annotator1).post(task_url(campaign, leased, "submit"), form)
    assert response.status_code == 422 and 'href="#preference"' in response.content.decode()
    assert not Submission.objects.exists()
