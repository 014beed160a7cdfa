"""What the certification commands share: the judge version and reference set named on the command line, and the
wait for the worker's verdict on a row it is deciding."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.core.management.base import CommandError, CommandParser
from django.db.models import Model

from annotations.management.lookup import add_owner_argument
from annotations.models import Dataset
from judging.certification import selectors
from judging.models import JudgeVersion, ReferenceSet


def add_version_arguments(parser: CommandParser, *, judge_help: str) -> None:
    """`--dataset`, `--judge` (the run whose version is meant) and `--reference-set`, as
    `version_and_reference_set_or_error` reads them."""
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--judge", required=True, help=judge_help)
    parser.add_argument("--reference-set", required=True)


def add_wait_and_owner_arguments(parser: CommandParser, *, outcome: str) -> None:
    """`--wait` for the worker's `outcome` (as `wait_for_worker` takes it), then the datasets' owner."""
    parser.add_argument("--wait", type=float, default=0.0, help=f"seconds to wait for the {outcome} (0: do not)")
    add_owner_argument(parser)


def version_and_reference_set_or_error(
    dataset: Dataset, options: dict[str, object]
) -> tuple[JudgeVersion, ReferenceSet]:
    """The version of the `--judge` run and the `--reference-set`, or a command error that names the missing one."""
    try:
        return selectors.judge_version_and_reference_set(dataset, str(options["judge"]), str(options["reference_set"]))
    except LookupError as exc:
        raise CommandError(str(exc)) from None


def wait_for_worker(row: Model, decided: Callable[[], bool], seconds: float) -> None:
    """Reads the row again until `decided()` or `seconds` have passed (0: does not wait); the worker writes the verdict,
    so the database is polled."""
    deadline = time.monotonic() + seconds
    while seconds and time.monotonic() < deadline:
        row.refresh_from_db()
        if decided():
            break
        time.sleep(0.5)
