from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.management.lookup import dataset_or_error
from judging.certification.evaluations import CertificationError
from judging.certification.teaching import (
    DEFAULT_PER_LEVEL,
    DEFAULT_TEACH_ALPHA,
    DEFAULT_TEACH_SEED,
    judge_version_teach,
)
from judging.management import judge_versions
from judging.models import JudgeTeaching, TeachingDecision, TeachingStatus


class Command(BaseCommand):
    help = (
        "Teach a judge version rated examples from a frozen reference set: the examples are the answers its raters "
        "agree on most, balanced across score levels; the taught version and the old one judge the held-out answers, "
        "and the taught one is kept only when Williams's t finds it agrees better with the raters."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        judge_versions.add_version_arguments(parser, judge_help="name of a judge run whose version is taught")
        parser.add_argument("--per-level", type=int, default=DEFAULT_PER_LEVEL, help="examples per score level")
        parser.add_argument("--seed", type=int, default=DEFAULT_TEACH_SEED, help="breaks ties between answers")
        parser.add_argument("--alpha", type=float, default=DEFAULT_TEACH_ALPHA, help="the comparison's level")
        judge_versions.add_wait_and_owner_arguments(parser, outcome="decision")

    def handle(self, *args: object, **options: object) -> None:
        dataset = dataset_or_error(str(options["dataset"]), options["owner"])
        version, reference = judge_versions.version_and_reference_set_or_error(dataset, options)
        try:
            teaching = judge_version_teach(
                version=version,
                reference_set=reference,
                requested_by=None,
                per_level=int(str(options["per_level"])),
                seed=int(str(options["seed"])),
                alpha=float(str(options["alpha"])),
            )
        except CertificationError as exc:
            raise CommandError(str(exc)) from None
        for aspect, row in sorted(teaching.selection.items()):
            missing = ", ".join(f"{level:g}" for level in row.get("missing_levels", [])) or "none"
            self.stdout.write(f"{aspect}: {len(row.get('chosen', []))} example(s); levels without one: {missing}")
        self.stdout.write(f"teaching {teaching.pk}: both versions judge {teaching.held_out} held-out answers")
        judge_versions.wait_for_worker(
            teaching, lambda: teaching.status == TeachingStatus.DONE, float(str(options["wait"]))
        )
        self._print(teaching)

    def _print(self, teaching: JudgeTeaching) -> None:
        teaching.refresh_from_db()
        if teaching.status != TeachingStatus.DONE:
            self.stdout.write(f"teaching {teaching.pk}: {teaching.status}")
            return
        taught = teaching.taught_version.short if teaching.taught_version is not None else "none"
        self.stdout.write(f"teaching {teaching.pk}: {teaching.decision} (taught version {taught})")
        self.stdout.write(f"  {teaching.reason}")
        if teaching.decision == TeachingDecision.UNDEFINED:
            raise CommandError(f"not kept: {teaching.reason}")
