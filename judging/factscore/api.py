"""DRF endpoints: the FActScore report of a run, and knowledge corpora of a dataset (list, upload)."""

from __future__ import annotations

from rest_framework import serializers, status
from rest_framework.decorators import parser_classes
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from annotations.permissions import UploadField
from annotations.selectors import dataset_for_user_or_404
from judging.endpoints import researcher_api
from judging.factscore import selectors, services
from judging.factscore.corpus import PASSAGE_TOKENS


class CorpusOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    n_documents = serializers.IntegerField()
    n_passages = serializers.IntegerField()
    passage_tokens = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class CorpusUploadInput(serializers.Serializer):
    file = UploadField()
    name = serializers.CharField(max_length=200)
    passage_tokens = serializers.IntegerField(min_value=16, max_value=4096, default=PASSAGE_TOKENS)
    replace = serializers.BooleanField(default=False)


@researcher_api(["GET"], responses=dict)
def run_report(request: Request, run_id: int) -> Response:
    """Per-system FActScore, % responding and facts per answer; estimator vs humans when reviewed."""
    run = selectors.factscore_run_for_user_or_404(request.user, run_id)
    include_answers = request.query_params.get("answers") in ("1", "true")
    return Response(selectors.factscore_report(run, include_answers=include_answers))


@researcher_api(["GET", "POST"], request=CorpusUploadInput, responses=CorpusOutput(many=True))
@parser_classes([MultiPartParser, JSONParser])
def corpora(request: Request, dataset_id: int) -> Response:
    dataset = dataset_for_user_or_404(request.user, dataset_id)
    if request.method == "GET":
        return Response(CorpusOutput(selectors.corpora_for_dataset(dataset), many=True).data)
    form = CorpusUploadInput(data=request.data)
    form.is_valid(raise_exception=True)
    try:
        corpus = services.knowledge_corpus_upload(
            dataset=dataset,
            name=form.validated_data["name"],
            stream=form.validated_data["file"],
            uploaded_by=request.user,
            passage_tokens=form.validated_data["passage_tokens"],
            replace=form.validated_data["replace"],
        )
    except services.CorpusError as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
    return Response(CorpusOutput(corpus).data, status=status.HTTP_201_CREATED)
