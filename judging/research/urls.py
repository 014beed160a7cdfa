from django.urls import path

from judging.research import views

urlpatterns = [
    path("judges/", views.judges_home, name="research-judges"),
    path("judges/configs/new/", views.config_new, name="research-judge-config-new"),
    path("judges/configs/preview/", views.config_preview, name="research-judge-config-preview"),
    path("judges/datasets/<int:dataset_id>/launch/", views.launch, name="research-judge-launch"),
    path("judges/datasets/<int:dataset_id>/runs/", views.runs, name="research-judge-runs"),
    path("judges/runs/<int:run_id>/", views.run_page, name="research-judge-run"),
    path("judges/runs/<int:run_id>/progress/", views.run_progress, name="research-judge-run-progress"),
    path("judges/runs/<int:run_id>/stop/", views.run_cancel, name="research-judge-run-cancel"),
    path("judges/runs/<int:run_id>/retry-failed/", views.run_retry, name="research-judge-run-retry"),
]
