from django.urls import path

from annotations import annotator_api
from annotations.text import opaque  # noqa: F401  (registers the <taskref:…> path converter)

urlpatterns = [
    path("campaigns/", annotator_api.my_campaigns, name="api-annotate-campaigns"),
    path("campaigns/<int:campaign_id>/next/", annotator_api.next_task, name="api-annotate-next"),
    path("campaigns/<int:campaign_id>/tasks/<taskref:task_id>/", annotator_api.task_detail, name="api-annotate-task"),
    path(
        "campaigns/<int:campaign_id>/tasks/<taskref:task_id>/submit/",
        annotator_api.submit_task,
        name="api-annotate-submit",
    ),
    path(
        "campaigns/<int:campaign_id>/tasks/<taskref:task_id>/skip/",
        annotator_api.skip_task,
        name="api-annotate-skip",
    ),
    path(
        "campaigns/<int:campaign_id>/tasks/<taskref:task_id>/draft/",
        annotator_api.draft_task,
        name="api-annotate-draft",
    ),
]
