"""The dataset overview: the researcher's map of the whole loop for one dataset (its rubric, campaigns, judge runs,
statistics pages and exports), each linked to the page where the work happens."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from judging import selectors
from judging.analysis.dashboard import researcher_required
from judging.analysis.selectors import dataset_for_stats_or_404
from judging.certification.selectors import standing_of_judge_ids


@require_GET
@researcher_required
def dataset_overview(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = dataset_for_stats_or_404(request.user, dataset_id)
    runs = list(selectors.judge_runs_of_dataset(dataset))
    standings = standing_of_judge_ids([run.judge_id for run in runs])
    for run in runs:
        run.certification_standing = standings[run.judge_id]  # type: ignore[attr-defined]
    context = {
        "dataset": dataset,
        "page": "overview",
        "counts": selectors.dataset_counts(dataset),
        "aspects": list(dataset.aspects.order_by("position")),
        "rubric_source": getattr(getattr(dataset, "rubric", None), "source", ""),
        "campaigns": selectors.campaign_fills_of_dataset(dataset),
        "runs": runs,
    }
    return render(request, "dashboard/overview.html", context)
