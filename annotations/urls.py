from django.urls import include, path

from annotations import views
from annotations.campaigns.task_routes import task_routes
from annotations.datasets import mapped_views
from annotations.quality import exclusion_views

urlpatterns = [
    path("", include("annotations.quality.urls")),
    path("", include("annotations.adjudication.urls")),
    path("", views.home, name="home"),
    path("annotate/<int:campaign_id>/", views.campaign_detail, name="annotate-campaign"),
    *task_routes(
        "annotate/<int:campaign_id>/",
        "annotate",
        next_task=views.task_next,
        task=views.task_page,
        submit=views.task_submit,
        skip=views.task_skip,
        draft=views.task_draft,
    ),
    path("campaigns/<int:campaign_id>/progress/", views.campaign_progress_page, name="campaign-progress"),
    path("datasets/<int:dataset_id>/export/<slug:kind>/", views.dataset_export, name="dataset-export"),
    path("datasets/import-mapped/", mapped_views.mapped_import_page, name="dataset-import-mapped"),
    path(
        "campaigns/<int:campaign_id>/raters/<int:rater_id>/exclude/",
        exclusion_views.rater_exclude_view,
        name="rater-exclude",
    ),
    path(
        "campaigns/<int:campaign_id>/raters/<int:rater_id>/reopen/",
        exclusion_views.rater_slots_reopen_view,
        name="rater-slots-reopen",
    ),
    path(
        "campaigns/<int:campaign_id>/raters/<int:rater_id>/revoke/",
        exclusion_views.rater_exclusion_revoke_view,
        name="rater-exclusion-revoke",
    ),
]
