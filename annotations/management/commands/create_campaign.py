from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.campaigns.errors import CampaignError
from annotations.campaigns.setup import campaign_create
from annotations.management.lookup import add_owner_argument, dataset_or_error


def _names(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


class Command(BaseCommand):
    help = (
        "Open an annotation campaign on a dataset: every turn becomes a task (or several, with "
        "--candidates-per-task) that exactly --raters-per-item distinct annotators will rate, blind."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="campaign name (unique within the dataset)")
        parser.add_argument("--dataset", required=True, help="dataset name")
        add_owner_argument(parser)
        parser.add_argument("--raters-per-item", type=int, default=3, help="distinct raters per task (default 3)")
        parser.add_argument(
            "--candidates-per-task", type=int, default=None, help="answers per task (default: all answers of a turn)"
        )
        parser.add_argument("--annotators", default="", help="comma-separated usernames of the annotator pool")
        parser.add_argument("--aspects", default="", help="comma-separated aspect names to show (default: all)")
        parser.add_argument("--guidelines", type=Path, help="markdown file with the instructions")
        parser.add_argument("--show-reference", action="store_true", help="show the reference answer")
        parser.add_argument("--hide-context", action="store_true", help="do not show knowledge passages")
        parser.add_argument("--no-preference", action="store_true", help="do not ask which candidate is preferred")
        parser.add_argument("--optional-rationale", action="store_true", help="the reason text may be left empty")
        parser.add_argument("--lease-minutes", type=int, default=30, help="how long a task stays reserved (30)")
        parser.add_argument(
            "--gold-rate",
            type=float,
            default=0,
            help="share of each annotator's tasks drawn from gold items and attention checks, 0 to 0.5 (0)",
        )
        parser.add_argument(
            "--scale-dropdowns",
            action="store_true",
            help="show every scale as a drop-down (default: rows of buttons up to 7 values)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        dataset = dataset_or_error(str(options["dataset"]), options["owner"])
        guidelines = ""
        if options["guidelines"]:
            try:
                guidelines = options["guidelines"].read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"cannot read the guidelines file: {exc}") from None
        try:
            campaign = campaign_create(
                name=options["name"],
                dataset=dataset,
                raters_per_item=options["raters_per_item"],
                candidates_per_task=options["candidates_per_task"],
                annotators=_names(options["annotators"]),
                aspects=_names(options["aspects"]) or None,
                guidelines=guidelines,
                show_reference=options["show_reference"],
                show_context=not options["hide_context"],
                ask_preference=not options["no_preference"],
                rationale_required=not options["optional_rationale"],
                lease_minutes=options["lease_minutes"],
                scale_dropdowns=options["scale_dropdowns"],
                gold_rate=options["gold_rate"],
            )
        except CampaignError as exc:
            raise CommandError(str(exc)) from None
        tasks = campaign.tasks.count()
        self.stdout.write(
            f"Campaign {campaign.name!r} (id {campaign.pk}) on {dataset.name!r}: {tasks} tasks x "
            f"{campaign.raters_per_item} raters, {campaign.annotators.count()} annotators in the pool."
        )
