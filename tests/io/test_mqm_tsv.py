"""The public WMT MQM TSV read through annotations.datasets.mqm_tsv."""

import gzip
from pathlib import Path

import pytest

from annotations.datasets.mqm_tsv import read_mqm_tsv, segment_scores
from annotations.errors import DatasetImportError
from annotations.spans.error_spans import MQM_CORE, Span

DATA = Path(__file__).resolve().parent.parent / "data" / "wmt_mqm"


def assert_equal_to_the_published_segment_scores(scores: dict[tuple[str, str], float]) -> None:
    """`scores` by (system, segment) are the negated scores of talk 3 in the published avg_seg_scores file."""
    with gzip.open(DATA / "mqm_ted_ende.avg_seg_scores.talk3.tsv.gz", "rt", encoding="utf-8") as handle:
        published = [line.split() for line in handle.read().splitlines()[1:]]
    assert len(published) == 14 * 31
    for system, score, seg_id in published:
        ours = scores[("ref" if system == "ref-A" else system, seg_id)]
        # The published file prints six decimals and negates the penalty.
        assert -ours == pytest.approx(float(score), abs=5e-7), (system, seg_id)


HEADER = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\tcomment"


def _lines(*rows: str) -> list[str]:
    return [HEADER, *rows]


def test_published_segment_scores_of_ted_ende_talk3_are_reproduced():
    # google/wmt-mqm-human-evaluation @ 7fadea281aff8db61cc72fc3d469a4dca78b82a6: ted/ende/mqm_ted_ende.tsv and
    # ted/ende/mqm_ted_ende.avg_seg_scores.tsv, document talk.3 (segments 218-248); see tests/data/wmt_mqm/README.md.
    with gzip.open(DATA / "mqm_ted_ende.talk3.tsv.gz", "rt", encoding="utf-8", newline="") as handle:
        ratings = read_mqm_tsv(handle.read().splitlines())
    mine = segment_scores(ratings)
    assert_equal_to_the_published_segment_scores(mine)
    # Minor Fluency/Punctuation (weight 0.1) occurs in this excerpt, so the exception is exercised.
    assert any(span.category == "Fluency/Punctuation" and span.severity == "minor" for r in ratings for span in r.spans)


def test_marks_become_code_point_offsets_into_the_text_without_marks():
    ratings = read_mqm_tsv(
        _lines(
            "sys\td\t1\t7\tr1\tsrc\tEin <v>🙂 Fehler</v> hier\tAccuracy/Mistranslation\tMajor\t",
            "sys\td\t1\t7\tr1\tsrc\tEin 🙂 Fehler <v>hier</v>\tFluency/Punctuation\tMinor\t",
            "sys\td\t1\t7\tr2\tsrc\tEin 🙂 Fehler hier\tNo-error\tNo-error\t",
            "sys\td\t1\t7\tr3\t<v>the source</v>\tEin 🙂 Fehler hier\tAccuracy/Omission\tMajor\t",
        )
    )
    by_rater = {rating.rater: rating for rating in ratings}
    first = by_rater["r1"]
    assert first.target == "Ein 🙂 Fehler hier"
    assert first.spans == [
        Span(4, 12, "Accuracy/Mistranslation", "major"),
        Span(13, 17, "Fluency/Punctuation", "minor"),
    ]
    assert first.target[4:12] == "🙂 Fehler"
    assert by_rater["r2"].no_error and by_rater["r2"].spans == []
    omission = by_rater["r3"].errors[0]
    assert omission.span == Span(None, None, "Accuracy/Omission", "major")
    assert omission.source_offsets == (0, 10)
    assert segment_scores(ratings) == {("sys", "7"): pytest.approx((5 + 0.1 + 0 + 5) / 3)}


def test_non_translation_weighs_25_and_critical_needs_a_scheme_that_has_it():
    ratings = read_mqm_tsv(
        _lines(
            "sys\td\t1\t1\tr1\tsrc\ttgt\tNon-translation\tMajor\t",
            "sys\td\t1\t2\tr1\tsrc\t<v>tgt</v>\tAccuracy/Mistranslation\tCritical\t",
            "sys\td\t1\t3\tr1\tsrc\ttgt\tNon-translation!\tMajor\t",
            "sys\td\t1\t4\tr1\tsrc\ttgt\tNon-translation!\tMinor\t",
        )
    )
    assert segment_scores([ratings[0], *ratings[2:]]) == {("sys", "1"): 25.0, ("sys", "3"): 25.0, ("sys", "4"): 1.0}
    assert segment_scores(ratings[3:], MQM_CORE) == {("sys", "4"): 25.0}
    with pytest.raises(ValueError, match="no weight to severity 'critical'"):
        segment_scores(ratings)
    assert segment_scores(ratings, MQM_CORE)[("sys", "2")] == 10.0


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("sys\td\t1\t1\tr1\tsrc\t<v>a</v> <v>b</v>\tOther\tMinor\t", "at most one"),
        ("sys\td\t1\t1\tr1\tsrc\t</v>a<v>\tOther\tMinor\t", "at most one"),
        ("sys\td\t1\t1\tr1\tsrc\t<v>a <v>b</v>\tOther\tMinor\t", "at most one"),
        ("sys\td\t1\t1\tr1\tsrc\ta\tOther\tSevere\t", "unknown severity"),
        ("sys\td\t1\t1\tr1\tsrc\ta\tOther\tMinor", "fields but the header has"),
    ],
)
def test_bad_rows_are_refused_with_their_line(row, message):
    with pytest.raises(DatasetImportError, match=message) as caught:
        read_mqm_tsv(_lines(row))
    assert caught.value.line == 2


def test_rows_of_one_rating_must_share_their_text():
    with pytest.raises(DatasetImportError, match="differs from line 2") as caught:
        read_mqm_tsv(
            _lines(
                "sys\td\t1\t1\tr1\tsrc\t<v>a</v> b\tOther\tMinor\t",
                "sys\td\t1\t1\tr1\tsrc\ta <v>c</v>\tOther\tMinor\t",
            )
        )
    assert caught.value.line == 3


def test_missing_columns_and_empty_files_are_named():
    with pytest.raises(DatasetImportError, match="no column severity"):
        read_mqm_tsv(["system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory"])
    with pytest.raises(DatasetImportError, match="empty"):
        read_mqm_tsv([])


def test_a_mark_without_its_pair_keeps_the_error_without_offsets():
    # As in ted/ende/mqm_ted_ende.tsv line 6444 (commit 7fadea2), whose target ends in "<v>?" with no closing mark.
    ratings = read_mqm_tsv(_lines("sys\td\t1\t1\tr1\tsrc\tEin Satz. <v>?\tFluency/Punctuation\tMinor\t"))
    (error,) = ratings[0].errors
    assert ratings[0].target == "Ein Satz. ?"
    assert error.span == Span(None, None, "Fluency/Punctuation", "minor")
    assert (error.problem, error.line) == ("the target has <v> without its pair", 2)
    assert segment_scores(ratings) == {("sys", "1"): pytest.approx(0.1)}
