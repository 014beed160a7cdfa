"""API tokens: how long one lives, the one rule that says whether it still does, and the writes that issue and
revoke them. A token is a password that travels with every request, so it expires, its owner can revoke it, and a
new password revokes it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone
from django.utils.translation import gettext as _
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed


def token_expires_at(created: datetime) -> datetime:
    return created + timedelta(hours=settings.API_TOKEN_TTL_HOURS)


def token_is_expired(created: datetime, now: datetime | None = None) -> bool:
    return (now or timezone.now()) >= token_expires_at(created)


def expired_token_error() -> AuthenticationFailed:
    return AuthenticationFailed(_("Token expired; obtain a new one from /api/token/."))


class ExpiringTokenAuthentication(TokenAuthentication):
    """DRF's token authentication, refusing tokens older than API_TOKEN_TTL_HOURS."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        user, token = super().authenticate_credentials(key)
        if token_is_expired(token.created):
            raise expired_token_error()
        return user, token


def token_issue(*, user: User) -> Token:
    """The user's token; an expired one is replaced by a new key, so an old key never comes back to life."""
    token = Token.objects.filter(user=user).first()
    if token is not None and token_is_expired(token.created):
        token.delete()
        token = None
    if token is None:
        token = Token.objects.create(user=user)
    return token


def token_revoke(*, user: User) -> bool:
    deleted, _details = Token.objects.filter(user=user).delete()
    return deleted > 0


def revoke_tokens_on_password_change(sender: type[User], instance: User, **kwargs: Any) -> None:
    """pre_save of User: a changed password hash revokes the account's token, whatever path changed it (admin,
    changepassword, a password form, set_password in code)."""
    if instance.pk is None or kwargs.get("raw"):
        return
    stored = User.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
    if stored is not None and stored != instance.password:
        Token.objects.filter(user_id=instance.pk).delete()
