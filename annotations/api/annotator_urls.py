from django.urls import path

from annotations.api import annotator
from annotations.campaigns.task_routes import task_routes

urlpatterns = [
    path("campaigns/", annotator.my_campaigns, name="api-annotate-campaigns"),
    *task_routes(
        "campaigns/<int:campaign_id>/",
        "api-annotate",
        next_task=annotator.next_task,
        task=annotator.task_detail,
        submit=annotator.submit_task,
        skip=annotator.skip_task,
        draft=annotator.draft_task,
    ),
]
