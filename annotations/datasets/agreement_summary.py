"""The rater-agreement report that a dataset card (the Hugging Face folder export) summarises.

The statistics live in the judging app, and the annotations domain does not import the judge. So judging registers
its report function when its app is ready (`judging.apps`), and the exports reach it only through here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from annotations.models import Dataset

AgreementReport = Callable[["Dataset"], dict[str, Any]]

_report: AgreementReport | None = None


def agreement_report_register(report: AgreementReport) -> None:
    global _report
    _report = report


def agreement_report(dataset: Dataset) -> dict[str, Any]:
    if _report is None:
        raise ImproperlyConfigured("no agreement report is registered: is the judging app installed?")
    return _report(dataset)
