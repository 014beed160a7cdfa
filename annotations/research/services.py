"""Writes of the research area: inviting annotators, accepting an invitation, adding to a pool, deactivating."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import User
from django.contrib.auth.password_validation import (
    UserAttributeSimilarityValidator,
    get_default_password_validators,
    validate_password,
)
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from annotations.campaigns.setup import campaign_annotator_remove
from annotations.models import AnnotatorInvite, Campaign
from annotations.research.selectors import invite_token_hash, pool_accounts
from annotations.text.usernames import username_key, username_normalized

INVITE_DAYS = 7


class InviteError(ValueError):
    pass


@dataclass(frozen=True)
class IssuedInvite:
    invite: AnnotatorInvite
    # The only copy of the token: the database keeps its hash, so the link is shown once.
    token: str


def annotator_invite(*, username: str, email: str, campaign: Campaign | None, by: User) -> IssuedInvite:
    """Creates the annotator's account with no usable password, puts them in the campaign's pool, and issues a
    single-use link, valid for INVITE_DAYS days, where they set their password."""
    username = username_normalized(username)
    if not username or len(username) > 150:
        raise InviteError(_("Give a user name of 1 to 150 characters."))
    try:
        User.username_validator(username)
    except ValidationError as exc:
        raise InviteError(" ".join(exc.messages)) from None
    # Compared as the login form reads names, ignoring case, so no look-alike of an account can be invited.
    taken = User.objects.filter(username__iexact=username).first()
    if taken is not None:
        if pool_accounts(by).filter(pk=taken.pk).exists() or _invited_by(taken, by):
            raise InviteError(_("That user name is taken; choose another."))
        # Whose the name is stays unsaid: the site's other accounts are not this researcher's to learn.
        raise InviteError(_("That user name cannot be used; choose another."))
    token = secrets.token_urlsafe(32)
    now = timezone.now()
    with transaction.atomic():
        user = User(username=username, email=email.strip(), is_staff=False)
        user.set_unusable_password()
        user.save()
        if campaign is not None:
            campaign.annotators.add(user)
        invite = AnnotatorInvite.objects.create(
            user=user,
            campaign=campaign,
            token_hash=invite_token_hash(token),
            created_by=by,
            created_at=now,
            expires_at=now + timedelta(days=INVITE_DAYS),
        )
    return IssuedInvite(invite=invite, token=token)


def _invited_by(user: User, researcher: User) -> bool:
    return AnnotatorInvite.objects.filter(user=user, created_by=researcher).exists()


def _password_check(password: str, user: User) -> None:
    """Django's password rules with the similarity to the user name always among them, and a password that holds
    the user name refused too: the similarity ratio lets a repeated name through ("ann01ann01")."""
    validators = get_default_password_validators()
    if not any(isinstance(validator, UserAttributeSimilarityValidator) for validator in validators):
        validators = [*validators, UserAttributeSimilarityValidator()]
    problems: list[str] = []
    try:
        validate_password(password, user=user, password_validators=validators)
    except ValidationError as exc:
        problems.extend(exc.messages)
    name = username_key(user.username)
    if len(name) >= 3 and name in username_key(password):
        problems.append(_("The password must not contain the user name."))
    if problems:
        raise InviteError(" ".join(dict.fromkeys(problems)))


def invite_accept(*, token: str, password: str) -> User:
    """Sets the invited annotator's password and spends the link. Django's password validators apply; a link that
    was used, expired or never existed is refused, and a second request racing the first finds it spent."""
    now = timezone.now()
    with transaction.atomic():
        invite = (
            AnnotatorInvite.objects.select_for_update()
            .filter(token_hash=invite_token_hash(token), used_at__isnull=True, expires_at__gt=now, user__is_active=True)
            .select_related("user")
            .first()
        )
        if invite is None:
            raise InviteError(_("This invitation link was used already or has expired."))
        _password_check(password, invite.user)
        spent = AnnotatorInvite.objects.filter(pk=invite.pk, used_at__isnull=True).update(used_at=now)
        if spent != 1:
            raise InviteError(_("This invitation link was used already or has expired."))
        user = invite.user
        user.set_password(password)
        user.save(update_fields=["password"])
    return user


def annotator_pool_add(*, campaign: Campaign, user: User) -> None:
    if user.is_staff:
        raise InviteError(_("Only annotator accounts can join a campaign's pool."))
    if not user.is_active:
        raise InviteError(_("That account is deactivated."))
    campaign.annotators.add(user)


def annotator_deactivate(*, user: User, campaigns: list[Campaign]) -> int:
    """The account can no longer sign in; it leaves the pools of the given campaigns, which releases any task it
    holds there. Its submitted ratings stay. Returns how many pending invitation links it spent.

    Every way back in is closed with it: its pending invitation links are spent (accepting one would set a password
    on the account), and its password becomes unusable, which ends every signed-in session (Django checks each
    session against the password hash on every request) and revokes its API token (tokens.py)."""
    if user.is_staff or user.is_superuser:
        raise InviteError(_("Only annotator accounts can be deactivated here."))
    now = timezone.now()
    with transaction.atomic():
        spent = AnnotatorInvite.objects.filter(user=user, used_at__isnull=True).update(used_at=now)
        user.is_active = False
        user.set_unusable_password()
        user.save(update_fields=["is_active", "password"])
        for campaign in campaigns:
            campaign_annotator_remove(campaign=campaign, user=user)
    return spent
