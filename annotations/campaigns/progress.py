"""An annotator's own progress in a campaign: what the task page's counter and the campaign list show.

It reads the slots, the gold rule and a crowd worker's quota, so it sits above the campaign reads and the
recruitment package, which both stay free of each other."""

from __future__ import annotations

from dataclasses import dataclass

from annotations.campaign_selectors import AnyUser
from annotations.campaign_slots import CAMPAIGN_SLOTS
from annotations.gold.selectors import gold_still_due, gold_tasks_left
from annotations.models import Campaign
from annotations.recruitment.selectors import worker_session_done, worker_tasks_left
from annotations.slots import slot_counts, slot_personal_state


@dataclass(frozen=True)
class AnnotatorProgress:
    done: int
    available: int
    has_open_task: bool

    @property
    def total(self) -> int:
        return self.done + self.available


def annotator_progress(*, campaign: Campaign, user: AnyUser) -> AnnotatorProgress:
    """Done = tasks this annotator submitted (in their current session, for a crowd worker with a quota per session);
    available = the open task, the tasks that still have a free slot they
    could take, and the gold tasks the gold rule will hand them along the way, capped by a crowd worker's quota.

    Gold counts exactly like a regular task: handing out either moves one task from "to come" to "open", so no
    figure changes with the kind of task served (a gold task appended at hand-out would otherwise add one)."""
    counts = slot_counts(pool=CAMPAIGN_SLOTS, campaign=campaign, user=user)
    has_open = bool(counts.leased)
    available = counts.available + (1 if has_open else 0)
    if campaign.gold_rate > 0 and user.is_authenticated:
        state = slot_personal_state(pool=CAMPAIGN_SLOTS, campaign=campaign, user=user)
        available += gold_still_due(
            campaign=campaign,
            user_id=int(user.pk or 0),
            handed_out=state.held,
            regular_left=counts.available,
            gold_left=gold_tasks_left(campaign=campaign, user=user),
        )
    quota_left = worker_tasks_left(campaign, user)
    if quota_left is not None:
        available = min(available, quota_left)
    # With a quota per session, a worker's session is their study: count it alone, or a second session would read
    # "3 of 6" where three tasks are asked of them.
    session_done = worker_session_done(campaign, user)
    done = counts.done if session_done is None else session_done
    return AnnotatorProgress(done=done, available=available, has_open_task=has_open)
