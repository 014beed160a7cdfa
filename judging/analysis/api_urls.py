from django.urls import path

from judging.analysis import api as dashboard_api

urlpatterns = [
    path("datasets/<int:pk>/agreement/", dashboard_api.agreement_view, name="api-stats-agreement"),
    path("datasets/<int:pk>/correlation/", dashboard_api.correlation_view, name="api-stats-correlation"),
]
