import dataclasses
import json
from contextlib import ExitStack

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.datasets.mapped_import import MappedTable, mapped_import, mapped_preview
from annotations.datasets.mapping import MappingError, load_mapping, ready_made_mappings
from annotations.datasets.tables import DEFAULT_DUPLICATES, DUPLICATE_POLICIES
from annotations.errors import DatasetImportError, RubricError
from annotations.management.import_report import write_import_result
from annotations.management.owners import owner_option
from annotations.rubrics.specs import PRESETS, load_rubric_file, preset_rubric


class Command(BaseCommand):
    help = (
        "Import a CSV, TSV, JSONL or Parquet table through a column mapping (a ready-made one or a JSON/TOML file), "
        "atomically: all rows or nothing. Several files are read in order into one dataset."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="the table(s): .csv, .tsv, .jsonl or .parquet")
        parser.add_argument(
            "--mapping",
            required=True,
            help=f"a mapping file (JSON or TOML) or a ready-made mapping: {', '.join(ready_made_mappings())}",
        )
        parser.add_argument("--dataset", "--name", dest="name", help="dataset name (unique); not with --preview")
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--rubric", help="rubric JSON file, instead of the mapping's")
        group.add_argument("--preset", choices=sorted(PRESETS), help="built-in rubric, instead of the mapping's")
        parser.add_argument("--owner", help="username of the researcher who owns the dataset")
        parser.add_argument(
            "--duplicates",
            choices=DUPLICATE_POLICIES,
            default=DEFAULT_DUPLICATES,
            help="exactly repeated rows of a table: refuse them (the default; the error names both rows), drop them "
            "(keep the first) or keep them all",
        )
        parser.add_argument(
            "--preview", action="store_true", help="check everything and print the first items and the rubric"
        )

    def handle(self, *args: object, **options: object) -> None:
        if not options["preview"] and not options["name"]:
            raise CommandError("--dataset NAME is required (or --preview)")
        owner = owner_option(options["owner"])
        paths = [str(p) for p in options["paths"]]  # type: ignore[attr-defined]
        try:
            mapping = load_mapping(str(options["mapping"]))
            if options["rubric"]:
                mapping = dataclasses.replace(mapping, rubric=load_rubric_file(str(options["rubric"])))
            elif options["preset"]:
                mapping = dataclasses.replace(mapping, rubric=preset_rubric(str(options["preset"])))
            with ExitStack() as stack:
                tables = [MappedTable(path, stack.enter_context(open(path, "rb"))) for path in paths]
                if options["preview"]:
                    preview = mapped_preview(tables=tables, mapping=mapping, duplicates=str(options["duplicates"]))
                    self.stdout.write(
                        json.dumps(
                            {
                                "items": preview.n_items,
                                "rows": preview.n_rows,
                                "answers": preview.n_answers,
                                "ratings": preview.n_ratings,
                                "preferences": preview.n_preferences,
                                "judge_scores": preview.n_judge_scores,
                                "tables": preview.read.tables,
                                "duplicates": {"choice": preview.read.duplicates, "repeated": preview.read.repeated},
                                "rubric": preview.rubric.source if preview.rubric.source != "inferred" else "inferred",
                                "aspects": [
                                    {"name": a.name, "min": a.min_value, "max": a.max_value, "level": a.level}
                                    for a in preview.rubric.aspects
                                ],
                                "notice": preview.notice,
                                "first_items": preview.items,
                            },
                            ensure_ascii=False,
                            indent=2,
                        )
                    )
                    return
                imported = mapped_import(
                    tables=tables,
                    mapping=mapping,
                    name=str(options["name"]),
                    owner=owner,
                    duplicates=str(options["duplicates"]),
                )
        except OSError as exc:
            raise CommandError(f"cannot read {exc.filename}: {exc.strerror}") from None
        except (MappingError, RubricError) as exc:
            raise CommandError(f"{options['mapping']}: {exc}") from None
        except DatasetImportError as exc:
            where = paths[0] if len(paths) == 1 else ", ".join(paths)
            raise CommandError(f"{where}: {exc} (nothing was imported)") from None
        result = imported.result
        for table in imported.read.tables:
            self.stdout.write(f"read {table}")
        self.stdout.write(imported.read.duplicates_summary())
        write_import_result(self, result)
