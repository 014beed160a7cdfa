from django.urls import path

from judging.analysis import certification_views, overview
from judging.analysis import views as dashboard_views

urlpatterns = [
    path("", dashboard_views.dashboard_index, name="dashboard-index"),
    path("<int:dataset_id>/overview/", overview.dataset_overview, name="dashboard-overview"),
    path("<int:dataset_id>/", dashboard_views.dataset_page, name="dashboard-dataset"),
    path(
        "<int:dataset_id>/tables/<slug:table>.<slug:fmt>",
        dashboard_views.dataset_table,
        name="dashboard-dataset-table",
    ),
    path("<int:dataset_id>/judges/", dashboard_views.judges_page, name="dashboard-judges"),
    path(
        "<int:dataset_id>/judges/tables/<slug:table>.<slug:fmt>",
        dashboard_views.judge_table,
        name="dashboard-judge-table",
    ),
    path("<int:dataset_id>/rankings/", dashboard_views.rankings_page, name="dashboard-rankings"),
    path(
        "<int:dataset_id>/rankings/tables/<slug:table>.<slug:fmt>",
        dashboard_views.rankings_table,
        name="dashboard-rankings-table",
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
