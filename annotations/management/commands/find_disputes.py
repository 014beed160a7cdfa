from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.adjudication.services import campaign_disputes_find
from annotations.models import AdjudicationRule, Campaign


class Command(BaseCommand):
    help = (
        "Apply a campaign's adjudication rule to every task rated so far: finds the disputes of a campaign that ran "
        "before it had a rule or whose rule changed, and drops open ones whose raters no longer disagree. Settled "
        "disputes stay as they are. Safe to run twice."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("campaign_ids", nargs="+", type=int, metavar="CAMPAIGN_ID")

    def handle(self, *args: object, **options: object) -> None:
        ids = list(options["campaign_ids"])  # type: ignore[call-overload]
        campaigns = {c.pk: c for c in Campaign.objects.filter(pk__in=ids)}
        missing = [pk for pk in ids if pk not in campaigns]
        if missing:
            raise CommandError(f"no campaign with id {', '.join(map(str, missing))}")
        ruled = set(AdjudicationRule.objects.filter(campaign_id__in=ids).values_list("campaign_id", flat=True))
        without = [pk for pk in ids if pk not in ruled]
        if without:
            raise CommandError(
                f"campaign {', '.join(map(str, without))} has no adjudication rule: set a spread or preference splits "
                "on the campaign first"
            )
        for pk in ids:
            found = campaign_disputes_find(campaign=campaigns[pk])
            self.stdout.write(f"{campaigns[pk].name}: {found} disputes")
