"""What a worker brings in the link: the platform's query parameters, checked, and carried signed from the start
page to the join, so nothing can be changed in between."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

from django.core import signing
from django.utils.translation import gettext as _

from annotations.recruitment.models import Platform, RecruitmentLink
from annotations.text.storable import is_storable

MAX_PARAM_CHARS = 200
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
MTURK_SUBMIT_ORIGINS = frozenset({"https://www.mturk.com", "https://workersandbox.mturk.com"})
# Loopback is allowed so a study can be tried end to end on one machine (and tested): a form posted there reaches
# only the worker's own computer.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
JOIN_SALT = "crowd-join"
INVITE_SALT = "crowd-invite"
CONSENT_SALT = "crowd-consent"
JOIN_MAX_AGE = 12 * 3600  # a start page left open overnight asks for a reload rather than joining with old values


class BadParameter(ValueError):
    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name}: {problem}")
        self.name = name
        self.problem = problem


def platform_param(query: Mapping[str, str], name: str) -> str:
    value = query.get(name)
    if value is None:
        raise BadParameter(name, _("missing from the link"))
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise BadParameter(name, _("contains a control character"))
    if not is_storable(value):
        raise BadParameter(name, _("contains an unpaired surrogate"))
    value = value.strip()
    if not value:
        raise BadParameter(name, _("is empty"))
    if len(value) > MAX_PARAM_CHARS:
        raise BadParameter(name, _("is longer than %(n)d characters") % {"n": MAX_PARAM_CHARS})
    return value


def mturk_submit_origin(value: str) -> str:
    """turkSubmitTo as a bare origin: MTurk's two endpoints over https, or a loopback address."""
    parts = urlsplit(value)
    host = (parts.hostname or "").lower()
    if parts.username or parts.password or parts.query or parts.fragment or parts.path not in {"", "/"}:
        raise BadParameter("turkSubmitTo", _("is not an MTurk submit address"))
    try:
        port = parts.port
    except ValueError:
        raise BadParameter("turkSubmitTo", _("is not an MTurk submit address")) from None
    origin = f"{parts.scheme}://{host}" if port is None else f"{parts.scheme}://{parts.netloc.lower()}"
    if origin in MTURK_SUBMIT_ORIGINS:
        return origin
    if parts.scheme in {"http", "https"} and host in LOOPBACK_HOSTS:
        return origin
    raise BadParameter("turkSubmitTo", _("is not an MTurk submit address"))


@dataclass(frozen=True)
class Arrival:
    """Who arrives through a link: the platform's worker id, session and study, and (MTurk) where to submit."""

    link: int
    worker_id: str
    session_key: str
    study_key: str = ""
    submit_to: str = ""

    def signed(self) -> str:
        return signing.dumps(asdict(self), salt=JOIN_SALT, compress=True)


def arrival_from_signed(value: str, link: RecruitmentLink) -> Arrival:
    data = signing.loads(value, salt=JOIN_SALT, max_age=JOIN_MAX_AGE)
    arrival = Arrival(**data)
    if arrival.link != link.pk:
        raise signing.BadSignature("signed for another link")
    return arrival


def prolific_arrival(link: RecruitmentLink, query: Mapping[str, str]) -> Arrival:
    return Arrival(
        link=link.pk,
        worker_id=platform_param(query, "PROLIFIC_PID"),
        study_key=platform_param(query, "STUDY_ID"),
        session_key=platform_param(query, "SESSION_ID"),
    )


def mturk_arrival(link: RecruitmentLink, query: Mapping[str, str]) -> Arrival:
    worker_id = platform_param(query, "workerId")
    assignment_id = platform_param(query, "assignmentId")
    hit_id = platform_param(query, "hitId")
    submit_to = mturk_submit_origin(platform_param(query, "turkSubmitTo"))
    return Arrival(link=link.pk, worker_id=worker_id, session_key=assignment_id, study_key=hit_id, submit_to=submit_to)


def invite_signature(link: RecruitmentLink, label: str) -> str:
    return signing.dumps([link.pk, label], salt=INVITE_SALT, compress=True)


def invite_label(link: RecruitmentLink, signature: str) -> str:
    """The participant label inside a signed invite; BadSignature when it was altered or signed for another link."""
    data = signing.loads(signature, salt=INVITE_SALT)
    if not (isinstance(data, list) and len(data) == 2 and data[0] == link.pk and isinstance(data[1], str)):
        raise signing.BadSignature("signed for another link")
    return str(data[1])


def invite_arrival(link: RecruitmentLink, query: Mapping[str, str], *, known_worker_id: str | None) -> Arrival:
    """A signed invite names its participant; the plain link gives each new browser an identity of its own (a
    browser already signed in through this link keeps the one it has)."""
    signature = query.get("invite")
    if signature is not None:
        if len(signature) > 2000:
            raise signing.BadSignature("overlong")
        worker_id = f"invite:{invite_label(link, signature)}"
    else:
        worker_id = known_worker_id or f"browser:{secrets.token_hex(16)}"
    return Arrival(link=link.pk, worker_id=worker_id, session_key=f"visit-{secrets.token_hex(8)}")


def arrival_for(link: RecruitmentLink, query: Mapping[str, str], *, known_worker_id: str | None) -> Arrival:
    if link.platform == Platform.PROLIFIC:
        return prolific_arrival(link, query)
    if link.platform == Platform.MTURK:
        return mturk_arrival(link, query)
    return invite_arrival(link, query, known_worker_id=known_worker_id)
