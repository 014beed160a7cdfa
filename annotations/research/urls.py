from django.urls import path

from annotations.research import views

urlpatterns = [
    path("", views.research_home, name="research-home"),
    path("import/", views.research_import, name="research-import"),
    path("campaigns/new/", views.campaign_builder, name="research-campaign-new"),
    path("campaigns/<int:campaign_id>/settings/", views.campaign_settings_page, name="research-campaign-settings"),
    path("annotators/", views.annotators_page, name="research-annotators"),
    path("annotators/invite/", views.annotator_invite_view, name="research-annotator-invite"),
    path("annotators/pool/", views.annotator_pool_add_view, name="research-annotator-pool-add"),
    path("annotators/<int:user_id>/deactivate/", views.annotator_deactivate_view, name="research-annotator-deactivate"),
    path("invite/<str:token>/", views.invite_accept_view, name="research-invite-accept"),
    path("datasets/<int:dataset_id>/items/", views.items_page, name="research-items"),
    path(
        "datasets/<int:dataset_id>/answer-format/", views.dataset_answer_format, name="research-dataset-answer-format"
    ),
    path("datasets/<int:dataset_id>/items/<int:item_id>/", views.item_page, name="research-item"),
    path("datasets/<int:dataset_id>/items/<int:item_id>/gold/", views.item_gold_set, name="research-item-gold"),
    path(
        "datasets/<int:dataset_id>/items/<int:item_id>/gold/remove/",
        views.item_gold_remove,
        name="research-item-gold-remove",
    ),
]
