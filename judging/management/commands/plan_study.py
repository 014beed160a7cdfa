from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations

from judging.analysis.decisions import PLAN_STATISTICS, PlanningError, PlanRequest, plan_study


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = (
        "Items a study needs: for a target 95% interval width (--width; Pearson by Fisher's z, Spearman and Kendall "
        "by Bonett & Wright 2000, ICC for k raters by Bonett 2002), for a power (--power, --null; Pearson, two-sided "
        "test), or Krippendorff's minimum number of values for two coders (--statistic alpha)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--statistic", required=True, choices=PLAN_STATISTICS)
        parser.add_argument("--expected", type=float, help="the planning value of the statistic")
        parser.add_argument("--width", type=float, help="full width of the interval (upper - lower), below 2")
        parser.add_argument("--raters", type=int, help="raters per item (ICC)")
        parser.add_argument("--confidence", type=float, default=0.95, help="default 0.95")
        parser.add_argument("--power", type=float, help="power of a two-sided test against --null")
        parser.add_argument("--null", type=float, default=0.0, help="null value of the correlation (default 0)")
        parser.add_argument("--significance", type=float, default=0.05, help="default 0.05")
        parser.add_argument("--alpha-min", type=float, help="smallest acceptable Krippendorff's alpha")
        parser.add_argument("--smallest-category", type=float, help="share of the rarest category")
        parser.add_argument("--json", action="store_true", help='print {"items": N}')

    @no_translations
    def handle(self, *args: object, **options: Any) -> None:
        request = PlanRequest(
            statistic=str(options["statistic"]),
            expected=options["expected"],
            width=options["width"],
            raters=options["raters"],
            confidence=float(options["confidence"]),
            power=options["power"],
            null=float(options["null"]),
            significance=float(options["significance"]),
            alpha_min=options["alpha_min"],
            smallest_category=options["smallest_category"],
        )
        try:
            plan = plan_study(request)
        except PlanningError as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps(plan))
            return
        self.stdout.write(f"Items needed: {plan['items']}")
