"""The annotate benchmark's campaign: a generated dataset imported into a fresh database with one campaign and its
annotators' API tokens, grown in SQL to a large campaign on request, and the checks of what the run stored."""

import io
import json
import os
import random
import sys
import time

from bench.annotate_server import ROOT


def _generated_jsonl(items: int, systems: int) -> bytes:
    rng = random.Random(0)
    words = [
        "voice",
        "bone",
        "air",
        "skull",
        "sound",
        "frequency",
        "recording",
        "ear",
        "speaker",
        "listener",
        "pitch",
        "resonance",
    ]
    lines = []
    for i in range(items):
        responses = {
            f"llm_{chr(97 + s)}": {"response": " ".join(rng.choice(words) for _ in range(rng.randint(40, 160)))}
            for s in range(systems)
        }
        lines.append(json.dumps({"id": f"q{i}", "turns": [{"prompt": f"Question {i}?", "responses": responses}]}))
    return ("\n".join(lines) + "\n").encode()


def set_up_campaign(
    database_url: str, *, items: int, systems: int, annotators: int, raters: int, tasks: int | None
) -> tuple[int, list[str]]:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from annotations.campaigns.setup import campaign_create
    from annotations.datasets.importing import dataset_import

    call_command("migrate", verbosity=0)
    dataset = dataset_import(
        stream=io.BytesIO(_generated_jsonl(items, systems)), name="bench", preset="lfqa-multiaspect"
    ).dataset
    users = [User.objects.create_user(f"bench{i}") for i in range(annotators)]
    campaign = campaign_create(
        name="bench", dataset=dataset, raters_per_item=raters, annotators=users, lease_minutes=30
    )
    tokens = [Token.objects.create(user=user).key for user in users]
    from django.db import connection, connections

    if tasks and tasks > items:
        _grow_campaign(campaign.pk, dataset.pk, items=items, tasks=tasks, raters=raters)
    with connection.cursor() as cursor:
        # The database as a live one stands when annotators arrive, long after the campaign was made: vacuumed (so
        # autovacuum does not start on the new rows inside the timed phases, and their first readers do not dirty
        # every page setting hint bits), analysed, and its dirty pages written out by a checkpoint.
        cursor.execute("VACUUM (ANALYZE)")
        cursor.execute("CHECKPOINT")
    connections.close_all()
    return campaign.pk, tokens


# A large campaign is grown in SQL from the imported one: item g is a copy of item g mod `items` (its turn and answers
# too), and its task comes after the imported ones in hand-out order, with the N free slots campaign_create would
# give it. Four INSERT … SELECT statements instead of an import of the whole dataset.
_GROW_CAMPAIGN_SQL = (
    """INSERT INTO annotations_item (external_id, position, source, dataset_id)
    SELECT 'q' || g, g, model.source, model.dataset_id
    FROM generate_series(%(items)s, %(tasks)s - 1) g
    JOIN annotations_item model ON model.dataset_id = %(dataset)s AND model.position = g %% %(items)s""",
    """INSERT INTO annotations_turn (index, prompt, reference, context, source, item_id)
    SELECT model_turn.index, 'Question ' || item.position || '?', model_turn.reference, model_turn.context,
           model_turn.source, item.id
    FROM annotations_item item
    JOIN annotations_item model ON model.dataset_id = item.dataset_id AND model.position = item.position %% %(items)s
    JOIN annotations_turn model_turn ON model_turn.item_id = model.id
    WHERE item.dataset_id = %(dataset)s AND item.position >= %(items)s""",
    """INSERT INTO annotations_response (position, text, source, eval_aspects, has_human_evals, system_id, turn_id)
    SELECT answer.position, answer.text, answer.source, answer.eval_aspects, answer.has_human_evals, answer.system_id,
           turn.id
    FROM annotations_item item
    JOIN annotations_turn turn ON turn.item_id = item.id
    JOIN annotations_item model ON model.dataset_id = item.dataset_id AND model.position = item.position %% %(items)s
    JOIN annotations_turn model_turn ON model_turn.item_id = model.id AND model_turn.index = turn.index
    JOIN annotations_response answer ON answer.turn_id = model_turn.id
    WHERE item.dataset_id = %(dataset)s AND item.position >= %(items)s""",
    """INSERT INTO annotations_task (chunk, position, campaign_id, turn_id, is_gold, human_stratum)
    SELECT 0, item.position, %(campaign)s, turn.id, FALSE, ''
    FROM annotations_item item JOIN annotations_turn turn ON turn.item_id = item.id
    WHERE item.dataset_id = %(dataset)s AND item.position >= %(items)s""",
    """INSERT INTO annotations_task_responses (task_id, response_id)
    SELECT task.id, answer.id
    FROM annotations_task task JOIN annotations_response answer ON answer.turn_id = task.turn_id
    WHERE task.campaign_id = %(campaign)s AND task.position >= %(items)s""",
    """INSERT INTO annotations_assignment (task_position, slot, slot_limit, status, campaign_id, task_id, is_gold)
    SELECT task.position, slot, %(raters)s, 'free', task.campaign_id, task.id, FALSE
    FROM annotations_task task CROSS JOIN generate_series(1, %(raters)s) slot
    WHERE task.campaign_id = %(campaign)s AND task.position >= %(items)s""",
)


def _grow_campaign(campaign_id: int, dataset_id: int, *, items: int, tasks: int, raters: int) -> None:
    from django.db import connection, transaction

    started = time.monotonic()
    params = {"campaign": campaign_id, "dataset": dataset_id, "items": items, "tasks": tasks, "raters": raters}
    with transaction.atomic(), connection.cursor() as cursor:
        for statement in _GROW_CAMPAIGN_SQL:
            cursor.execute(statement, params)
    print(f"grew the campaign to {tasks} tasks x {raters} slots in {time.monotonic() - started:.1f}s", flush=True)


def check_database(acknowledged: list[str], raters: int) -> dict[str, int]:
    from django.db.models import Count, F, Q, Sum

    from annotations.models import Assignment, AssignmentStatus, Campaign, Rating, RatingOrigin, Submission, Task

    keys = set(Submission.objects.values_list("idempotency_key", flat=True))
    submitted = len(keys)
    lost = sum(1 for key in set(acknowledged) if key not in keys)
    aspects = Campaign.objects.get(name="bench").aspects.count()
    candidates = (
        Task.objects.filter(assignments__submission__isnull=False)
        .annotate(n=Count("responses", distinct=True), done=Count("assignments__submission", distinct=True))
        .aggregate(total=Sum(F("n") * F("done")))["total"]
        or 0
    )
    expected_ratings = candidates * aspects
    app_ratings = Rating.objects.filter(origin=RatingOrigin.APP).count()
    lost += max(0, expected_ratings - app_ratings)
    duplicated = max(0, app_ratings - expected_ratings) + (len(acknowledged) - len(set(acknowledged)))
    duplicated += Rating.objects.values("response", "aspect", "rater").annotate(n=Count("pk")).filter(n__gt=1).count()
    held = Q(assignments__status__in=[AssignmentStatus.SUBMITTED, AssignmentStatus.LEASED])
    over_assigned = (
        Task.objects.annotate(
            people=Count("assignments__annotator", filter=held, distinct=True),
            slots=Count("assignments", filter=held),
        )
        .filter(Q(people__gt=raters) | Q(slots__gt=raters) | ~Q(slots=F("people")))
        .count()
    )
    over_assigned += (
        Assignment.objects.filter(annotator__isnull=False)
        .values("task", "annotator")
        .annotate(n=Count("pk"))
        .filter(n__gt=1)
        .count()
    )
    return {"submitted": submitted, "lost": lost, "duplicated": duplicated, "over_assigned": over_assigned}
