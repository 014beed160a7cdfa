from django.urls import include, path

from annotations import views
from annotations.datasets import mapped_views
from annotations.quality import exclusion_views
from annotations.text import opaque  # noqa: F401  (registers the <taskref:…> path converter)

urlpatterns = [
    path("", include("annotations.quality.urls")),
    path("", include("annotations.adjudication.urls")),
    path("", views.home, name="home"),
    path("annotate/<int:campaign_id>/", views.campaign_detail, name="annotate-campaign"),
    path("annotate/<int:campaign_id>/next/", views.task_next, name="annotate-next"),
    path("annotate/<int:campaign_id>/tasks/<taskref:task_id>/", views.task_page, name="annotate-task"),
    path("annotate/<int:campaign_id>/tasks/<taskref:task_id>/submit/", views.task_submit, name="annotate-submit"),
    path("annotate/<int:campaign_id>/tasks/<taskref:task_id>/skip/", views.task_skip, name="annotate-skip"),
    path("annotate/<int:campaign_id>/tasks/<taskref:task_id>/draft/", views.task_draft, name="annotate-draft"),
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
