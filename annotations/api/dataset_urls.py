from django.urls import path

from annotations.api import datasets

urlpatterns = [
    path("", datasets.dataset_list, name="api-dataset-list"),
    path("import/", datasets.dataset_import_view, name="api-dataset-import"),
    path("<int:pk>/export/", datasets.dataset_export_view, name="api-dataset-export"),
]
