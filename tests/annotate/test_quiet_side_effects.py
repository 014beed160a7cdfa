"""Side effects a researcher or an adjudicator must be told about: marking an item gold takes its ratings out of the
statistics, and excluding a rater closes the open disputes over their ratings."""

import pytest
from django.urls import reverse

from annotations.models import Dispute, DisputeClosure, Item, Rater, RaterExclusion
from tests.annotate.factories import make_dataset
from tests.annotate.test_research_area import rated_lines, signed_in
from tests.annotations.adjudication.test_adjudication_views import (  # noqa: F401 - fixtures
    client_for,
    disputed,
    first_dispute,
    post,
)

pytestmark = pytest.mark.django_db


def test_marking_gold_says_how_many_ratings_leave_the_statistics(researcher) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset("rated", owner=researcher, lines=rated_lines()[:2])  # within this rubric's 0-3 scale
    item = Item.objects.get(dataset=dataset, external_id="q0")  # two answers, two imported ratings each
    client = signed_in(researcher)
    page = client.get(reverse("research-item", args=[dataset.pk, item.pk])).content.decode()
    before = page[page.index('id="gold"') :]
    assert "Marking this item as gold takes its 4 ratings out of the dataset's statistics" in before
    assert 'aria-describedby="gold-effect"' in before  # read out with the button that marks it
    marked = client.post(
        reverse("research-item-gold", args=[dataset.pk, item.pk]),
        {"gold-1-1": "1", "kind": "gold", "tolerance": "0"},
        follow=True,
    ).content.decode()
    assert "The item is marked as gold. 4 ratings of its answers no longer count in the dataset" in marked
    assert "Marking this item as gold takes" not in marked  # already gold: nothing left to warn of
    unmarked = client.post(reverse("research-item-gold-remove", args=[dataset.pk, item.pk]), follow=True)
    assert "The item is no longer gold. 4 ratings of its answers count in the dataset" in unmarked.content.decode()


def test_excluding_a_rater_says_how_many_open_disputes_close(disputed, researcher, annotators, adjudicator) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    closed_one = first_dispute()
    rater = Rater.objects.get(dataset=disputed.dataset, user=annotators[0])
    queue_before = client_for(adjudicator).get(reverse("adjudication-queue")).content.decode()
    assert reverse("adjudication-dispute", args=[closed_one.pk]) in queue_before
    client = client_for(researcher)
    response = post(client, reverse("rater-exclude", args=[disputed.pk, rater.pk]), {"reason": "straight-lining"})
    assert response.status_code == 303
    page = client.get(response["Location"])
    assert "2 open disputes over their ratings are closed with it" in page.content.decode()
    assert not Dispute.objects.exists()
    exclusion = RaterExclusion.objects.get(rater=rater)
    assert DisputeClosure.objects.filter(exclusion=exclusion).count() == 2

    # The adjudicator opens a dispute from the queue they loaded before: a page that says why it is gone.
    opened = client_for(adjudicator).get(reverse("adjudication-dispute", args=[closed_one.pk]))
    body = opened.content.decode()
    assert opened.status_code == 410
    assert "This dispute was closed" in body and f"because rater {rater.pseudonym} was excluded" in body
    settled = post(
        client_for(adjudicator), reverse("adjudication-resolve", args=[closed_one.pk]), {"reason": "late settle"}
    )
    assert settled.status_code == 410 and "This dispute was closed" in settled.content.decode()
    # Nobody else learns about it, and a dispute that never existed is still simply not found.
    assert client_for(annotators[0]).get(reverse("adjudication-dispute", args=[closed_one.pk])).status_code == 403
    assert client_for(adjudicator).get(reverse("adjudication-dispute", args=[closed_one.pk + 1000])).status_code == 404
