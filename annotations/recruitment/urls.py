from django.urls import path

from annotations.recruitment import views

urlpatterns = [
    path("done/", views.completion_page, name="crowd-done"),
    path("campaigns/<int:campaign_id>/links/", views.link_create_view, name="crowd-link-create"),
    path("campaigns/<int:campaign_id>/links/<slug:platform>/", views.link_update_view, name="crowd-link-update"),
    path(
        "campaigns/<int:campaign_id>/links/<slug:platform>/screening/",
        views.link_screening_view,
        name="crowd-link-screening",
    ),
    path("campaigns/<int:campaign_id>/invites/", views.invite_links_view, name="crowd-invites"),
    path("<str:token>/", views.entry_page, name="crowd-entry"),
    path("<str:token>/mturk/", views.mturk_entry_page, name="crowd-mturk"),
]
