"""The ready-made WMT MQM import: the public ted/ende excerpt through ``manage.py import_wmt_mqm`` gives ratings
whose per-segment averages are the published ones."""

import gzip
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db.models import Avg

from annotations.models import ErrorSpan, Rating
from tests.io.test_mqm_tsv import DATA, assert_equal_to_the_published_segment_scores

pytestmark = pytest.mark.django_db


def test_importing_ted_ende_reproduces_the_published_segment_scores(tmp_path: Path) -> None:
    # google/wmt-mqm-human-evaluation @ 7fadea281aff8db61cc72fc3d469a4dca78b82a6: ted/ende/mqm_ted_ende.tsv and
    # ted/ende/mqm_ted_ende.avg_seg_scores.tsv, document talk.3 (segments 218-248); see tests/data/wmt_mqm/README.md.
    source = tmp_path / "mqm_ted_ende.talk3.tsv"
    with gzip.open(DATA / "mqm_ted_ende.talk3.tsv.gz", "rb") as handle:
        source.write_bytes(handle.read())
    call_command("import_wmt_mqm", str(source), "--name", "ted ende")
    averages = {
        (system, seg_id): value
        for system, seg_id, value in Rating.objects.filter(aspect__name="mqm")
        .values_list("response__system__key", "response__turn__item__external_id")
        .annotate(average=Avg("value"))
        .values_list("response__system__key", "response__turn__item__external_id", "average")
    }
    assert_equal_to_the_published_segment_scores(averages)
    punctuation = ErrorSpan.objects.filter(category="Fluency/Punctuation", severity="minor").first()
    assert punctuation is not None
    text = punctuation.rating.response.text
    assert punctuation.start is None or 0 <= punctuation.start <= punctuation.end <= len(text)  # type: ignore[operator]
