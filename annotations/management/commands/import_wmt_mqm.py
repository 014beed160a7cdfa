from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.datasets.mqm_import import mqm_tsv_import
from annotations.errors import DatasetImportError
from annotations.management.owners import owner_option


class Command(BaseCommand):
    help = (
        "Import a public WMT MQM TSV (google/wmt-mqm-human-evaluation: system, doc, doc_id, seg_id, rater, source, "
        "target with <v>…</v> marks, category, severity) as a dataset with one MQM span aspect, atomically."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="the MQM .tsv file")
        parser.add_argument("--dataset", "--name", dest="name", required=True, help="dataset name (unique)")
        parser.add_argument("--owner", help="username of the researcher who owns the dataset")

    def handle(self, *args: object, **options: object) -> None:
        owner = owner_option(options["owner"])
        try:
            with open(str(options["path"]), encoding="utf-8", newline="") as handle:
                result = mqm_tsv_import(stream=handle, name=str(options["name"]), owner=owner)
        except OSError as exc:
            raise CommandError(f"{options['path']}: {exc}") from None
        except DatasetImportError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"imported {result.items} segments, {result.responses} translations and {result.ratings} MQM ratings "
            f"into dataset {result.dataset.name!r}"
        )
