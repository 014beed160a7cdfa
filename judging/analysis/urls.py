from django.urls import path

from judging.analysis import overview
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
    path("<int:dataset_id>/calibrate/", dashboard_views.calibrate, name="dashboard-calibrate"),
]
