"""Deactivating an annotator closes every way back in: a pending invitation link no longer sets a password (it used
to reactivate the account, which could then sign in), a signed-in session ends, and the researcher is told."""

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotations.models import AnnotatorInvite
from tests.annotate.test_research_area import invite, signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]

PASSPHRASE = "a-long-and-unusual-passphrase-91"


def test_a_pending_invitation_is_refused_after_deactivation(researcher: User) -> None:
    client = signed_in(researcher)
    token = invite(client, "pending01")
    user = User.objects.get(username="pending01")
    done = client.post(reverse("research-annotator-deactivate", args=[user.pk]), follow=True)
    assert done.status_code == 200
    url = reverse("research-invite-accept", args=[token])
    visitor = Client()
    assert visitor.get(url).status_code == 404
    assert visitor.post(url, {"password1": PASSPHRASE, "password2": PASSPHRASE}).status_code == 404
    user.refresh_from_db()
    assert not user.is_active and not user.has_usable_password()
    assert AnnotatorInvite.objects.filter(user=user, used_at__isnull=True).count() == 0
    assert not Client().login(username="pending01", password=PASSPHRASE)
    sign_in = Client().post(reverse("login"), {"username": "pending01", "password": PASSPHRASE})
    assert sign_in.status_code == 200 and "_auth_user_id" not in sign_in.client.session
    page = done.content.decode()
    assert "pending01 was deactivated" in page and "1 pending invitation link no longer works" in page


def test_a_signed_in_session_ends_at_deactivation(researcher: User) -> None:
    client = signed_in(researcher)
    token = invite(client, "working01")
    accepted = Client().post(
        reverse("research-invite-accept", args=[token]), {"password1": PASSPHRASE, "password2": PASSPHRASE}
    )
    assert accepted.status_code == 302
    annotator = Client()
    assert annotator.post(reverse("login"), {"username": "working01", "password": PASSPHRASE}).status_code == 302
    assert annotator.get(reverse("home")).status_code == 200
    user = User.objects.get(username="working01")
    done = client.post(reverse("research-annotator-deactivate", args=[user.pk]), follow=True)
    assert "their signed-in sessions are ended" in done.content.decode()
    after = annotator.get(reverse("home"))
    assert after.status_code == 302 and reverse("login") in after["Location"]
