"""The adjudicator's pages and the researcher's adjudication settings: login, role and campaign checks, POST-only
writes, scale controls (never JSON) and the raters seen by pseudonym only."""

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotations.adjudication.services import adjudication_rule_set
from annotations.models import Adjudication, AdjudicationRule, Dispute
from annotations.roles import adjudicator_grant, is_adjudicator
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotations.adjudication.test_adjudication import rate_all

pytestmark = pytest.mark.django_db

CSRF_SECRET = "b2" * 16


@pytest.fixture
def disputed(researcher, annotators, adjudicator):  # type: ignore[no-untyped-def]
    campaign = make_campaign(make_dataset(owner=researcher, items=2, systems=2), annotators, raters_per_item=3)
    adjudication_rule_set(campaign=campaign, max_spread=1, preference_splits=False, adjudicators=[adjudicator])
    for user, value in zip(annotators, (0, 3, 2), strict=True):
        rate_all(campaign, user, value=value)
    assert Dispute.objects.count() == 2
    return campaign


def client_for(user: User | None) -> Client:
    client = Client(enforce_csrf_checks=True)
    if user is not None:
        client.force_login(user)
    return client


def post(client: Client, url: str, data: dict[str, str]):  # type: ignore[no-untyped-def]
    client.cookies[settings.CSRF_COOKIE_NAME] = CSRF_SECRET
    return client.post(url, {**data, "csrfmiddlewaretoken": CSRF_SECRET})


def first_dispute() -> Dispute:
    dispute = Dispute.objects.order_by("task__position").first()
    assert dispute is not None
    return dispute


def test_queue_lists_the_disputes_for_the_named_adjudicator(disputed, adjudicator):  # type: ignore[no-untyped-def]
    page = client_for(adjudicator).get(reverse("adjudication-queue"))
    assert page.status_code == 200
    text = page.content.decode()
    for dispute in Dispute.objects.all():
        assert reverse("adjudication-dispute", args=[dispute.pk]) in text
    assert "Factuality" in text


def test_queue_refuses_an_annotator_and_sends_a_visitor_to_login(disputed, annotators):  # type: ignore[no-untyped-def]
    assert client_for(annotators[0]).get(reverse("adjudication-queue")).status_code == 403
    response = client_for(None).get(reverse("adjudication-queue"))
    assert response.status_code == 302 and "/login" in response["Location"]


def test_queue_and_dispute_page_are_get_only(disputed, adjudicator):  # type: ignore[no-untyped-def]
    client = client_for(adjudicator)
    assert post(client, reverse("adjudication-queue"), {}).status_code == 405
    assert post(client, reverse("adjudication-dispute", args=[first_dispute().pk]), {}).status_code == 405
    assert client.get(reverse("adjudication-resolve", args=[first_dispute().pk])).status_code == 405


def test_dispute_page_shows_item_answers_and_raters_by_pseudonym(disputed, adjudicator, annotators):  # type: ignore[no-untyped-def]
    dispute = first_dispute()
    page = client_for(adjudicator).get(reverse("adjudication-dispute", args=[dispute.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert dispute.task.turn.prompt.split()[0] in text
    for response in dispute.task.responses.all():
        assert response.text.split()[0] in text
        assert response.system.key not in text  # answers stay blind
    for user in annotators:
        assert user.username not in text  # raters by pseudonym only
    assert text.count('type="radio"') == 2 * 4  # two disputed cells, a 0-3 scale each: buttons, not a JSON box
    assert "{&quot;" not in text and "<textarea" in text  # the only text box is the reason


def test_a_second_adjudicator_not_named_on_the_campaign_gets_404(disputed):  # type: ignore[no-untyped-def]
    other = adjudicator_grant(user=User.objects.create_user("adjudicator2"))
    assert client_for(other).get(reverse("adjudication-dispute", args=[first_dispute().pk])).status_code == 404
    assert post(client_for(other), reverse("adjudication-resolve", args=[first_dispute().pk]), {}).status_code == 404


def test_a_rater_of_the_task_cannot_adjudicate_it(disputed, annotators):  # type: ignore[no-untyped-def]
    rule = AdjudicationRule.objects.get(campaign=disputed)
    adjudicator_grant(user=annotators[0])
    rule.adjudicators.add(annotators[0])
    assert client_for(annotators[0]).get(reverse("adjudication-dispute", args=[first_dispute().pk])).status_code == 404


def test_resolve_records_the_values_and_returns_to_the_queue(disputed, adjudicator):  # type: ignore[no-untyped-def]
    dispute = first_dispute()
    data = {f"v-{e['response_id']}-{e['aspect_id']}": "2" for e in dispute.spreads} | {"reason": "majority near 2"}
    response = post(client_for(adjudicator), reverse("adjudication-resolve", args=[dispute.pk]), data)
    assert response.status_code == 303 and response["Location"] == reverse("adjudication-queue")
    assert Adjudication.objects.filter(dispute=dispute).count() == 2
    dispute.refresh_from_db()
    assert dispute.reason == "majority near 2"
    page = client_for(adjudicator).get(reverse("adjudication-dispute", args=[dispute.pk]))
    assert "majority near 2" in page.content.decode() and 'id="final-values"' in page.content.decode()


def test_resolve_with_a_missing_value_answers_422_and_keeps_the_reason(disputed, adjudicator):  # type: ignore[no-untyped-def]
    dispute = first_dispute()
    first = dispute.spreads[0]
    data = {f"v-{first['response_id']}-{first['aspect_id']}": "2", "reason": "typed reason"}
    response = post(client_for(adjudicator), reverse("adjudication-resolve", args=[dispute.pk]), data)
    assert response.status_code == 422
    text = response.content.decode()
    assert "Choose a final value" in text and "typed reason" in text
    assert not Adjudication.objects.exists()


def test_rule_page_saves_the_settings_and_finds_disputes(researcher, annotators, adjudicator):  # type: ignore[no-untyped-def]
    campaign = make_campaign(make_dataset(owner=researcher, items=2, systems=2), annotators, raters_per_item=3)
    campaign.annotators.add(adjudicator)  # in the researcher's pool, so offered
    for user, value in zip(annotators, (0, 3, 2), strict=True):
        rate_all(campaign, user, value=value)
    client = client_for(researcher)
    url = reverse("adjudication-rule", args=[campaign.pk])
    page = client.get(url)
    assert page.status_code == 200 and "adjudicator1" in page.content.decode()
    response = post(client, url, {"max_spread": "1", "adjudicators": str(adjudicator.pk)})
    assert response.status_code == 303
    rule = AdjudicationRule.objects.get(campaign=campaign)
    assert rule.max_spread == 1 and not rule.preference_splits
    assert list(rule.adjudicators.all()) == [adjudicator]
    assert Dispute.objects.filter(campaign=campaign).count() == 2
    assert post(client, url, {"max_spread": "-1"}).status_code == 422
    assert post(client, url, {}).status_code == 303  # neither trigger: adjudication off
    assert not AdjudicationRule.objects.filter(campaign=campaign).exists()


def test_rule_page_refuses_annotators_and_other_researchers(researcher, annotators):  # type: ignore[no-untyped-def]
    campaign = make_campaign(make_dataset(owner=researcher, items=1, systems=2), annotators)
    url = reverse("adjudication-rule", args=[campaign.pk])
    assert client_for(annotators[0]).get(url).status_code == 403
    stranger = User.objects.create_user("other-researcher", is_staff=True)
    assert client_for(stranger).get(url).status_code == 404
    client = Client()
    client.force_login(researcher)
    assert client.put(url).status_code == 405


def test_naming_an_annotator_without_the_role_makes_them_an_adjudicator(researcher, annotators):  # type: ignore[no-untyped-def]
    helper = User.objects.create_user("helper1", password="pw-helper-1")
    campaign = make_campaign(make_dataset(owner=researcher, items=2, systems=2), annotators, raters_per_item=3)
    make_campaign(make_dataset("another", owner=researcher, items=1, systems=2), [helper], name="Another study")
    for user, value in zip(annotators, (0, 3, 2), strict=True):
        rate_all(campaign, user, value=value)
    assert not is_adjudicator(helper)
    client = client_for(researcher)
    url = reverse("adjudication-rule", args=[campaign.pk])
    assert "helper1" in client.get(url).content.decode()
    assert post(client, url, {"max_spread": "1", "adjudicators": str(helper.pk)}).status_code == 303
    assert is_adjudicator(helper)
    assert list(AdjudicationRule.objects.get(campaign=campaign).adjudicators.all()) == [helper]
    queue = client_for(helper).get(reverse("adjudication-queue"))
    assert queue.status_code == 200
    assert client_for(helper).get(reverse("adjudication-dispute", args=[first_dispute().pk])).status_code == 200


def test_a_stranger_outside_the_researchers_pool_cannot_be_named(researcher, annotators):  # type: ignore[no-untyped-def]
    stranger = User.objects.create_user("stranger1")
    campaign = make_campaign(make_dataset(owner=researcher, items=1, systems=2), annotators)
    client = client_for(researcher)
    url = reverse("adjudication-rule", args=[campaign.pk])
    assert "stranger1" not in client.get(url).content.decode()
    assert post(client, url, {"max_spread": "1", "adjudicators": str(stranger.pk)}).status_code == 422
    assert not is_adjudicator(stranger)
    assert not AdjudicationRule.objects.filter(campaign=campaign).exists()
