"""The slot-and-lease engine: N distinct people each take a task once, handed out in one shared order.

Annotation campaigns (annotations.campaigns) and FActScore's fact review (judging.factscore.services) both
run on it; each names the four models that hold its campaigns, tasks, slots and skips in a `SlotPool`, and those
models share the column names used below (see the two `SlotPool` definitions).

The rules, each written once here
---------------------------------
* Building: a task gets exactly N slot rows (slot 1..N) when it is created; afterwards they are only updated,
  never inserted, so with `unique(task, slot)` and `check(1 <= slot <= slot_limit)` a task cannot collect more than
  N people, and `unique(task, annotator)` keeps them distinct. The one later insert is a replacement slot (see
  "replacement slots" at the end): one per slot whose rater no longer counts, at most one, so the task can still
  reach N people who count.
* The pool: only a member of an active campaign's pool takes, resumes or completes slots (`_IN_POOL`).
* The claim rule (`_CLAIMABLE`): a slot of the campaign whose lease is open (free, or leased and expired) on a task
  the user has never held and never skipped, not barred to them (`SlotPool.barred`, such as a task whose answer
  they already rated elsewhere), and not a personal slot (one appended for somebody else, such as a gold task
  handed to one annotator). "Next" first resumes the user's open lease (at most one per campaign, a unique
  constraint) unless its task became barred to them, which gives it back; otherwise it leases the claimable slot
  lowest in hand-out order. The same fragment is the Postgres one-statement claim, the portable claim and the
  "available" count of the progress query.
* The hand-out window (`SlotPool.opens`, `SlotPool.closes`, `window_open_sql`): the claim rule holds only from the
  campaign's opening time (inclusive) until its closing time (exclusive), so before the opening and after the
  closing no new slot is handed out, on either path and in the "available" count. Outside the window "next" still
  resumes the user's open lease, without extending it and only until it ends, and completing accepts such a lease
  until its end; inside the window a lease keeps counting while the slot is the user's, as before.
* The stop (`SlotPool.stopped`): once the campaign's stopping rule is met, no new slot, shared or personal (gold), is
  handed out; a lease already held is still resumed and completed. `handing_out_sql` is window and stop together,
  the one condition every claim of a new slot asks.
* A claim locks the picked row (`FOR UPDATE SKIP LOCKED` where supported) and re-checks the open lease in the
  conditional UPDATE that takes it (which is also what keeps SQLite correct), so two requests never take one slot.
* Releasing (skip, leaving the pool) and completing are conditional updates on the user's open lease.

On Postgres a claim runs as one statement (data-modifying CTEs) in autocommit: one round trip instead of a
transaction of five ORM queries, with the same locks, conditional updates and constraints; the portable path serves
the other databases (SQLite in development). Table names come from the models' metadata, never from input.

The modules: `rules` (the pool, the result types and the SQL fragments every statement is built from, and
building), `claiming` (the claim's one-statement and portable forms side by side, so a change to one is made next to
the other; releasing, skipping, completing, the counts), `personal` (personal slots) and `replacement` (replacement
slots). This package names their public functions, the engine's whole interface.
"""

from annotations.slots.claiming import (
    slot_claim,
    slot_complete,
    slot_counts,
    slot_handing_out,
    slot_reclaim,
    slot_release,
    slot_release_barred,
    slot_skip,
    slot_window_open,
)
from annotations.slots.personal import (
    PERSONAL_SLOT_LIMIT,
    PersonalState,
    slot_personal_claim,
    slot_personal_lease,
    slot_personal_state,
)
from annotations.slots.replacement import (
    slots_replace,
    slots_unreplace,
)
from annotations.slots.rules import (
    CLAIM_ATTEMPTS,
    NO_DETAILS,
    SLOT_COLUMNS,
    AnyUser,
    Claim,
    ClaimDetails,
    HandOut,
    NotInPool,
    NotLeased,
    SlotCounts,
    SlotPool,
    SlotT,
    hand_out_order,
    hand_out_window,
    seeded_random,
    slot_complete_sql,
    slot_pool_has,
    slot_pool_sql,
    slots_build,
    slots_release_outside_pool,
    window_open_sql,
)

__all__ = [
    "CLAIM_ATTEMPTS",
    "NO_DETAILS",
    "PERSONAL_SLOT_LIMIT",
    "SLOT_COLUMNS",
    "AnyUser",
    "Claim",
    "ClaimDetails",
    "HandOut",
    "NotInPool",
    "NotLeased",
    "PersonalState",
    "SlotCounts",
    "SlotPool",
    "SlotT",
    "hand_out_order",
    "hand_out_window",
    "seeded_random",
    "slot_claim",
    "slot_complete",
    "slot_complete_sql",
    "slot_counts",
    "slot_handing_out",
    "slot_personal_claim",
    "slot_personal_lease",
    "slot_personal_state",
    "slot_pool_has",
    "slot_pool_sql",
    "slot_reclaim",
    "slot_release",
    "slot_release_barred",
    "slot_skip",
    "slot_window_open",
    "slots_build",
    "slots_release_outside_pool",
    "slots_replace",
    "slots_unreplace",
    "window_open_sql",
]
