import os
import sys

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.datasets.agreement_summary import agreement_report
from annotations.datasets.downloads import export_filename, export_kind, iter_export
from annotations.datasets.parquet_export import binary_export_filename, export_parquet_table, write_hf_folder
from annotations.management.lookup import add_owner_argument, dataset_or_error


class Command(BaseCommand):
    help = (
        "Export a dataset as JSONL in the import format (with the collected preferences per turn), or with --flat one "
        "row per rating plus one per preference (JSONL or CSV)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="dataset name")
        add_owner_argument(parser)
        parser.add_argument(
            "--out",
            help="output file, or a directory to write the file named after the dataset into "
            "(e.g. demo-llm-jp.flat.csv); default: standard output",
        )
        parser.add_argument("--include-judges", action="store_true", help="add judge-run scores under auto_evals")
        parser.add_argument("--flat", action="store_true", help="one row per rating and one per preference")
        parser.add_argument("--format", choices=["jsonl", "csv"], help="flat format (default: from --out, else jsonl)")
        parser.add_argument(
            "--history", action="store_true", help="with --flat: also the earlier versions of corrected answers"
        )
        parser.add_argument(
            "--rubric", action="store_true", help="write the rubric file (name.rubric.json) instead of the data"
        )
        parser.add_argument(
            "--parquet",
            choices=["answers", "ratings", "preferences", "error_spans"],
            help="one table as Parquet with typed columns (name.<table>.parquet); needs --out",
        )
        parser.add_argument(
            "--hf-folder",
            metavar="DIR",
            help="write the folder Hugging Face datasets reads: README.md (the dataset card), rubric.json and "
            "data/{answers,ratings,preferences,error_spans}.parquet",
        )

    def handle(self, *args: object, **options: object) -> None:
        dataset = dataset_or_error(str(options["name"]), options["owner"])
        out = str(options["out"]) if options["out"] else None
        if options["hf_folder"]:
            folder = write_hf_folder(
                dataset=dataset, path=str(options["hf_folder"]), agreement=agreement_report(dataset)
            )
            self.stdout.write(f"wrote {folder}")
            return
        if options["parquet"]:
            if not out:
                raise CommandError("--parquet needs --out: Parquet is binary")
            kind = f"{str(options['parquet']).replace('_', '-')}-parquet"
            if os.path.isdir(out):
                out = os.path.join(out, binary_export_filename(dataset, kind))
            tmp_path = f"{out}.partial"
            rows = export_parquet_table(dataset=dataset, table=str(options["parquet"]), target=tmp_path)
            os.replace(tmp_path, out)
            self.stdout.write(f"wrote {rows} rows to {out}")
            return
        flat = ""
        if options["flat"]:
            flat = str(options["format"] or ("csv" if out and out.lower().endswith(".csv") else "jsonl"))
            if options["include_judges"]:
                self.stderr.write("--include-judges is ignored with --flat: the flat layout has no judge scores")
        elif options["format"] == "csv":
            raise CommandError("--format csv needs --flat: the nested format is JSONL only")
        elif options["history"]:
            raise CommandError("--history needs --flat: the nested format carries the current answers only")
        kind = export_kind(
            flat=flat,
            include_judges=bool(options["include_judges"]),
            history=bool(options["history"]),
            rubric=bool(options["rubric"]),
        )
        chunks = iter_export(dataset=dataset, kind=kind)
        if out:
            if os.path.isdir(out):
                out = os.path.join(out, export_filename(dataset, kind))
            tmp_path = f"{out}.partial"
            with open(tmp_path, "w", encoding="utf-8", newline="") as handle:
                for chunk in chunks:
                    handle.write(chunk)
            # Written beside the target and renamed, so a failed export never leaves a truncated file behind.
            os.replace(tmp_path, out)
        else:
            for chunk in chunks:
                sys.stdout.write(chunk)
            sys.stdout.flush()
