from django.urls import path

from annotations.api import annotator
from annotations.text import opaque  # noqa: F401  (registers the <taskref:…> path converter)

urlpatterns = [
    path("campaigns/", annotator.my_campaigns, name="api-annotate-campaigns"),
    path("campaigns/<int:campaign_id>/next/", annotator.next_task, name="api-annotate-next"),
    path("campaigns/<int:campaign_id>/tasks/<taskref:task_id>/", annotator.task_detail, name="api-annotate-task"),
    path(
        "campaigns/<int:campaign_id>/tasks/<taskref:task_id>/submit/",
        annotator.submit_task,
        name="api-annotate-submit",
    ),
    path(
        "campaigns/<int:campaign_id>/tasks/<taskref:task_id>/skip/",
        annotator.skip_task,
        name="api-annotate-skip",
    ),
    path(
        "campaigns/<int:campaign_id>/tasks/<taskref:task_id>/draft/",
        annotator.draft_task,
        name="api-annotate-draft",
    ),
]
