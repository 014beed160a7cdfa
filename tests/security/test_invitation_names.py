"""Invitations name accounts as the login form reads names: a full-width look-alike ("ａｎｎ01" beside "ann01") is
refused instead of creating an account that could never sign in, a refused name does not tell a researcher which
accounts exist outside their own annotators, and the password set through the link may not be like the name."""

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotations.models import AnnotatorInvite
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotate.test_research_area import invite, signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]

PASSPHRASE = "a-long-and-unusual-passphrase-91"


def refused_invite(researcher: User, username: str) -> str:
    response = signed_in(researcher).post(reverse("research-annotator-invite"), {"username": username})
    assert response.status_code == 400
    return response.content.decode()


def test_a_full_width_look_alike_of_an_own_annotator_is_refused_as_taken(researcher: User, annotator1: User):
    make_campaign(make_dataset(owner=researcher, items=1, systems=1), [annotator1])
    page = refused_invite(researcher, "ａｎｎｏｔａｔｏｒ１")
    assert "That user name is taken" in page
    page = refused_invite(researcher, "ANNOTATOR1")
    assert "That user name is taken" in page
    assert User.objects.filter(username__icontains="notator").count() == 1 and not AnnotatorInvite.objects.exists()


def test_a_name_outside_the_researchers_annotators_gets_a_neutral_refusal(researcher: User, outsider: User):
    page = refused_invite(researcher, outsider.username)
    assert "cannot be used" in page and "taken" not in page
    page = refused_invite(researcher, "ｏｕｔｓｉｄｅｒ")
    assert "cannot be used" in page and "taken" not in page
    assert not AnnotatorInvite.objects.exists()


def test_a_full_width_name_is_stored_as_the_login_form_reads_it_and_signs_in(researcher: User):
    response = signed_in(researcher).post(reverse("research-annotator-invite"), {"username": "ｋｙｏｔｏ０７"})
    assert response.status_code == 200
    html = response.content.decode()
    start = html.index("/research/invite/") + len("/research/invite/")
    token = html[start : html.index("/", start)]
    user = User.objects.get(username="kyoto07")
    accepted = Client().post(
        reverse("research-invite-accept", args=[token]), {"password1": PASSPHRASE, "password2": PASSPHRASE}
    )
    assert accepted.status_code == 302
    for typed in ("kyoto07", "ｋｙｏｔｏ０７"):
        client = Client()
        assert client.post(reverse("login"), {"username": typed, "password": PASSPHRASE}).status_code == 302
        assert client.session["_auth_user_id"] == str(user.pk)


def test_a_name_that_is_no_user_name_is_refused(researcher: User):
    page = refused_invite(researcher, "two words")
    assert "Enter a valid username" in page and not User.objects.filter(username="two words").exists()


@pytest.mark.parametrize("password", ["kyoto07kyoto07", "Kyoto07Kyoto07!", "ｋｙｏｔｏ０７ｋｙｏｔｏ０７", "kyoto07!"])
def test_a_password_like_the_user_name_is_refused(researcher: User, password: str):
    token = invite(signed_in(researcher), "kyoto07")
    url = reverse("research-invite-accept", args=[token])
    response = Client().post(url, {"password1": password, "password2": password})
    assert response.status_code == 400
    page = response.content.decode()
    assert "user name" in page or "too similar" in page
    assert not User.objects.get(username="kyoto07").has_usable_password()
