from django.urls import path

from annotations import api

urlpatterns = [
    path("", api.dataset_list, name="api-dataset-list"),
    path("import/", api.dataset_import_view, name="api-dataset-import"),
    path("<int:pk>/export/", api.dataset_export_view, name="api-dataset-export"),
]
