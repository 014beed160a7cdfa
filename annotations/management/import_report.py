"""What the import commands print once a dataset is in: the notice, if any, and the counts of what was imported."""

from django.core.management.base import BaseCommand

from annotations.datasets.import_writer import ImportResult


def write_import_result(command: BaseCommand, result: ImportResult) -> None:
    if result.notice:
        command.stderr.write(command.style.WARNING(f"notice: {result.notice}"))
    command.stdout.write(
        command.style.SUCCESS(
            f"imported dataset {result.dataset.name!r} (id {result.dataset.pk}): {result.items} items, "
            f"{result.turns} turns, {result.responses} answers, {result.ratings} ratings, "
            f"{result.judge_scores} judge scores"
        )
    )
