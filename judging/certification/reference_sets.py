"""Reference sets: human ratings frozen when named, which certificates, drift checks and teachings are measured on."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from annotations.models import Campaign, Dataset, Rating, RatingOrigin
from judging.certification.evaluations import CertificationError
from judging.certification.selectors import reference_ratings_for
from judging.models import JudgeVersion, ReferenceRating, ReferenceSet


@transaction.atomic
def reference_set_create(
    *, dataset: Dataset, name: str, owner: User | None, campaign: Campaign | None = None, origin: str = "all"
) -> ReferenceSet:
    """Name a reference set and freeze it: its ratings are copied now and never change afterwards.

    A campaign's set holds the ratings its annotators gave in its tasks (gold tasks left out); otherwise the set holds
    the dataset's ratings of the chosen origin (imported, made here, or all)."""
    name = name.strip()
    if not name or len(name) > 200:
        raise CertificationError("the reference set's name must have 1 to 200 characters")
    if ReferenceSet.objects.filter(dataset=dataset, name=name).exists():
        raise CertificationError(f"a reference set named {name!r} already exists in this dataset")
    if origin not in ("all", RatingOrigin.IMPORT, RatingOrigin.APP):
        raise CertificationError(f"origin must be all, import or app, not {origin!r}")
    ratings = Rating.objects.filter(response__turn__item__dataset=dataset, is_missing=False, value__isnull=False)
    if campaign is not None:
        if campaign.dataset_id != dataset.pk:
            raise CertificationError("the campaign belongs to another dataset")
        ratings = ratings.filter(
            origin=RatingOrigin.APP,
            aspect__in=campaign.aspects.all(),
            response__campaign_tasks__campaign=campaign,
            response__campaign_tasks__is_gold=False,
            rater__user__in=campaign.annotators.all(),
        ).distinct()
    elif origin != "all":
        ratings = ratings.filter(origin=origin)
    rows = list(ratings.values_list("response_id", "aspect__name", "aspect__level", "rater__pseudonym", "value"))
    if not rows:
        raise CertificationError("there are no human ratings in this scope to freeze")
    reference_set = ReferenceSet.objects.create(
        name=name, dataset=dataset, campaign=campaign, owner=owner, frozen_at=timezone.now()
    )
    ReferenceRating.objects.bulk_create(
        [
            ReferenceRating(
                reference_set=reference_set,
                response_id=response_id,
                aspect_name=aspect,
                aspect_level=level,
                rater_key=rater,
                value=value,
            )
            for response_id, aspect, level, rater, value in rows
            if value is not None  # the query asked for values; this says so to the type checker
        ],
        batch_size=2000,
    )
    return reference_set


def reference_response_ids(reference_set: ReferenceSet, *versions: JudgeVersion) -> list[int]:
    """The set's answers, less those the versions show as rated examples."""
    return sorted(set(reference_ratings_for(reference_set, *versions).values_list("response_id", flat=True)))
