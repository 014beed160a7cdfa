from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.datasets.importing import dataset_import
from annotations.errors import DatasetImportError, RubricError
from annotations.management.import_report import write_import_result
from annotations.management.owners import owner_option
from annotations.rubrics.specs import PRESETS, load_rubric_file


class Command(BaseCommand):
    help = "Import a JSONL dataset atomically: all lines or nothing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="JSONL file, one item per line")
        parser.add_argument("--name", required=True, help="dataset name (unique)")
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--rubric", help="rubric JSON file (aspects with their ranges and levels)")
        group.add_argument("--preset", choices=sorted(PRESETS), help="built-in rubric")
        parser.add_argument("--owner", help="username of the researcher who owns the dataset")

    def handle(self, *args: object, **options: object) -> None:
        owner = owner_option(options["owner"])
        try:
            rubric = load_rubric_file(str(options["rubric"])) if options["rubric"] else None
            with open(str(options["path"]), "rb") as stream:
                result = dataset_import(
                    stream=stream,
                    name=str(options["name"]),
                    rubric=rubric,
                    preset=str(options["preset"]) if options["preset"] else None,
                    owner=owner,
                )
        except OSError as exc:
            raise CommandError(f"cannot read {options['path']}: {exc.strerror}") from None
        except (DatasetImportError, RubricError) as exc:
            raise CommandError(f"{options['path']}: {exc} (nothing was imported)") from None
        write_import_result(self, result)
