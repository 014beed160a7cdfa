"""Writes for crowd recruitment: a researcher's links, a worker joining through one, and a session completing."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import TypedDict, Unpack

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from annotations.models import Campaign
from annotations.recruitment.models import (
    MAX_QUOTA,
    CrowdSession,
    CrowdWorker,
    LinkScreening,
    Platform,
    RecruitmentLink,
    ScreeningOutcome,
    ScreeningRule,
)
from annotations.recruitment.rules import ScreeningInvalid, parse_questions
from annotations.recruitment.selectors import (
    WORKER_USERNAME_PREFIX,
    current_session,
    is_crowd_account,
    session_submitted,
    worker_tasks_left,
)

MAX_COMPLETION_CODE = 100


class RecruitmentError(ValueError):
    """A refused change or join, with a message for the person who asked."""


class LinkClosed(RecruitmentError):
    pass


def _check_quota(value: int | None, what: str) -> None:
    if value is not None and not 1 <= value <= MAX_QUOTA:
        raise RecruitmentError(
            _("%(what)s must be a whole number from 1 to %(max)d, or empty for no limit.")
            % {"what": what, "max": MAX_QUOTA}
        )


class LinkSettings(TypedDict):
    """A study link's settings, as its fields are named."""

    tasks_per_session: int | None
    tasks_per_worker: int | None
    completion_code: str
    completion_url: str
    min_tasks_to_complete: int
    skips_per_session: int
    no_tasks_code: str


def _checked_settings(given: LinkSettings) -> LinkSettings:
    """The settings with their codes and URL stripped, or RecruitmentError for the first one out of bounds."""
    settings = given.copy()
    settings["completion_code"] = code = given["completion_code"].strip()
    settings["completion_url"] = url = given["completion_url"].strip()
    settings["no_tasks_code"] = no_tasks_code = given["no_tasks_code"].strip()
    _check_quota(settings["tasks_per_session"], _("Tasks per session"))
    _check_quota(settings["tasks_per_worker"], _("Tasks per worker"))
    _check_quota(settings["min_tasks_to_complete"], _("Tasks needed for the completion code"))
    if not 0 <= settings["skips_per_session"] <= MAX_QUOTA:
        raise RecruitmentError(_("Skips per session must be a whole number from 0 to %(max)d.") % {"max": MAX_QUOTA})
    if len(code) > MAX_COMPLETION_CODE or any(ord(ch) < 32 for ch in code):
        raise RecruitmentError(
            _("The completion code must be at most %(max)d characters without control characters.")
            % {"max": MAX_COMPLETION_CODE}
        )
    if not no_tasks_code or len(no_tasks_code) > MAX_COMPLETION_CODE or any(ord(ch) < 32 for ch in no_tasks_code):
        raise RecruitmentError(
            _("The no-more-tasks code must be 1 to %(max)d characters without control characters.")
            % {"max": MAX_COMPLETION_CODE}
        )
    if no_tasks_code == code:
        raise RecruitmentError(_("The no-more-tasks code must differ from the completion code."))
    if url:
        try:
            URLValidator(schemes=["https", "http"])(url)
        except ValidationError:
            raise RecruitmentError(_("The completion URL must be a full http(s) address.")) from None
        if len(url) > 500:
            raise RecruitmentError(_("The completion URL must be at most 500 characters."))
    return settings


def link_create(
    *,
    campaign: Campaign,
    platform: str,
    created_by: User | None,
    tasks_per_session: int | None = None,
    tasks_per_worker: int | None = None,
    completion_code: str = "",
    completion_url: str = "",
    min_tasks_to_complete: int = 1,
    skips_per_session: int = 5,
    no_tasks_code: str = "NOTASKS",
) -> RecruitmentLink:
    """One link per platform and campaign; its token is 256 random bits, so links cannot be guessed."""
    if platform not in Platform.values:
        raise RecruitmentError(_("Choose a platform."))
    settings = _checked_settings(
        LinkSettings(
            tasks_per_session=tasks_per_session, tasks_per_worker=tasks_per_worker, completion_code=completion_code,
            completion_url=completion_url, min_tasks_to_complete=min_tasks_to_complete,
            skips_per_session=skips_per_session, no_tasks_code=no_tasks_code,
        )
    )  # fmt: skip
    if not settings["completion_code"] and platform != Platform.INVITE:
        settings["completion_code"] = secrets.token_hex(4).upper()
    try:
        with transaction.atomic():
            return RecruitmentLink.objects.create(
                campaign=campaign, platform=platform, token=secrets.token_urlsafe(32), created_by=created_by, **settings
            )
    except IntegrityError:
        raise RecruitmentError(_("This campaign already has a link for that platform.")) from None


def link_update(*, link: RecruitmentLink, is_open: bool, **settings: Unpack[LinkSettings]) -> RecruitmentLink:
    """Closing admits no new worker; those who joined still resume and finish."""
    checked = _checked_settings(settings)
    link.is_open = is_open
    for name, value in checked.items():
        setattr(link, name, value)
    link.save(update_fields=["is_open", *checked])
    return link


def _worker_account() -> User:
    """A passwordless account whose name says nothing of the worker: it can only be entered through the link."""
    for _attempt in range(5):
        username = f"{WORKER_USERNAME_PREFIX}{secrets.token_hex(6)}"
        if not User.objects.filter(username=username).exists():
            user = User(username=username, is_staff=False, is_superuser=False, is_active=True)
            user.set_unusable_password()
            user.save()
            return user
    raise RuntimeError("could not allocate a unique worker account name")


def crowd_worker_join(
    *,
    link: RecruitmentLink,
    platform_worker_id: str,
    session_key: str,
    study_key: str = "",
    submit_to: str = "",
    now: datetime | None = None,
) -> CrowdSession:
    """The worker's session, joining them on first arrival: a pseudonymous account in the campaign's pool, bound to
    (link, platform id). The same id finds the same account again; a closed link admits only those who joined."""
    now = now or timezone.now()
    for _attempt in range(2):
        try:
            with transaction.atomic():
                worker = (
                    CrowdWorker.objects.select_for_update()
                    .filter(link=link, platform_worker_id=platform_worker_id)
                    .first()
                )
                if worker is None:
                    if not link.is_open:
                        raise LinkClosed(_("This study link is closed and admits no new workers."))
                    worker = CrowdWorker.objects.create(
                        link=link, platform_worker_id=platform_worker_id, user=_worker_account()
                    )
                    link.campaign.annotators.add(worker.user)
                elif not link.campaign.annotators.filter(pk=worker.user_id).exists():
                    # The researcher took them out of the pool; coming back through the link must not undo that.
                    raise RecruitmentError(_("You are no longer taking part in this study."))
                worker.last_seen_at = now
                worker.save(update_fields=["last_seen_at"])
                session, created = CrowdSession.objects.get_or_create(
                    worker=worker,
                    session_key=session_key,
                    defaults={"study_key": study_key, "submit_to": submit_to, "started_at": now},
                )
                if not created and submit_to and session.submit_to != submit_to:
                    session.submit_to = submit_to
                    session.save(update_fields=["submit_to"])
                return session
        except IntegrityError:
            continue  # a concurrent first arrival of the same worker won; the second pass finds their account
    raise RecruitmentError(_("Joining failed; please reload the page."))


def crowd_session_complete(*, session: CrowdSession, now: datetime | None = None) -> CrowdSession:
    """Marks the session done the first time the worker has nothing left; later calls keep the first moment."""
    now = now or timezone.now()
    CrowdSession.objects.filter(pk=session.pk, completed_at__isnull=True).update(completed_at=now)
    CrowdWorker.objects.filter(pk=session.worker_id).update(last_seen_at=now)
    session.refresh_from_db(fields=["completed_at"])
    return session


def crowd_session_finish(*, user: User, campaign: Campaign, now: datetime | None = None) -> bool:
    """Called when a worker's claim found nothing left (no task, or the quota is used up). Completing means work:
    the session completes when the worker submitted at least the link's minimum in it, or met their quota with at
    least one task in it. Otherwise the campaign ran out of tasks for them first: the session records that, and the
    worker is shown the link's no-more-tasks code, never the completion code. False for accounts that did not come
    through one of the campaign's links."""
    if not is_crowd_account(user):
        return False
    worker = CrowdWorker.objects.select_related("link").filter(user_id=user.pk, link__campaign=campaign).first()
    session = current_session(worker) if worker is not None else None
    if worker is None or session is None:
        return False
    done_here = session_submitted(campaign=campaign, user=user, session=session)
    quota_met = worker_tasks_left(campaign, user) == 0
    if done_here >= worker.link.min_tasks_to_complete or (quota_met and done_here > 0):
        crowd_session_complete(session=session, now=now)
    else:
        moment = now or timezone.now()
        CrowdSession.objects.filter(pk=session.pk, ran_out_at__isnull=True).update(ran_out_at=moment)
        CrowdWorker.objects.filter(pk=worker.pk).update(last_seen_at=moment)
    return True


# --- consent and screening ----------------------------------------------------------------------------------------


def link_screening_set(
    *, link: RecruitmentLink, consent_text: str, questions_text: str, rule: str, screened_out_code: str
) -> LinkScreening | None:
    """Sets the link's consent text and screening questions (see annotations.recruitment.rules for how questions
    are written); with neither, removes the screening. RecruitmentError names what is wrong; nothing is saved then."""
    try:
        questions = parse_questions(questions_text)
    except ScreeningInvalid as exc:
        raise RecruitmentError(str(exc)) from None
    if rule not in ScreeningRule.values:
        raise RecruitmentError(_("Choose how many answers must be accepted ones."))
    code = screened_out_code.strip()
    if not code or len(code) > 100:
        raise RecruitmentError(_("The screened-out code must be 1 to 100 characters."))
    consent = consent_text.strip()
    with transaction.atomic():
        if not consent and not questions:
            LinkScreening.objects.filter(link=link).delete()
            return None
        screening, _created = LinkScreening.objects.update_or_create(
            link=link,
            defaults={"consent_text": consent, "questions": questions, "rule": rule, "screened_out_code": code},
        )
    return screening


def screening_outcome_record(
    *, link: RecruitmentLink, platform_worker_id: str, session_key: str, outcome: str, answers: dict[str, str]
) -> ScreeningOutcome:
    """Records how the participant's session went through consent and screening; the first record of a session
    stands (a reload or a second click changes nothing)."""
    record, _created = ScreeningOutcome.objects.get_or_create(
        link=link,
        platform_worker_id=platform_worker_id,
        session_key=session_key,
        defaults={"outcome": outcome, "answers": answers},
    )
    return record
