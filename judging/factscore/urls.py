from django.urls import path

from judging.factscore import api, views

app_name = "factscore"

urlpatterns = [
    path("runs/", views.run_index, name="runs"),
    path("runs/<int:run_id>/", views.run_report, name="report"),
    path("answers/<int:answer_id>/", views.answer_detail, name="answer"),
    path("review/", views.review_home, name="review-home"),
    path("review/<int:campaign_id>/next/", views.review_next, name="review-next"),
    path("review/<int:campaign_id>/tasks/<int:task_id>/", views.review_task, name="review-task"),
    path("review/<int:campaign_id>/tasks/<int:task_id>/edit/", views.review_edit, name="review-edit"),
    path("review/<int:campaign_id>/tasks/<int:task_id>/submit/", views.review_submit, name="review-submit"),
    path("review/<int:campaign_id>/tasks/<int:task_id>/skip/", views.review_skip, name="review-skip"),
    path("api/runs/<int:run_id>/report/", api.run_report, name="api-report"),
    path("api/datasets/<int:dataset_id>/corpora/", api.corpora, name="api-corpora"),
]
