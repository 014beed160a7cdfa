from django.urls import path

from judging import dashboard_api

urlpatterns = [
    path("datasets/<int:pk>/agreement/", dashboard_api.agreement_view, name="api-stats-agreement"),
    path("datasets/<int:pk>/correlation/", dashboard_api.correlation_view, name="api-stats-correlation"),
]
