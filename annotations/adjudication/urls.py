from django.urls import path

from annotations.adjudication import views

urlpatterns = [
    path("adjudicate/", views.queue_page, name="adjudication-queue"),
    path("adjudicate/disputes/<int:dispute_id>/", views.dispute_page, name="adjudication-dispute"),
    path("adjudicate/disputes/<int:dispute_id>/resolve/", views.dispute_resolve_view, name="adjudication-resolve"),
    path("campaigns/<int:campaign_id>/adjudication/", views.rule_page, name="adjudication-rule"),
]
