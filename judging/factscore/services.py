"""Writes for FActScore: corpus upload (which builds the retrieval index, see `indexes`), fact review on the slot
engine, projecting run results into rows."""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Iterable
from typing import IO, Any

from django.db import transaction
from django.utils import timezone

from annotations.slots import ClaimDetails, hand_out_order, slot_claim, slot_complete, slot_skip, slots_build
from annotations.slots import NotInPool as NotInReviewPool  # noqa: F401 - the views catch it under this name
from annotations.slots import NotLeased as ReviewNotLeased
from annotations.slots import slots_release_outside_pool as _slots_release_outside_pool
from annotations.text.storable import NUL, unstorable_character
from judging.factscore import corpus as corpus_lib

# The corpus upload builds the index; the admin and the tests clear the cache through the services.
from judging.factscore.indexes import forget_cached_indexes, knowledge_corpus_index  # noqa: F401
from judging.factscore.models import (
    FACT_REVIEW_SLOTS,
    AtomicFact,
    FactAnswer,
    FactLabel,
    FactOrigin,
    FactReviewAssignment,
    FactReviewCampaign,
    FactReviewStatus,
    FactReviewTask,
    HumanFactLabel,
    KnowledgeCorpus,
    Passage,
)
from judging.factscore.results import factscore_project

logger = logging.getLogger(__name__)

MAX_CORPUS_PASSAGES = 2_000_000


class CorpusError(ValueError):
    pass


def knowledge_corpus_upload(
    *,
    dataset: Any,
    name: str,
    stream: IO[bytes] | IO[str] | Iterable[bytes | str],
    uploaded_by: Any = None,
    passage_tokens: int = corpus_lib.PASSAGE_TOKENS,
    replace: bool = False,
) -> KnowledgeCorpus:
    """Parse, split and store a corpus atomically: on any bad line nothing is written.

    With `replace`, an existing corpus of that name is replaced in the same transaction.
    """
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise CorpusError("a corpus needs a name of 1 to 200 characters")
    if not 16 <= passage_tokens <= 4096:
        raise CorpusError("passage_tokens must be between 16 and 4096")
    rows: list[Passage] = []
    digest = hashlib.sha256()
    seen_ids: set[str] = set()
    n_documents = 0
    try:
        for document in corpus_lib.iter_documents(stream):
            if document.id in seen_ids:
                raise CorpusError(f"document id {document.id!r} appears twice")
            seen_ids.add(document.id)
            n_documents += 1
            for chunk, text in enumerate(corpus_lib.split_passages(document.text, max_tokens=passage_tokens)):
                rows.append(
                    Passage(position=len(rows), document_id=document.id, title=document.title, chunk=chunk, text=text)
                )
                digest.update(f"{document.id}\0{document.title}\0{chunk}\0{text}\0".encode())
                if len(rows) > MAX_CORPUS_PASSAGES:
                    raise CorpusError(f"a corpus may have at most {MAX_CORPUS_PASSAGES} passages")
    except corpus_lib.CorpusFormatError as exc:
        raise CorpusError(str(exc)) from None
    except UnicodeDecodeError:
        raise CorpusError("the corpus must be UTF-8 encoded JSONL") from None
    if not rows:
        raise CorpusError("the corpus has no documents")
    digest.update(f"tokens={passage_tokens}".encode())
    with transaction.atomic():
        existing = KnowledgeCorpus.objects.select_for_update().filter(dataset=dataset, name=name).first()
        if existing is not None:
            if not replace:
                raise CorpusError(f"dataset already has a corpus named {name!r}")
            existing.delete()
        knowledge = KnowledgeCorpus.objects.create(
            dataset=dataset,
            name=name,
            passage_tokens=passage_tokens,
            n_documents=n_documents,
            n_passages=len(rows),
            fingerprint=digest.hexdigest(),
            uploaded_by=uploaded_by,
        )
        for row in rows:
            row.corpus = knowledge
        Passage.objects.bulk_create(rows, batch_size=2000)
    # Build and save the index now: a worker then only loads arrays, instead of tokenising the
    # whole corpus inside a judge slice (where it would hold up the slice's lease renewals).
    knowledge_corpus_index(knowledge)
    return knowledge


# --- human fact review ---------------------------------------------------------------------------
#
# Slots and leases are the annotation campaigns' engine (annotations.slots): every answer gets
# exactly N rater slots created up front and only updated afterwards, so an answer can never
# collect more than N reviewers; unique(task, annotator) keeps them distinct; one open lease per
# annotator; tasks are handed out in one seeded random order, lowest free slot first, so a stopped
# campaign leaves whole answers with N reviews. Reviewers never see system names, the estimator's
# verdicts or each other's labels and edits.

MAX_FACT_TEXT = 1000
MAX_OWN_FACTS = 100


class ReviewError(ValueError):
    pass


def _check_review_text(name: str, guidelines: str) -> None:
    bad = unstorable_character(name) or unstorable_character(guidelines)
    if bad == NUL:
        raise ReviewError("text with a NUL character cannot be stored")
    if bad:
        raise ReviewError("text with an unpaired surrogate cannot be stored")


def fact_review_campaign_create(
    *,
    name: str,
    run: Any,
    raters_per_answer: int = 3,
    annotators: Iterable[Any] = (),
    created_by: Any = None,
    lease_minutes: int = 30,
    show_evidence: bool = True,
    guidelines: str = "",
) -> Any:
    """Open a review of a factscore run: one task per answer that has facts, N slots each."""
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise ReviewError("a review campaign needs a name of 1 to 200 characters")
    if run.method != "factscore":
        raise ReviewError("only a factscore run has facts to review")
    if not 1 <= raters_per_answer <= 100:
        raise ReviewError("raters per answer must be between 1 and 100")
    if lease_minutes < 1:
        raise ReviewError("the lease must be at least one minute")
    _check_review_text(name, guidelines)
    if FactReviewCampaign.objects.filter(run=run, name=name).exists():
        raise ReviewError(f"this run already has a review campaign named {name!r}")
    factscore_project(run=run)
    answer_ids = list(
        FactAnswer.objects.filter(run=run, is_refusal=False, facts__origin="model")
        .distinct()
        .order_by("response__turn__item__position", "response__turn__index", "response__position", "id")
        .values_list("pk", flat=True)
    )
    if not answer_ids:
        raise ReviewError("the run has no answers with facts yet")
    users = list(annotators)
    with transaction.atomic():
        campaign = FactReviewCampaign.objects.create(
            name=name,
            run=run,
            raters_per_answer=raters_per_answer,
            lease_minutes=lease_minutes,
            show_evidence=show_evidence,
            guidelines=guidelines,
            created_by=created_by,
            shuffle_seed=secrets.token_hex(16),
        )
        campaign.annotators.set(users)
        order = hand_out_order(campaign.shuffle_seed, len(answer_ids))
        tasks = FactReviewTask.objects.bulk_create(
            [FactReviewTask(campaign=campaign, answer_id=aid, position=order[i]) for i, aid in enumerate(answer_ids)]
        )
        slots_build(pool=FACT_REVIEW_SLOTS, campaign=campaign, tasks=tasks, per_task=raters_per_answer)
    return campaign


def fact_review_campaign_update(
    *,
    campaign: Any,
    name: str,
    annotators: Iterable[Any],
    lease_minutes: int,
    show_evidence: bool,
    guidelines: str,
) -> Any:
    """Changes what a review shows and who reviews. Its run and N stay as created: its tasks and slots were built
    from them. Someone taken out of the pool loses their open review at once."""
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise ReviewError("a review campaign needs a name of 1 to 200 characters")
    if lease_minutes < 1:
        raise ReviewError("the lease must be at least one minute")
    _check_review_text(name, guidelines)
    if FactReviewCampaign.objects.filter(run_id=campaign.run_id, name=name).exclude(pk=campaign.pk).exists():
        raise ReviewError(f"this run already has a review campaign named {name!r}")
    users = list(annotators)
    with transaction.atomic():
        campaign.name = name
        campaign.lease_minutes = lease_minutes
        campaign.show_evidence = show_evidence
        campaign.guidelines = guidelines
        campaign.save(update_fields=["name", "lease_minutes", "show_evidence", "guidelines"])
        campaign.annotators.set(users)
        fact_review_leases_release_outside_pool(campaign=campaign)
    return campaign


def fact_review_leases_release_outside_pool(*, campaign: Any) -> int:
    """Frees the open leases of people who left the pool, so their answers go to someone who may still review."""
    return _slots_release_outside_pool(pool=FACT_REVIEW_SLOTS, campaign=campaign)


def fact_review_claim(*, campaign: Any, user: Any, now: Any = None) -> Any:
    """The annotator's open review (lease extended), else the first free slot they may take, else None."""
    with transaction.atomic():
        claim = slot_claim(
            pool=FACT_REVIEW_SLOTS, campaign=campaign, user=user, now=now, details=ClaimDetails(related=("task",))
        )
        if claim is None:
            return None
        if not claim.resumed:
            # A lease taken over from someone whose lease expired starts clean.
            claim.slot.labels.all().delete()
            claim.slot.own_facts.all().delete()
    return claim.slot


def fact_review_skip(*, assignment: Any, user: Any, reason: str = "") -> None:
    with transaction.atomic():
        slot_skip(pool=FACT_REVIEW_SLOTS, slot=assignment, user=user, reason=reason[:200])
        assignment.labels.all().delete()
        assignment.own_facts.all().delete()


def _clean_fact_text(text: str) -> str:
    text = " ".join((text or "").split())
    if not text:
        raise ReviewError("a fact cannot be empty")
    if len(text) > MAX_FACT_TEXT:
        raise ReviewError(f"a fact has at most {MAX_FACT_TEXT} characters")
    bad = unstorable_character(text)
    if bad == NUL:
        raise ReviewError("a fact cannot contain a NUL character")
    if bad:
        raise ReviewError("a fact cannot contain an unpaired surrogate")
    return text


def _facts_replace(
    assignment: Any, parent: AtomicFact | None, answer_id: int, texts: list[str], origin: str
) -> list[AtomicFact]:
    """The reviewer's facts in place of a model fact (its split parts or its rewording): their earlier version of
    that fact and its labels go."""
    assert parent is not None
    AtomicFact.objects.filter(review_assignment=assignment, parent=parent).delete()
    assignment.labels.filter(fact=parent).delete()
    return [
        AtomicFact.objects.create(
            answer_id=answer_id,
            position=parent.position,
            text=text,
            origin=origin,
            parent=parent,
            review_assignment=assignment,
        )
        for text in texts
    ]


def fact_review_edit(
    *, assignment: Any, user: Any, operation: str, fact_id: int | None = None, text: str = ""
) -> list[Any]:
    """A reviewer's own version of the fact list: split or reword a model fact, add one, or undo.

    The model fact is never changed; the new rows point at it and belong to this assignment only.
    Returns the facts created (empty for undo).
    """

    assignment.refresh_from_db(fields=["annotator", "status"])  # a lease may have passed to someone else
    if assignment.annotator_id != user.pk or assignment.status != FactReviewStatus.LEASED:
        raise ReviewNotLeased()
    answer_id = assignment.task.answer_id
    parent = None
    if operation in ("split", "reword", "undo"):
        parent = (
            AtomicFact.objects.filter(pk=fact_id, answer_id=answer_id, origin=FactOrigin.MODEL).first()
            if fact_id is not None
            else None
        )
        if parent is None:
            raise ReviewError("no such fact in this answer")
    with transaction.atomic():
        if operation == "undo":
            assert parent is not None
            AtomicFact.objects.filter(review_assignment=assignment, parent=parent).delete()
            assignment.labels.filter(fact__parent=parent).delete()
            return []
        if operation == "remove_added":
            AtomicFact.objects.filter(review_assignment=assignment, origin=FactOrigin.ADDED, pk=fact_id or 0).delete()
            return []
        if AtomicFact.objects.filter(review_assignment=assignment).count() >= MAX_OWN_FACTS:
            raise ReviewError(f"at most {MAX_OWN_FACTS} edited or added facts per answer")
        if operation == "split":
            assert parent is not None
            parts = [_clean_fact_text(line) for line in (text or "").splitlines() if line.strip()]
            if len(parts) < 2:
                raise ReviewError("a split needs at least two facts, one per line")
            return _facts_replace(assignment, parent, answer_id, parts, FactOrigin.SPLIT)
        if operation == "reword":
            return _facts_replace(assignment, parent, answer_id, [_clean_fact_text(text)], FactOrigin.REWORD)
        if operation == "add":
            new_text = _clean_fact_text(text)
            return [
                AtomicFact.objects.create(
                    answer_id=answer_id,
                    position=100_000,
                    text=new_text,
                    origin=FactOrigin.ADDED,
                    review_assignment=assignment,
                )
            ]
    raise ReviewError("unknown operation")


def reviewer_facts(assignment: Any) -> list[Any]:
    """The facts this reviewer labels: model facts they did not replace, then their own, in answer order."""

    own = list(AtomicFact.objects.filter(review_assignment=assignment).order_by("position", "id"))
    replaced = {fact.parent_id for fact in own if fact.parent_id}
    model = [
        fact
        for fact in AtomicFact.objects.filter(answer_id=assignment.task.answer_id, origin=FactOrigin.MODEL).order_by(
            "position", "id"
        )
        if fact.pk not in replaced
    ]
    return sorted(model + own, key=lambda f: (f.position, f.origin != FactOrigin.MODEL, f.pk))


def fact_review_submit(
    *, assignment: Any, user: Any, labels: dict[int, str], seconds_spent: float | None = None, comment: str = ""
) -> None:
    """Store one label per fact of the reviewer's list; every fact must be labelled, no foreign ids."""

    assignment.refresh_from_db(fields=["annotator", "status"])
    if assignment.annotator_id != user.pk or assignment.status != FactReviewStatus.LEASED:
        raise ReviewNotLeased()
    facts = reviewer_facts(assignment)
    wanted = {fact.pk for fact in facts}
    foreign = set(labels) - wanted
    if foreign:
        raise ReviewError("labels for facts that are not part of this task")
    missing = [fact for fact in facts if fact.pk not in labels]
    if missing:
        raise ReviewError(f"{len(missing)} fact(s) have no label yet")
    if any(value not in HumanFactLabel.values for value in labels.values()):
        raise ReviewError("a label must be supported, not_supported or irrelevant")
    if len(comment) > 10_000:
        raise ReviewError("the comment is too long")
    bad = unstorable_character(comment)
    if bad == NUL:
        raise ReviewError("the comment cannot contain a NUL character")
    if bad:
        raise ReviewError("the comment cannot contain an unpaired surrogate")
    spent = max(0.0, float(seconds_spent)) if seconds_spent is not None else None
    with transaction.atomic():
        if not slot_complete(
            pool=FACT_REVIEW_SLOTS, slot=assignment, user=user, now=timezone.now(), seconds_spent=spent
        ):
            raise ReviewNotLeased()
        FactLabel.objects.filter(assignment_id=assignment.pk).delete()
        FactLabel.objects.bulk_create(
            [FactLabel(assignment_id=assignment.pk, fact_id=fact_id, label=label) for fact_id, label in labels.items()]
        )
        FactReviewAssignment.objects.filter(pk=assignment.pk).update(comment=comment)
