from collections.abc import Callable
from typing import Any

from django.urls import URLPattern, path

from judging.analysis import certification_views, overview
from judging.analysis import views as dashboard_views


def _page_and_tables(
    route: str, page: Callable[..., Any], table: Callable[..., Any], *, name: str, table_name: str
) -> list[URLPattern]:
    """A dashboard page and, below it, the downloads of its tables."""
    return [path(route, page, name=name), path(f"{route}tables/<slug:table>.<slug:fmt>", table, name=table_name)]


urlpatterns = [
    path("", dashboard_views.dashboard_index, name="dashboard-index"),
    path("<int:dataset_id>/overview/", overview.dataset_overview, name="dashboard-overview"),
    *_page_and_tables(
        "<int:dataset_id>/",
        dashboard_views.dataset_page,
        dashboard_views.dataset_table,
        name="dashboard-dataset",
        table_name="dashboard-dataset-table",
    ),
    *_page_and_tables(
        "<int:dataset_id>/judges/",
        dashboard_views.judges_page,
        dashboard_views.judge_table,
        name="dashboard-judges",
        table_name="dashboard-judge-table",
    ),
    *_page_and_tables(
        "<int:dataset_id>/rankings/",
        dashboard_views.rankings_page,
        dashboard_views.rankings_table,
        name="dashboard-rankings",
        table_name="dashboard-rankings-table",
    ),
    path("<int:dataset_id>/certification/", certification_views.certification_page, name="dashboard-certification"),
    path(
        "<int:dataset_id>/certification/reference-sets/",
        certification_views.reference_set_name,
        name="dashboard-reference-set-name",
    ),
    path("<int:dataset_id>/certification/certify/", certification_views.certify_version, name="dashboard-certify"),
    path("<int:dataset_id>/certification/teach/", certification_views.teach_version, name="dashboard-teach"),
    path("<int:dataset_id>/calibrate/", dashboard_views.calibrate, name="dashboard-calibrate"),
    path("campaigns/<int:campaign_id>/plan/", dashboard_views.campaign_plan_panel, name="campaign-plan"),
    path(
        "campaigns/<int:campaign_id>/span-agreement/",
        dashboard_views.campaign_span_agreement_panel,
        name="campaign-span-agreement",
    ),
]
