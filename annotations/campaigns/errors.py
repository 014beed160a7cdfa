"""What the campaign writes refuse with: each exception says what was refused and that nothing was stored."""

from dataclasses import dataclass

from django.utils.translation import gettext as _

from annotations.slots import NotLeased


class CampaignError(ValueError):
    """A campaign cannot be created or changed as asked; the message says why."""


class DraftInvalid(ValueError):
    """A draft was refused as sent; the message says why and nothing was stored."""


@dataclass(frozen=True)
class FieldProblem:
    field: str  # the form field id, e.g. "r-2-1", "preference", "rationale"
    message: str


class RevisitRefused(Exception):
    """A changed answer to a task the user already submitted, refused because the campaign does not let annotators
    correct their work (any more). Nothing was changed."""


class LeaseLost(NotLeased):
    """The lease expired and the task went to someone else with no slot left for the user; their answer was kept
    as a draft of the task, not stored as ratings."""


class QuotaReached(Exception):
    """A crowd worker sent a new answer after submitting every task their link allows (for instance a page left
    open, sent after its lease expired). Nothing was stored and their open lease, if any, went back to the pool."""


class SubmissionInvalid(Exception):
    def __init__(self, problems: list[FieldProblem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


class AlreadyRated(SubmissionInvalid):
    """The annotator's rater already holds a rating of one of the task's answers (from another campaign of the same
    dataset), so this task cannot take their answer; nothing was stored. "Next" gives the task back."""


def outdated_form() -> SubmissionInvalid:
    return SubmissionInvalid([FieldProblem("idempotency_key", _("The form is outdated; reload the page."))])


def already_rated() -> AlreadyRated:
    return AlreadyRated(
        [FieldProblem("ratings", _("You have already rated one of these answers in another campaign."))]
    )
