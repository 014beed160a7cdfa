from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, parser_classes, permission_classes
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from annotations.datasets.agreement_summary import agreement_report
from annotations.datasets.downloads import export_kind, export_response
from annotations.datasets.importing import dataset_import
from annotations.datasets.parquet_export import binary_export_response
from annotations.errors import DatasetImportError, RubricError
from annotations.permissions import IsResearcher, UploadField, unexpected_fields_refusal
from annotations.rubrics.specs import PRESETS, RUBRIC_MAX_BYTES, load_rubric_bytes
from annotations.selectors import dataset_for_user_or_404, datasets_for_user


class DatasetOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    notice = serializers.CharField()
    created_at = serializers.DateTimeField()


class DatasetImportInput(serializers.Serializer):
    file = UploadField()
    name = serializers.CharField(max_length=200)
    preset = serializers.ChoiceField(choices=sorted(PRESETS), required=False)
    rubric = serializers.FileField(required=False)


class ImportResultOutput(serializers.Serializer):
    dataset = DatasetOutput()
    items = serializers.IntegerField()
    responses = serializers.IntegerField()
    ratings = serializers.IntegerField()
    judge_scores = serializers.IntegerField()
    notice = serializers.CharField()


class ExportQuery(serializers.Serializer):
    include_judges = serializers.BooleanField(default=False)
    flat = serializers.ChoiceField(choices=["", "jsonl", "csv"], default="")
    history = serializers.BooleanField(default=False)
    rubric = serializers.BooleanField(default=False, help_text="the rubric file instead of the data")
    parquet = serializers.ChoiceField(
        choices=["", "answers", "ratings", "preferences", "error_spans", "hf"],
        default="",
        help_text="a Parquet table with typed columns, or hf: the zipped folder Hugging Face datasets reads",
    )


@extend_schema(responses=DatasetOutput(many=True))
@api_view(["GET"])
@permission_classes([IsResearcher])
def dataset_list(request: Request) -> Response:
    datasets = datasets_for_user(request.user).order_by("name")
    return Response(DatasetOutput(datasets, many=True).data)


@extend_schema(request={"multipart/form-data": DatasetImportInput}, responses={201: ImportResultOutput})
@api_view(["POST"])
@permission_classes([IsResearcher])
@parser_classes([MultiPartParser])
def dataset_import_view(request: Request) -> Response:
    refusal = unexpected_fields_refusal(request.data, frozenset(DatasetImportInput().fields))
    if refusal is not None:
        return refusal
    form = DatasetImportInput(data=request.data)
    form.is_valid(raise_exception=True)
    data = form.validated_data
    try:
        rubric = None
        if data.get("rubric"):
            rubric = load_rubric_bytes(data["rubric"].read(RUBRIC_MAX_BYTES + 1))
        result = dataset_import(
            stream=data["file"],
            name=data["name"],
            rubric=rubric,
            preset=data.get("preset"),
            owner=request.user,  # type: ignore[arg-type]
        )
    except (DatasetImportError, RubricError) as exc:
        return Response(
            {"detail": str(exc), "line": getattr(exc, "line", None), "field": getattr(exc, "field", None)},
            status=status.HTTP_400_BAD_REQUEST,
        )
    return Response(ImportResultOutput(result).data, status=status.HTTP_201_CREATED)


@extend_schema(
    parameters=[ExportQuery],
    responses={
        (200, "application/jsonl"): str,
        (200, "text/csv"): str,
        (200, "application/json"): str,
        (200, "application/vnd.apache.parquet"): bytes,
        (200, "application/zip"): bytes,
    },
    description="The dataset as a download named after it: the JSONL import format with the collected preferences "
    "(name.jsonl), with judge-run scores too (include_judges, name.judges.jsonl), or the flat layout of one row per "
    "rating and one per preference (flat=csv or flat=jsonl, name.flat.csv or name.flat.jsonl; with history=true also "
    "the earlier versions of corrected answers, name.flat-history.csv or .jsonl), or the rubric file "
    "(rubric, name.rubric.json), or Parquet with typed columns (parquet=answers, ratings, preferences or error_spans, "
    "name.<table>.parquet), or the folder that Hugging Face datasets reads, zipped, with its dataset card "
    "(parquet=hf, name.hf.zip).",
)
@api_view(["GET"])
@permission_classes([IsResearcher])
def dataset_export_view(request: Request, pk: int) -> HttpResponse | StreamingHttpResponse:
    dataset = dataset_for_user_or_404(request.user, pk)
    query = ExportQuery(data=request.query_params)
    query.is_valid(raise_exception=True)
    if query.validated_data["parquet"]:
        table = query.validated_data["parquet"]
        return binary_export_response(
            dataset, "hf-zip" if table == "hf" else f"{table.replace('_', '-')}-parquet", agreement_report
        )
    kind = export_kind(
        flat=query.validated_data["flat"],
        include_judges=query.validated_data["include_judges"],
        history=query.validated_data["history"],
        rubric=query.validated_data["rubric"],
    )
    return export_response(dataset, kind)
