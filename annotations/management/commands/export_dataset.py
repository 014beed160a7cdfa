import os
import sys
from collections.abc import Iterator

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.exporting import iter_export_lines, iter_flat_csv, iter_flat_jsonl, iter_flat_rows
from annotations.models import Dataset
from annotations.selectors import dataset_by_name


class Command(BaseCommand):
    help = "Export a dataset as JSONL in the import format, or one row per rating with --flat (JSONL or CSV)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="dataset name")
        parser.add_argument("--out", help="output file (default: standard output)")
        parser.add_argument("--include-judges", action="store_true", help="add judge-run scores under auto_evals")
        parser.add_argument("--flat", action="store_true", help="one row per rating")
        parser.add_argument("--format", choices=["jsonl", "csv"], help="flat format (default: from --out, else jsonl)")

    def handle(self, *args: object, **options: object) -> None:
        try:
            dataset = dataset_by_name(str(options["name"]))
        except Dataset.DoesNotExist:
            raise CommandError(f"no dataset named {options['name']!r}") from None
        out = options["out"]
        chunks: Iterator[str]
        if options["flat"]:
            fmt = options["format"] or ("csv" if isinstance(out, str) and out.lower().endswith(".csv") else "jsonl")
            rows = iter_flat_rows(dataset=dataset)
            chunks = iter_flat_csv(rows) if fmt == "csv" else iter_flat_jsonl(rows)
        else:
            if options["format"] == "csv":
                raise CommandError("--format csv needs --flat: the nested format is JSONL only")
            chunks = iter_export_lines(dataset=dataset, include_judges=bool(options["include_judges"]))
        if out:
            tmp_path = f"{out}.partial"
            with open(str(tmp_path), "w", encoding="utf-8", newline="") as handle:
                for chunk in chunks:
                    handle.write(chunk)
            # Written beside the target and renamed, so a failed export never leaves a truncated file behind.
            os.replace(tmp_path, str(out))
        else:
            for chunk in chunks:
                sys.stdout.write(chunk)
            sys.stdout.flush()
