"""API tokens expire, are listed and revoked by their owner, and die with a password change."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.conftest import CAST_PASSWORD

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]


def obtain(user: User) -> str:
    response = APIClient().post(reverse("api-token"), {"username": user.username, "password": CAST_PASSWORD})
    assert response.status_code == 200, response.content
    assert "expires_at" in response.json()
    return str(response.json()["token"])


def with_token(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def age(key: str, hours: float) -> None:
    Token.objects.filter(key=key).update(created=timezone.now() - timedelta(hours=hours))


@override_settings(API_TOKEN_TTL_HOURS=24)
def test_an_expired_token_is_refused_by_the_api_and_the_annotator_api(researcher: User, annotator1: User) -> None:
    researcher_key, annotator_key = obtain(researcher), obtain(annotator1)
    assert with_token(researcher_key).get("/api/datasets/").status_code == 200
    assert with_token(annotator_key).get(reverse("api-annotate-campaigns")).status_code == 200
    age(researcher_key, 25)
    age(annotator_key, 25)
    refused = with_token(researcher_key).get("/api/datasets/")
    assert refused.status_code in (401, 403) and "expired" in refused.json()["detail"]
    refused = with_token(annotator_key).get(reverse("api-annotate-campaigns"))
    assert refused.status_code in (401, 403) and "expired" in refused.json()["detail"]
    # a token 23 hours old still works
    age(researcher_key, 23)
    assert with_token(researcher_key).get("/api/datasets/").status_code == 200


@override_settings(API_TOKEN_TTL_HOURS=24)
def test_obtaining_again_after_expiry_gives_a_new_key(researcher: User) -> None:
    first = obtain(researcher)
    assert obtain(researcher) == first  # still valid: the same token
    age(first, 25)
    second = obtain(researcher)
    assert second != first
    assert with_token(second).get("/api/datasets/").status_code == 200
    assert with_token(first).get("/api/datasets/").status_code in (401, 403)


def test_the_owner_lists_and_revokes_their_token(researcher: User, annotator1: User) -> None:
    key = obtain(annotator1)
    obtain(researcher)
    listed = with_token(key).get(reverse("api-token-mine"))
    assert listed.status_code == 200
    tokens = listed.json()["tokens"]
    assert len(tokens) == 1 and tokens[0]["key_prefix"] == key[:6] and key not in listed.content.decode()
    assert with_token(key).delete(reverse("api-token-mine")).status_code == 204
    assert with_token(key).get(reverse("api-token-mine")).status_code in (401, 403)
    assert Token.objects.filter(user=annotator1).count() == 0
    assert Token.objects.filter(user=researcher).count() == 1  # only the owner's token went


def test_token_list_needs_a_signed_in_user_and_refuses_other_methods(researcher: User) -> None:
    assert APIClient().get(reverse("api-token-mine")).status_code in (401, 403)
    assert APIClient().delete(reverse("api-token-mine")).status_code in (401, 403)
    client = APIClient()
    client.force_login(researcher)
    assert client.post(reverse("api-token-mine")).status_code == 405
    assert client.get(reverse("api-token-mine")).json() == {"tokens": []}


def test_a_password_change_revokes_the_token(researcher: User) -> None:
    key = obtain(researcher)
    researcher.first_name = "Ada"
    researcher.save()  # other edits keep it
    assert with_token(key).get("/api/datasets/").status_code == 200
    researcher.set_password("a-new-password-for-the-researcher-1")
    researcher.save()
    assert not Token.objects.filter(key=key).exists()
    assert with_token(key).get("/api/datasets/").status_code in (401, 403)
