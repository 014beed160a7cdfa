from django.urls import path

from judging import api

urlpatterns = [
    path("configs/", api.config_list, name="api-judge-config-list"),
    path("configs/new/", api.config_create, name="api-judge-config-create"),
    path("runs/", api.run_list, name="api-judge-run-list"),
    path("runs/launch/", api.run_launch, name="api-judge-run-launch"),
    path("runs/estimate/", api.run_estimate, name="api-judge-run-estimate"),
    path("runs/<int:pk>/", api.run_detail, name="api-judge-run-detail"),
    path("runs/<int:pk>/cancel/", api.run_cancel, name="api-judge-run-cancel"),
    path("runs/<int:pk>/retry-failed/", api.run_retry_failed, name="api-judge-run-retry-failed"),
    path("runs/<int:pk>/judgments/", api.run_judgments, name="api-judge-run-judgments"),
]
