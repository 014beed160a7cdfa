"""A hundred joins from one address at once, forty in flight at any moment, each on its own connection through the
whole request stack: exactly JOIN_LIMIT of them join, the rest get 429. The count is taken by the increment itself."""

from functools import partial
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from annotations.recruitment import ratelimit
from annotations.recruitment.models import CrowdWorker, Platform
from annotations.recruitment.services import link_create
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotate.test_recruitment import arrival_of
from tests.concurrency import statuses_at_once

pytestmark = pytest.mark.django_db(transaction=True)

JOINS = 100
# The joins race on the limiter's counter, not on the database: holding at most this many requests in flight keeps the
# test inside the Postgres connection budget it shares with the other half of the suite, and is still more than
# the limit, so every admission is decided by a race.
IN_FLIGHT = 40


def test_hundred_concurrent_joins_admit_exactly_the_limit():
    assert ratelimit.JOIN_LIMIT == 30
    cache.clear()
    owner = User.objects.create_user("owner", is_staff=True)
    campaign = make_campaign(make_dataset(owner=owner, items=2), [], name="Crowd study")
    link = link_create(campaign=campaign, platform=Platform.PROLIFIC, created_by=owner, completion_code="C0DE")
    entry = reverse("crowd-entry", args=[link.token])
    # The start pages are read first (a read does not count); then all hundred Start buttons are pressed at once.
    clients, arrivals = [], []
    for n in range(JOINS):
        client = Client(raise_request_exception=False)
        query = urlencode({"PROLIFIC_PID": f"pid{n:03d}aaaaaaaaaaaaaaaaaa", "STUDY_ID": "st", "SESSION_ID": f"s{n}"})
        start = client.get(f"{entry}?{query}")
        assert start.status_code == 200
        clients.append(client)
        arrivals.append(arrival_of(start))
    statuses = statuses_at_once(
        [partial(client.post, entry, {"arrival": arrival}) for client, arrival in zip(clients, arrivals, strict=True)],
        in_flight=IN_FLIGHT,
        timeout=300,
    )
    cache.clear()
    assert sorted(set(statuses)) == [303, 429], statuses
    assert statuses.count(303) == ratelimit.JOIN_LIMIT
    assert CrowdWorker.objects.count() == ratelimit.JOIN_LIMIT
