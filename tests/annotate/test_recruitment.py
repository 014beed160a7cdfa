"""Study links: joining through Prolific, MTurk and signed invites, quotas in the claim, completion, the researcher's
recruitment panel, and what a worker account can and cannot reach."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse

from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.setup import campaign_annotator_remove
from annotations.gold.models import GoldItem
from annotations.models import Assignment, AssignmentStatus, Campaign, Rater
from annotations.recruitment import ratelimit
from annotations.recruitment.entry import BadParameter, invite_signature, platform_param
from annotations.recruitment.models import CrowdSession, CrowdWorker, Platform, RecruitmentLink
from annotations.recruitment.selectors import worker_tasks_left
from annotations.recruitment.services import crowd_worker_join, link_create
from tests.annotate.factories import SYSTEM_NAMES, make_campaign, make_dataset
from tests.annotate.test_views import complete_form
from tests.conftest import login

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_counters")]

PID = "5f0c0ffee0000000000canary"  # a canary platform id: it must never show on a page or in an account name


@pytest.fixture
def campaign(researcher: User, annotator1: User) -> Campaign:
    dataset = make_dataset(owner=researcher, items=4)
    return make_campaign(dataset, [annotator1], name="Crowd study", raters_per_item=2, guidelines="Be *careful*.")


@pytest.fixture
def prolific(campaign: Campaign, researcher: User) -> RecruitmentLink:
    return link_create(
        campaign=campaign,
        platform=Platform.PROLIFIC,
        created_by=researcher,
        completion_code="C0DE42",
        completion_url="https://app.prolific.com/submissions/complete?cc=C0DE42",
    )


@pytest.fixture
def invite(campaign: Campaign, researcher: User) -> RecruitmentLink:
    return link_create(campaign=campaign, platform=Platform.INVITE, created_by=researcher, completion_code="LAB")


def prolific_url(link: RecruitmentLink, pid: str = PID, session: str = "sess-1", study: str = "study-1") -> str:
    query = urlencode({"PROLIFIC_PID": pid, "STUDY_ID": study, "SESSION_ID": session})
    return f"{reverse('crowd-entry', args=[link.token])}?{query}"


def mturk_url(link: RecruitmentLink, **params: str) -> str:
    query = {
        "workerId": "A1WORKER",
        "assignmentId": "ASSIGN1",
        "hitId": "HIT1",
        "turkSubmitTo": "https://www.mturk.com",
    }
    query.update(params)
    return f"{reverse('crowd-mturk', args=[link.token])}?{urlencode(query)}"


def arrival_of(response: Any) -> str:
    body = response.content.decode()
    marker = 'name="arrival" value="'
    assert marker in body, body[:500]
    return body.split(marker, 1)[1].split('"', 1)[0]


def join(client: Client, url: str) -> Any:
    """GET the start page, then POST its Start form, as a browser does."""
    start = client.get(url)
    assert start.status_code == 200, start.content[:300]
    return client.post(url.split("?", 1)[0], {"arrival": arrival_of(start)})


def joined_worker(link: RecruitmentLink) -> tuple[Client, User]:
    """A new browser that joined through the Prolific link, and the worker account it got."""
    client = Client()
    join(client, prolific_url(link))
    return client, CrowdWorker.objects.get().user


def row_counts() -> dict[str, int]:
    counts = {}
    tables = {model._meta.db_table for model in apps.get_models(include_auto_created=True)}
    with connection.cursor() as cursor:
        existing = set(connection.introspection.table_names(cursor))
        for table in sorted(tables & existing):
            cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")  # noqa: S608
            counts[table] = cursor.fetchone()[0]
    return counts


def submit_current(client: Client, campaign: Campaign, user: User) -> Any:
    slot = Assignment.objects.get(campaign=campaign, annotator=user, status=AssignmentStatus.LEASED)
    url = reverse("annotate-submit", args=[campaign.pk, slot.task_id])
    return client.post(url, complete_form(slot, user, idempotency_key=f"key-{slot.pk:08d}"))


def next_task(client: Client, campaign: Campaign) -> Any:
    return client.post(reverse("annotate-next", args=[campaign.pk]))


# --- Prolific ---------------------------------------------------------------------------------------------------


def test_prolific_start_page_writes_nothing_and_join_creates_a_pseudonymous_worker(prolific, campaign):
    client = Client()
    before = row_counts()
    start = client.get(prolific_url(prolific))
    assert start.status_code == 200 and row_counts() == before
    assert PID not in start.content.decode()
    response = client.post(reverse("crowd-entry", args=[prolific.token]), {"arrival": arrival_of(start)})
    assert response.status_code == 303 and response["Location"] == reverse("annotate-campaign", args=[campaign.pk])
    worker = CrowdWorker.objects.get()
    user = worker.user
    assert worker.platform_worker_id == PID and PID not in user.username and user.username.startswith("worker-")
    assert not user.has_usable_password() and not user.is_staff and not user.is_superuser
    assert campaign.annotators.filter(pk=user.pk).exists()
    session = CrowdSession.objects.get()
    assert (session.session_key, session.study_key, session.completed_at) == ("sess-1", "study-1", None)
    page = client.get(reverse("annotate-campaign", args=[campaign.pk]))
    assert page.status_code == 200 and PID not in page.content.decode()


def test_join_rotates_the_session_key(prolific):
    client = Client()
    start = client.get(prolific_url(prolific))
    client.cookies["sessionid"] = "a-fixated-session-key-from-an-attacker"
    client.post(reverse("crowd-entry", args=[prolific.token]), {"arrival": arrival_of(start)})
    assert client.cookies["sessionid"].value != "a-fixated-session-key-from-an-attacker"


def test_returning_worker_resumes_and_a_second_worker_is_someone_else(prolific, campaign):
    first = Client()
    join(first, prolific_url(prolific))
    next_task(first, campaign)
    user = CrowdWorker.objects.get().user
    lease = Assignment.objects.get(annotator=user, status=AssignmentStatus.LEASED)
    again = Client()  # another browser, the same Prolific id, a new session
    join(again, prolific_url(prolific, session="sess-2"))
    assert CrowdWorker.objects.count() == 1 and CrowdSession.objects.count() == 2
    response = next_task(again, campaign)
    assert response["Location"] == reverse("annotate-task", args=[campaign.pk, lease.task_id])
    other = Client()
    join(other, prolific_url(prolific, pid="another-worker", session="sess-3"))
    assert CrowdWorker.objects.count() == 2
    other_user = CrowdWorker.objects.get(platform_worker_id="another-worker").user
    assert other_user.pk != user.pk
    next_task(other, campaign)
    other_lease = Assignment.objects.get(annotator=other_user, status=AssignmentStatus.LEASED)
    assert other_lease.pk != lease.pk


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ({"STUDY_ID": "s", "SESSION_ID": "x"}, "PROLIFIC_PID"),
        ({"PROLIFIC_PID": "  ", "STUDY_ID": "s", "SESSION_ID": "x"}, "PROLIFIC_PID"),
        ({"PROLIFIC_PID": "p", "STUDY_ID": "s" * 201, "SESSION_ID": "x"}, "STUDY_ID"),
        ({"PROLIFIC_PID": "p", "STUDY_ID": "s", "SESSION_ID": "a\x00b"}, "SESSION_ID"),
        ({"PROLIFIC_PID": PID, "STUDY_ID": "s", "SESSION_ID": ""}, "SESSION_ID"),
    ],
)
def test_bad_prolific_parameters_get_a_page_naming_them(prolific, query, name, caplog):
    before = row_counts()
    with caplog.at_level(logging.DEBUG):
        response = Client().get(f"{reverse('crowd-entry', args=[prolific.token])}?{urlencode(query)}")
    assert response.status_code == 400
    assert name in response.content.decode()
    assert row_counts() == before
    assert caplog.records and PID not in caplog.text  # the refusal is logged, the platform id is not


def test_a_lone_surrogate_in_a_platform_parameter_is_named():
    # The request middleware refuses it in a real link; the reader refuses it for any other caller too.
    with pytest.raises(BadParameter) as refused:
        platform_param({"SESSION_ID": "a\ud800b"}, "SESSION_ID")
    assert (refused.value.name, str(refused.value.problem)) == ("SESSION_ID", "contains an unpaired surrogate")


def test_an_altered_start_form_is_refused(prolific):
    client = Client()
    start = client.get(prolific_url(prolific))
    forged = arrival_of(start)[:-3] + "abc"
    response = client.post(reverse("crowd-entry", args=[prolific.token]), {"arrival": forged})
    assert response.status_code == 400 and CrowdWorker.objects.count() == 0


def test_a_start_form_signed_for_another_link_is_refused(prolific, invite):
    client = Client()
    start = client.get(prolific_url(prolific))
    response = client.post(reverse("crowd-entry", args=[invite.token]), {"arrival": arrival_of(start)})
    assert response.status_code == 400 and CrowdWorker.objects.count() == 0


def test_unknown_token_is_404_and_wrong_method_405(prolific):
    assert Client().get(reverse("crowd-entry", args=["x" * 43])).status_code == 404
    assert Client().put(prolific_url(prolific)).status_code == 405
    assert Client().delete(reverse("crowd-mturk", args=[prolific.token])).status_code == 405
    assert Client().get(reverse("crowd-mturk", args=[prolific.token])).status_code == 404


def test_closed_link_admits_no_newcomer_but_resumes_a_worker(prolific, campaign):
    known = Client()
    join(known, prolific_url(prolific))
    prolific.is_open = False
    prolific.save()
    response = Client().get(prolific_url(prolific, pid="newcomer"))
    assert response.status_code == 410 and "closed" in response.content.decode()
    assert join(Client(), prolific_url(prolific, session="sess-9")).status_code == 303
    assert CrowdWorker.objects.count() == 1


def test_a_worker_removed_from_the_pool_cannot_rejoin(prolific, campaign):
    join(Client(), prolific_url(prolific))
    user = CrowdWorker.objects.get().user
    campaign_annotator_remove(campaign=campaign, user=user)
    response = join(Client(), prolific_url(prolific, session="sess-2"))
    assert response.status_code == 409 and "no longer" in response.content.decode()
    assert not campaign.annotators.filter(pk=user.pk).exists() and CrowdSession.objects.count() == 1


def test_closed_campaign_says_so(prolific, campaign):
    campaign.is_active = False
    campaign.save()
    assert Client().get(prolific_url(prolific)).status_code == 410


def test_joins_are_rate_limited_per_address(prolific, monkeypatch):
    monkeypatch.setattr(ratelimit, "JOIN_LIMIT", 3)
    client = Client()
    for n in range(3):
        assert join(client, prolific_url(prolific, pid=f"w{n}", session=f"s{n}")).status_code == 303
    response = client.get(prolific_url(prolific, pid="w9"))
    assert response.status_code == 429 and CrowdWorker.objects.count() == 3


def test_a_signed_in_researcher_is_asked_to_sign_out(prolific, researcher, annotator1):
    for user in (researcher, annotator1):
        client = login(user)
        response = client.get(prolific_url(prolific))
        assert response.status_code == 403 and "Sign out first" in response.content.decode()
        start = Client().get(prolific_url(prolific))
        posted = client.post(reverse("crowd-entry", args=[prolific.token]), {"arrival": arrival_of(start)})
        assert posted.status_code == 403
    assert CrowdWorker.objects.count() == 0


# --- quotas and completion --------------------------------------------------------------------------------------


def test_worker_quota_ends_in_the_claim_and_sends_to_the_completion_page(prolific, campaign):
    prolific.tasks_per_worker = 2
    prolific.save()
    client, user = joined_worker(prolific)
    assert worker_tasks_left(campaign, user) == 2
    next_task(client, campaign)
    assert submit_current(client, campaign, user).status_code == 303
    response = submit_current(client, campaign, user)
    assert response.status_code == 303 and response["Location"] == reverse("crowd-done")
    assert worker_tasks_left(campaign, user) == 0 and assignment_claim(campaign=campaign, user=user) is None
    assert CrowdSession.objects.get().completed_at is not None
    done = client.get(reverse("crowd-done"))
    body = done.content.decode()
    assert done.status_code == 200 and "C0DE42" in body
    assert 'http-equiv="refresh"' in body and prolific.completion_url in body and PID not in body
    # Coming back later in a new session does not lift the total quota.
    join(client, prolific_url(prolific, session="sess-2"))
    assert next_task(client, campaign)["Location"] == reverse("crowd-done")


def test_session_quota_counts_within_the_session(prolific, campaign):
    prolific.tasks_per_session = 1
    prolific.save()
    client, user = joined_worker(prolific)
    next_task(client, campaign)
    assert submit_current(client, campaign, user)["Location"] == reverse("crowd-done")
    join(client, prolific_url(prolific, session="sess-2"))
    assert worker_tasks_left(campaign, user) == 1
    assert next_task(client, campaign)["Location"].startswith(f"/annotate/{campaign.pk}/tasks/")


def test_no_task_left_completes_without_a_quota(prolific, campaign):
    client, user = joined_worker(prolific)
    for _ in range(4):
        next_task(client, campaign)
        submit_current(client, campaign, user)
    assert CrowdSession.objects.get().completed_at is not None
    assert Assignment.objects.filter(annotator=user, status=AssignmentStatus.SUBMITTED).count() == 4


def test_completion_page_before_the_end_and_for_others(prolific, campaign, annotator1):
    client = Client()
    join(client, prolific_url(prolific))
    response = client.get(reverse("crowd-done"))
    assert response.status_code == 200 and "C0DE42" not in response.content.decode()
    assert client.post(reverse("crowd-done")).status_code == 405
    assert login(annotator1).get(reverse("crowd-done")).status_code == 404
    assert Client().get(reverse("crowd-done")).status_code == 302


def test_account_annotators_have_no_quota(campaign, annotator1, prolific):
    prolific.tasks_per_worker = 1
    prolific.save()
    assert worker_tasks_left(campaign, annotator1) is None


def test_worker_ratings_carry_a_pseudonym_not_the_platform_id(prolific, campaign):
    client, user = joined_worker(prolific)
    next_task(client, campaign)
    submit_current(client, campaign, user)
    rater = Rater.objects.get(user=user)
    assert PID not in rater.pseudonym and PID not in user.username


# --- MTurk ------------------------------------------------------------------------------------------------------


def test_mturk_preview_stores_nothing_and_shows_an_example(mturk, campaign):
    client = Client()
    before = row_counts()
    response = client.get(mturk_url(mturk, assignmentId="ASSIGNMENT_ID_NOT_AVAILABLE"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "Preview" in body and "careful" in body
    # The real task form, as the worker will get it, but inert: nothing in it can be focused, changed or sent.
    assert body.count("<form") == 1 and 'class="task-form"' in body
    assert body.index('<div class="task-preview" inert>') < body.index("<form")
    assert 'class="scale-buttons"' in body and 'name="preference"' in body and 'id="rationale"' in body
    assert "Submit and go to the next task" in body
    assert not any(name in body for key, name in SYSTEM_NAMES.items()) and not any(key in body for key in SYSTEM_NAMES)
    assert "frame-ancestors https://" in response["Content-Security-Policy"]
    assert "X-Frame-Options" not in response
    assert row_counts() == before
    assert "sessionid" not in response.cookies


def test_mturk_join_and_submit_back(mturk, campaign):
    client = Client()
    url = mturk_url(mturk, turkSubmitTo="https://workersandbox.mturk.com")
    assert join(client, url).status_code == 303
    session = CrowdSession.objects.get()
    assert (session.session_key, session.study_key, session.submit_to) == (
        "ASSIGN1",
        "HIT1",
        "https://workersandbox.mturk.com",
    )
    user = session.worker.user
    mturk.tasks_per_worker = 1
    mturk.save()
    next_task(client, campaign)
    assert submit_current(client, campaign, user)["Location"] == reverse("crowd-done")
    done = client.get(reverse("crowd-done"))
    body = done.content.decode()
    assert 'action="https://workersandbox.mturk.com/mturk/externalSubmit"' in body
    assert 'name="assignmentId" value="ASSIGN1"' in body and "MT-OK" in body and "crowd_submit.js" in body
    assert "form-action 'self' https://workersandbox.mturk.com" in done["Content-Security-Policy"]


def test_mturk_inside_the_frame_opens_the_tasks_in_a_tab(mturk):
    before = row_counts()
    response = Client().get(mturk_url(mturk), HTTP_SEC_FETCH_DEST="iframe")
    body = response.content.decode()
    assert response.status_code == 200 and 'target="_blank"' in body and "<form" not in body
    assert "frame-ancestors https://" in response["Content-Security-Policy"] and "X-Frame-Options" not in response
    assert row_counts() == before
    top = Client().get(mturk_url(mturk), HTTP_SEC_FETCH_DEST="document")
    assert 'name="arrival"' in top.content.decode()


@pytest.mark.parametrize(
    "submit_to",
    ["https://evil.example", "http://www.mturk.com", "https://www.mturk.com/other", "https://u@www.mturk.com", "x"],
)
def test_mturk_refuses_foreign_submit_addresses(mturk, submit_to):
    response = Client().get(mturk_url(mturk, turkSubmitTo=submit_to))
    assert response.status_code == 400 and "turkSubmitTo" in response.content.decode()


def test_mturk_accepts_loopback_submit_addresses(mturk):
    assert Client().get(mturk_url(mturk, turkSubmitTo="http://127.0.0.1:8123")).status_code == 200


# --- signed invites ---------------------------------------------------------------------------------------------


def test_signed_invite_binds_the_label_and_a_tampered_one_is_refused(invite, campaign):
    base = reverse("crowd-entry", args=[invite.token])
    signature = invite_signature(invite, "participant-7")
    assert join(Client(), f"{base}?{urlencode({'invite': signature})}").status_code == 303
    assert join(Client(), f"{base}?{urlencode({'invite': signature})}").status_code == 303
    assert CrowdWorker.objects.get().platform_worker_id == "invite:participant-7"
    tampered = signature.replace("participant", "x", 1) if "participant" in signature else signature[:-2] + "zz"
    response = Client().get(f"{base}?{urlencode({'invite': tampered})}")
    assert response.status_code == 403 and "altered" in response.content.decode()
    assert CrowdWorker.objects.count() == 1


def test_generic_invite_gives_each_browser_its_own_identity(invite, campaign):
    base = reverse("crowd-entry", args=[invite.token])
    browser = Client()
    join(browser, base)
    join(browser, base)  # the same browser, signed in through this link, keeps its identity
    assert CrowdWorker.objects.count() == 1
    join(Client(), base)
    assert CrowdWorker.objects.count() == 2


# --- the researcher's panel -------------------------------------------------------------------------------------


def test_panel_lists_links_with_the_platform_query_and_pseudonyms(prolific, mturk, campaign, researcher):
    worker_session = crowd_worker_join(link=prolific, platform_worker_id=PID, session_key="s1")
    response = login(researcher).get(reverse("campaign-progress", args=[campaign.pk]))
    body = response.content.decode()
    assert response.status_code == 200
    expected = f"http://testserver/join/{prolific.token}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
    assert expected.replace("{", "&#x7B;") in body or expected in body
    assert f"http://testserver/join/{mturk.token}/mturk/" in body
    assert worker_session.worker.user.username in body and PID not in body


def test_researcher_creates_and_edits_links(campaign, researcher):
    client = login(researcher)
    url = reverse("crowd-link-create", args=[campaign.pk])
    response = client.post(url, {"platform": "prolific", "tasks_per_worker": "5", "completion_url": "https://x.test/c"})
    assert response.status_code == 303
    link = RecruitmentLink.objects.get()
    assert (link.platform, link.tasks_per_worker, link.is_open) == ("prolific", 5, True)
    assert len(link.token) >= 43 and link.completion_code
    assert client.post(url, {"platform": "prolific"}).status_code == 303
    assert RecruitmentLink.objects.count() == 1
    update = reverse("crowd-link-update", args=[campaign.pk, "prolific"])
    client.post(update, {"tasks_per_session": "2", "completion_code": "NEW", "completion_url": ""})
    link.refresh_from_db()
    assert (link.is_open, link.tasks_per_session, link.tasks_per_worker) == (False, 2, None)
    assert link.completion_code == "NEW"
    client.post(update, {"is_open": "1", "tasks_per_session": "0"})
    link.refresh_from_db()
    assert link.is_open is False and link.tasks_per_session == 2
    client.post(update, {"is_open": "1", "completion_url": "javascript:alert(1)"})
    link.refresh_from_db()
    assert link.is_open is False
    assert client.get(url).status_code == 405 and client.get(update).status_code == 405


def test_researcher_makes_signed_invites(invite, campaign, researcher):
    response = login(researcher).post(reverse("crowd-invites", args=[campaign.pk]), {"labels_text": "ann\nbob\n\nann"})
    body = response.content.decode()
    assert response.status_code == 200 and body.count("?invite=") == 2
    assert login(researcher).get(reverse("crowd-invites", args=[campaign.pk])).status_code == 405


def test_recruitment_forms_refuse_everyone_else(prolific, campaign, annotator1, outsider, django_user_model):
    other = django_user_model.objects.create_user("researcher-b", password="x-long-password-1", is_staff=True)
    worker_client = Client()
    join(worker_client, prolific_url(prolific))
    urls = [
        reverse("crowd-link-create", args=[campaign.pk]),
        reverse("crowd-link-update", args=[campaign.pk, "prolific"]),
        reverse("crowd-invites", args=[campaign.pk]),
    ]
    clients = {"annotator": login(annotator1), "outsider": login(outsider), "worker": worker_client}
    other_client = Client()
    other_client.force_login(other)
    for url in urls:
        for name, client in clients.items():
            assert client.post(url, {"platform": "mturk", "is_open": ""}).status_code == 403, (url, name)
        assert other_client.post(url, {"platform": "mturk"}).status_code == 404
        assert Client().post(url, {"platform": "mturk"}).status_code == 302
    prolific.refresh_from_db()
    assert prolific.is_open and RecruitmentLink.objects.count() == 1


# --- a worker reaches nothing else ------------------------------------------------------------------------------


def test_a_worker_reaches_nothing_outside_their_campaign(prolific, campaign, researcher):
    other = make_campaign(campaign.dataset, [], name="Other campaign")
    client = Client()
    join(client, prolific_url(prolific))
    assert client.get(reverse("annotate-campaign", args=[other.pk])).status_code == 404
    assert client.post(reverse("annotate-next", args=[other.pk])).status_code == 404
    assert client.get(reverse("campaign-progress", args=[campaign.pk])).status_code == 403
    assert client.get(reverse("dashboard-index")).status_code in {302, 403}
    assert client.get("/admin/").status_code == 302
    assert client.get(reverse("dataset-export", args=[campaign.dataset_id, "jsonl"])).status_code == 403
    assert client.get(f"/api/datasets/{campaign.dataset_id}/export/").status_code == 403
    assert client.get(reverse("api-token-mine")).status_code == 403
    assert client.delete(reverse("api-token-mine")).status_code == 403
    home = client.get(reverse("home")).content.decode()
    assert campaign.name in home and "Other campaign" not in home


def test_gold_tasks_count_toward_the_quota(researcher):
    dataset = make_dataset("gold quota", owner=researcher, items=4)
    item = dataset.items.order_by("pk").first()
    GoldItem.objects.create(item=item, expected={}, tolerance=1, created_by=researcher)
    campaign = make_campaign(dataset, [], name="Gold quota", gold_rate=0.5)
    link = link_create(campaign=campaign, platform=Platform.PROLIFIC, created_by=researcher, tasks_per_worker=2)
    client, user = joined_worker(link)
    next_task(client, campaign)
    submit_current(client, campaign, user)
    assert submit_current(client, campaign, user)["Location"] == reverse("crowd-done")
    submitted = Assignment.objects.filter(annotator=user, status=AssignmentStatus.SUBMITTED)
    assert submitted.count() == 2 and submitted.filter(is_gold=True).count() == 1
    assert assignment_claim(campaign=campaign, user=user) is None


def test_a_worker_counts_their_tasks_against_the_session_quota(researcher):
    campaign = make_campaign(make_dataset(owner=researcher, items=8), [], name="Long crowd study", raters_per_item=1)
    link = link_create(campaign=campaign, platform=Platform.PROLIFIC, created_by=researcher, completion_code="C0DE42")
    link.tasks_per_session = 3
    link.save()
    client, user = joined_worker(link)
    page = client.get(next_task(client, campaign)["Location"]).content.decode()
    assert "0 of 3 tasks done" in page
    for _ in range(3):
        submit_current(client, campaign, user)
        next_task(client, campaign)
    # The next session is three tasks more: its counter starts again, not at the campaign's running total.
    join(client, prolific_url(link, session="sess-2"))
    location = next_task(client, campaign)["Location"]
    assert location.startswith(f"/annotate/{campaign.pk}/tasks/")
    page = client.get(location).content.decode()
    assert "0 of 3 tasks done" in page, page[page.index('for="task-progress"') :][:120]
