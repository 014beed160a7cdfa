"""Researcher dashboard: agreement (dataset page), judges versus humans (judges page), calibration.

Views are thin: numbers come from ``judging.analysis.reports`` (the same code as the CLI and API), tables
from ``judging.analysis.tables`` and plot geometry from ``judging.analysis.plots``.

The researcher check, the scope and parameter parsing and the download responses the pages share are
``judging.analysis.dashboard``; each page function is short and renders one report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from annotations.campaigns.progress import campaign_progress
from annotations.models import Dataset
from annotations.selectors import campaign_for_researcher
from judging.analysis import tables
from judging.analysis.dashboard import (
    FORMATS,
    query_param,
    query_string,
    request_scope,
    researcher_required,
    scope_context,
    table_download,
)
from judging.analysis.decisions import campaign_plan, judge_matrix
from judging.analysis.forms import AltTestForm, CalibrationForm
from judging.analysis.judge_reports import DEFAULT_ALT_TEST, DEFAULT_EPSILON, AltTestSettings, judge_details
from judging.analysis.plots import bar_chart, heat_cells, scatter_plot
from judging.analysis.prediction_powered import ppi_report
from judging.analysis.ranking_reports import HUMANS, ranking_report
from judging.analysis.rating_details import dataset_details
from judging.analysis.readings import matrix_readings, plan_readings
from judging.analysis.reports import (
    JudgeNotFound,
    ReportError,
    agreement_report,
    campaign_span_agreement,
    one_stats_version,
)
from judging.analysis.selectors import (
    RatingScope,
    dataset_for_stats_or_404,
    dataset_judges,
    researcher_datasets,
    stats_aspects,
)
from judging.analysis.services import CalibrationError, judge_calibrate
from judging.certification.selectors import UNCERTIFIED
from judging.factscore.selectors import factscore_report, factscore_runs_for_user
from judging.models import JudgeKind, JudgeRun
from judging.statistics.pairwise import DEFAULT_TIES, TIE_CONVENTIONS

DATASET_TABLES = {
    "agreement": lambda report, details: tables.agreement_table(report),
    "preferences": lambda report, details: tables.preferences_table(report),
    "preference-judges": lambda report, details: tables.preference_judges_table(report),
    "raters": lambda report, details: tables.raters_table(details),
    "disagreements": lambda report, details: tables.disagreements_table(details),
    "distribution": lambda report, details: tables.distribution_table(details),
}
JUDGE_TABLES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "levels": tables.levels_table,
    "alternative": tables.alternative_table,
    "systems": tables.systems_table,
    "confusion": tables.confusion_table,
    "bias": tables.bias_table,
    "scatter": tables.scatter_table,
    "spans": tables.spans_table,
}
# The tables built from the agreement report alone; the others need the page's details.
REPORT_TABLES = ("agreement", "preferences", "preference-judges")


@require_GET
@researcher_required
def dashboard_index(request: HttpRequest) -> HttpResponse:
    context = {
        "datasets": researcher_datasets(request.user),
        "factscore_runs": factscore_runs_for_user(request.user),
    }
    return render(request, "dashboard/index.html", context)


def _ppi_context(request: HttpRequest, dataset: Dataset, aspect: str | None, scope: RatingScope) -> dict[str, Any]:
    """The prediction-powered panel for the chosen judge (``ppi_judge``, default the first that scored anything)."""
    judges = [judge["name"] for judge in dataset_judges(dataset) if judge["n_scores"]]
    chosen = query_param(request, "ppi_judge") or (judges[0] if judges else None)
    context: dict[str, Any] = {"judges": judges, "judge": chosen, "table": None, "error": None}
    if chosen is None or aspect is None:
        return context
    try:
        report = ppi_report(dataset, chosen, aspect, "ppi++", scope)
    except (JudgeNotFound, ReportError) as exc:
        context["error"] = str(exc)
        return context
    context["table"] = tables.ppi_table(report, aspect)
    context["api_query"] = query_string(judge=chosen, aspect=aspect, **scope.query())
    return context


def _dataset_context(request: HttpRequest, dataset: Dataset) -> dict[str, Any]:
    aspect = query_param(request, "aspect")
    system = query_param(request, "system")
    scope = request_scope(request, dataset)
    report = agreement_report(dataset, scope)
    details = dataset_details(dataset, aspect, system, scope)
    charts = [
        {"aspect": dist["aspect"], "label": dist["label"], "n": dist["n"], "chart": bar_chart(dist["bars"])}
        for dist in details["distributions"]
    ]
    return {
        "dataset": dataset,
        "report": report,
        "details": details,
        "charts": charts,
        "aspect": details["aspect"],
        "system": details["system"],
        "aspects": list(report["aspects"]),
        "agreement": tables.agreement_table(report),
        "preferences": report["preferences"],
        "preference_table": tables.preferences_table(report),
        "preference_judges_table": tables.preference_judges_table(report),
        "raters": tables.raters_table(details),
        "disagreements": details["disagreements"],
        "distribution_table": tables.distribution_table(details),
        "ppi": _ppi_context(request, dataset, details["aspect"], scope),
        "download_query": query_string(aspect=details["aspect"], system=details["system"], **scope.query()),
        **scope_context(
            request,
            dataset,
            scope,
            "dashboard-dataset",
            {"aspect": details["aspect"], "system": details["system"]},
            report["scope"],
        ),
    }


def _panels_or_page(request: HttpRequest, context: dict[str, Any], *, panels: str, page: str) -> HttpResponse:
    """An htmx request gets the panels alone (the page swaps them in); any other the whole page."""
    return render(request, panels if request.htmx else page, context)  # type: ignore[attr-defined]


@require_GET
@researcher_required
def dataset_page(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = dataset_for_stats_or_404(request.user, dataset_id)
    with one_stats_version():
        context = _dataset_context(request, dataset)
    return _panels_or_page(request, context, panels="dashboard/_dataset_panels.html", page="dashboard/dataset.html")


@require_GET
@researcher_required
def dataset_table(request: HttpRequest, dataset_id: int, table: str, fmt: str) -> HttpResponse:
    dataset = dataset_for_stats_or_404(request.user, dataset_id)
    if fmt not in FORMATS:
        raise Http404("no such table")
    if table == "judges":
        return table_download(tables.judges_table(dataset_judges(dataset)), fmt, f"dataset-{dataset.pk}-judges")
    if table not in DATASET_TABLES:
        raise Http404("no such table")
    aspect, system = query_param(request, "aspect"), query_param(request, "system")
    scope = request_scope(request, dataset)
    from_report = table in REPORT_TABLES
    details = {} if from_report else dataset_details(dataset, aspect, system, scope)
    built = DATASET_TABLES[table](agreement_report(dataset, scope) if from_report else {}, details)
    return table_download(built, fmt, f"dataset-{dataset.pk}-{table}")


def _factscore_run(request: HttpRequest, dataset: Dataset, judge_name: str) -> JudgeRun | None:
    """The selected judge's run when it is a FActScore run (Judge kind "run", method "factscore")."""
    return (
        factscore_runs_for_user(request.user)
        .filter(dataset=dataset, judge__name=judge_name, judge__kind=JudgeKind.RUN)
        .first()
    )


def _factscore_context(run: JudgeRun) -> dict[str, Any]:
    report = factscore_report(run)
    return {
        "run": run,
        "report": report,
        "report_url": reverse("factscore:report", args=[run.pk]),
        **{name.replace("-", "_"): build(report) for name, build in tables.FACTSCORE_TABLES.items()},
    }


def _alt_settings(request: HttpRequest) -> AltTestSettings:
    """ε and q of the alternative-annotator test from the query string (the defaults when absent); 400 when out of
    range."""
    form = AltTestForm({"epsilon": query_param(request, "epsilon"), "q": query_param(request, "q")})
    if not form.is_valid():
        raise BadRequest(
            "; ".join(f"{name}: {' '.join(str(e) for e in errors)}" for name, errors in form.errors.items())
        )
    epsilon, q = form.cleaned_data["epsilon"], form.cleaned_data["q"]
    return AltTestSettings(
        epsilon=DEFAULT_ALT_TEST.epsilon if epsilon is None else epsilon,
        q=DEFAULT_ALT_TEST.q if q is None else q,
    )


def _alt_keep(settings: AltTestSettings) -> dict[str, str | None]:
    return {
        "epsilon": None if settings.epsilon == DEFAULT_ALT_TEST.epsilon else str(settings.epsilon),
        "q": None if settings.q == DEFAULT_ALT_TEST.q else str(settings.q),
    }


def _judge_context(request: HttpRequest, dataset: Dataset) -> dict[str, Any]:
    judges = dataset_judges(dataset)
    judge_name = query_param(request, "judge") or (judges[0]["name"] if judges else None)
    scope = request_scope(request, dataset)
    alt_settings = _alt_settings(request)
    factscore_runs = factscore_runs_for_user(request.user).filter(dataset=dataset, judge__kind=JudgeKind.RUN)
    keep = {
        "judge": judge_name,
        "aspect": query_param(request, "aspect"),
        "system": query_param(request, "system"),
        **_alt_keep(alt_settings),
    }
    context: dict[str, Any] = {
        "dataset": dataset,
        "judges": judges,
        "judge": judge_name,
        "details": None,
        "factscore_judges": set(factscore_runs.values_list("judge__name", flat=True)),
        "factscore": None,
        "alt_settings": alt_settings,
        "default_epsilon": DEFAULT_EPSILON,
        **scope_context(request, dataset, scope, "dashboard-judges", keep),
    }
    if judge_name is None:
        return context
    run = _factscore_run(request, dataset, judge_name) if judge_name in context["factscore_judges"] else None
    try:
        details = judge_details(
            dataset, judge_name, query_param(request, "aspect"), query_param(request, "system"), scope, alt_settings
        )
    except JudgeNotFound:
        raise Http404("no such judge") from None
    context["details"] = details
    context["judge_standing"] = next(
        (row["certification"] for row in judges if row["name"] == details["judge"]), UNCERTIFIED
    )
    context.update(scope_context(request, dataset, scope, "dashboard-judges", keep, details["scope"]))
    context["download_query"] = query_string(
        judge=details["judge"],
        aspect=details["aspect"],
        system=details["system"],
        **_alt_keep(alt_settings),
        **scope.query(),
    )
    if run is not None:
        context["factscore"] = _factscore_context(run)
    if details["aspect"] is None:
        return context
    scale = (details["scale"]["min"], details["scale"]["max"])
    confusion = details["confusion"]
    context.update(
        {
            "levels": tables.levels_table(details),
            "spans_table": tables.spans_table(details) if details["spans"]["available"] else None,
            "alternative": tables.alternative_table(details),
            "systems_table": tables.systems_table(details),
            "bias": tables.bias_table(details),
            "scatter": scatter_plot(details["scatter"], x_range=scale, y_range=scale),
            "confusion": confusion,
            "confusion_cells": (
                list(zip(confusion["labels"], heat_cells(confusion["labels"], confusion["matrix"]), strict=True))
                if not confusion["undefined"]
                else []
            ),
        }
    )
    return context


@require_GET
@researcher_required
def judges_page(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = dataset_for_stats_or_404(request.user, dataset_id)
    with one_stats_version():
        context = _judge_context(request, dataset)
        if not request.htmx and len(context["judges"]) >= 2:  # type: ignore[attr-defined]
            matrix = judge_matrix(dataset, context["scope"])
            context["judge_matrix"] = {**matrix, "aspects": matrix_readings(matrix)}
    return _panels_or_page(request, context, panels="dashboard/_judge_panels.html", page="dashboard/judges.html")


@require_GET
@researcher_required
def judge_table(request: HttpRequest, dataset_id: int, table: str, fmt: str) -> HttpResponse:
    dataset = dataset_for_stats_or_404(request.user, dataset_id)
    judge_name = query_param(request, "judge")
    if table in tables.FACTSCORE_TABLES and fmt in FORMATS and judge_name is not None:
        run = _factscore_run(request, dataset, judge_name)
        if run is None:
            raise Http404("no such FActScore run")
        built = tables.FACTSCORE_TABLES[table](factscore_report(run))
        return table_download(built, fmt, f"dataset-{dataset.pk}-judge-{table}")
    if table not in JUDGE_TABLES or fmt not in FORMATS or judge_name is None:
        raise Http404("no such table")
    scope = request_scope(request, dataset)
    alt_settings = _alt_settings(request)
    try:
        details = judge_details(
            dataset, judge_name, query_param(request, "aspect"), query_param(request, "system"), scope, alt_settings
        )
    except JudgeNotFound:
        raise Http404("no such judge") from None
    if details["aspect"] is None:
        raise Http404("the judge shares no aspect with the rubric")
    return table_download(JUDGE_TABLES[table](details), fmt, f"dataset-{dataset.pk}-judge-{table}")


RANKING_TABLES = ("ranking-humans", "ranking-judge")


def _rankings(request: HttpRequest, dataset: Dataset, scope: RatingScope) -> dict[str, Any]:
    """The humans' ranking and, when a judge is chosen, the judge's beside it: Bradley–Terry from pairwise outcomes,
    or by mean rating when an aspect is chosen. A ranking that cannot be made says why instead."""
    judge_name, aspect = query_param(request, "judge"), query_param(request, "aspect")
    ties = _ties_param(request, aspect)
    found: dict[str, Any] = {"humans": None, "judge_report": None, "humans_error": None, "judge_error": None}
    try:
        found["humans"] = ranking_report(dataset, HUMANS, aspect, scope=scope, ties=ties)
    except ReportError as exc:
        found["humans_error"] = str(exc)
    if judge_name:
        try:
            found["judge_report"] = ranking_report(dataset, judge_name, aspect, scope=scope, ties=ties)
        except JudgeNotFound:
            raise Http404("no such judge") from None
        except ReportError as exc:
            found["judge_error"] = str(exc)
    return found


def _ties_param(request: HttpRequest, aspect: str | None) -> str | None:
    """The chosen tie convention for Bradley–Terry (None: the default); a ranking by mean rating has no ties."""
    ties = query_param(request, "ties")
    if aspect or not ties:
        return None
    if ties not in TIE_CONVENTIONS:
        raise Http404("no such tie convention")
    return ties


def _ranking_leader(report: dict[str, Any] | None) -> dict[str, Any] | None:
    if not report or report["undefined"] or not report["systems"]:
        return None
    first = report["systems"][0]
    return {
        "system": first["system"],
        "best": (first["rank_ci95"] or {}).get("best"),
        "worst": (first["rank_ci95"] or {}).get("worst"),
        "certain": first["rank_ci95"] is not None and first["rank_ci95"]["worst"] == 1,
    }


@require_GET
@researcher_required
def rankings_page(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = dataset_for_stats_or_404(request.user, dataset_id)
    scope = request_scope(request, dataset)
    found = _rankings(request, dataset, scope)
    judge_name, aspect = query_param(request, "judge"), query_param(request, "aspect")
    context: dict[str, Any] = {
        "dataset": dataset,
        "judges": dataset_judges(dataset),
        "aspects": [info.name for info in stats_aspects(dataset)],
        "judge": judge_name,
        "aspect": aspect,
        "ties": _ties_param(request, aspect) or DEFAULT_TIES,
        "tie_conventions": list(TIE_CONVENTIONS),
        **found,
        "humans_table": tables.ranking_table("ranking-humans", _("Humans"), found["humans"])
        if found["humans"]
        else None,
        "judge_table": (
            tables.ranking_table("ranking-judge", judge_name or "", found["judge_report"])
            if found["judge_report"]
            else None
        ),
        "humans_leader": _ranking_leader(found["humans"]),
        "judge_leader": _ranking_leader(found["judge_report"]),
        "versus": (found["judge_report"] or {}).get("versus_humans"),
        "download_query": query_string(
            judge=judge_name, aspect=aspect, ties=_ties_param(request, aspect), **scope.query()
        ),
        **scope_context(
            request,
            dataset,
            scope,
            "dashboard-rankings",
            {"judge": judge_name, "aspect": aspect, "ties": _ties_param(request, aspect)},
        ),
    }
    return render(request, "dashboard/rankings.html", context)


@require_GET
@researcher_required
def rankings_table(request: HttpRequest, dataset_id: int, table: str, fmt: str) -> HttpResponse:
    dataset = dataset_for_stats_or_404(request.user, dataset_id)
    if table not in RANKING_TABLES or fmt not in FORMATS:
        raise Http404("no such table")
    found = _rankings(request, dataset, request_scope(request, dataset))
    report = found["humans"] if table == "ranking-humans" else found["judge_report"]
    if report is None:
        raise Http404(found["humans_error"] if table == "ranking-humans" else (found["judge_error"] or "no judge"))
    title = "humans" if table == "ranking-humans" else str(query_param(request, "judge"))
    return table_download(tables.ranking_table(table, title, report), fmt, f"dataset-{dataset.pk}-{table}")


@require_http_methods(["GET", "POST"])
@researcher_required
def calibrate(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = dataset_for_stats_or_404(request.user, dataset_id)
    judges = [judge["name"] for judge in dataset_judges(dataset)]
    aspects = [aspect.name for aspect in stats_aspects(dataset)]
    form = CalibrationForm(request.POST or None, judges=judges, aspects=aspects)
    result = None
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                result = judge_calibrate(
                    dataset=dataset,
                    judge_name=data["judge"],
                    target=data["target"],
                    inputs=data["inputs"],
                    name=data["name"] or None,
                    seed=data["seed"],
                )
            except (CalibrationError, JudgeNotFound) as exc:
                form.add_error(None, str(exc))
                status = 400
        else:
            status = 400
    judges_url = reverse("dashboard-judges", args=[dataset.pk])
    return render(
        request,
        "dashboard/calibrate.html",
        {"dataset": dataset, "form": form, "result": result, "judges_url": judges_url},
        status=status,
    )


@require_GET
@login_required
def campaign_plan_panel(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """The campaign progress page's planning lines, loaded into that page by htmx: they read the campaign's ratings
    through the statistics, which the annotations app does not import."""
    campaign = campaign_for_researcher(request.user, campaign_id)
    answers = sum(task.candidates for task in campaign_progress(campaign).tasks)
    plan = plan_readings(campaign_plan(campaign, answers))
    return render(request, "dashboard/_campaign_plan.html", {"plan": plan})


@require_GET
@login_required
def campaign_span_agreement_panel(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """The raters' span agreement on the campaign's span aspects, loaded by htmx into the quality panel of its
    progress page (and loaded again whenever an exclusion redraws that panel); empty for a campaign without one."""
    campaign = campaign_for_researcher(request.user, campaign_id)
    report = campaign_span_agreement(campaign)
    labels = {
        "character": _("characters"),
        "character_category": _("characters, same category"),
        "span_overlap": _("spans that overlap"),
        "span_overlap_category": _("spans that overlap, same category"),
        "span_exact_category": _("spans with the same offsets, same category"),
    }
    gold_labels = {
        "character": _("characters"),
        "character_category": _("characters, category within the gold's"),
        "span_overlap": _("spans that overlap"),
        "span_overlap_category": _("spans that overlap, category within the gold's"),
    }
    # The report is cached for every reader; each aspect's label is read in the reader's language here.
    shown = {aspect.name: aspect.display_label for aspect in campaign.aspects.all()} if report["aspects"] else {}
    aspects = [
        {
            **aspect,
            "shown_label": shown.get(aspect["aspect"], aspect["label"]),
            "conventions": [(labels[key], figures) for key, figures in aspect["pairwise"].items()],
            "gold_rows": [
                {**row, "conventions": [(gold_labels[key], figures) for key, figures in row["conventions"].items()]}
                for row in aspect["gold"]["raters"]
            ],
        }
        for aspect in report["aspects"]
    ]
    return render(
        request,
        "dashboard/_campaign_span_agreement.html",
        {"campaign": campaign, "report": report, "aspects": aspects},
    )
