"""How the mapped import reads its tables: exactly repeated rows (refused by default, or dropped, or kept), a scale's
steps, row numbers that count data rows (and name the line when a quoted field spans lines), gzip, sniffed
delimiters and byte-order marks, and the limits on what an upload may become (columns, rows, decompressed bytes,
cell size), checked while the table is read and, for Parquet, from its metadata first."""

import codecs
import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.test import override_settings

from annotations.datasets.tables import TableLimits, TableReader, first_repeated
from annotations.errors import DatasetImportError
from annotations.models import Dataset, Rating
from judging.analysis.reports import compute_preferences
from tests.io.helpers import row_counts, write_lines
from tests.io.test_mapped_import import exported, run, write_csv

HELPSTEER_HEADER = ["prompt", "response", "helpfulness", "correctness", "coherence", "complexity", "verbosity"]
HELPSTEER_ROWS = [
    ["c#", "C# is a language.", "3", "4", "4", "2", "1"],
    ["c#", "C# is a note.", "0", "1", "3", "1", "1"],
    ["bacillus subtilus", "A bacterium.", "4", "4", "4", "1", "0"],
]

VOTES_MAPPING = """
item = "qid"
prompt = "question"

[preferences]
layout = "pair"
system_a = "model_a"
system_b = "model_b"
winner = "winner"
answer_a = "answer_a"
answer_b = "answer_b"
rater = "judge"
"""
VOTES_HEADER = ["qid", "question", "model_a", "model_b", "answer_a", "answer_b", "winner", "judge"]
VOTE = ["q1", "2+2?", "x", "y", "4", "5", "model_a", "w1"]
VOTES = [VOTE, ["q1", "2+2?", "x", "y", "4", "5", "model_b", "w2"], VOTE]  # the third row repeats the first


def votes(tmp_path: Path) -> tuple[Path, Path]:
    mapping = tmp_path / "votes.toml"
    mapping.write_text(VOTES_MAPPING)
    return write_csv(tmp_path / "votes.csv", VOTES_HEADER, VOTES), mapping


@pytest.mark.django_db
def test_an_exactly_repeated_row_is_refused_by_default_naming_both_rows(tmp_path: Path) -> None:
    path, mapping = votes(tmp_path)
    before = row_counts()
    code, message = run(str(path), "--mapping", str(mapping), "--dataset", "votes")
    assert code == 1
    assert "data row 3: repeated row" in message and "repeats data row 1 exactly" in message, message
    assert "'drop'" in message and "'keep'" in message, message
    assert row_counts() == before


@pytest.mark.django_db
def test_repeated_rows_dropped_or_kept_as_chosen_and_the_choice_is_shown(tmp_path: Path) -> None:
    path, mapping = votes(tmp_path)
    code, output = run(str(path), "--mapping", str(mapping), "--dataset", "dropped", "--duplicates", "drop")
    assert code == 0, output
    assert "duplicates: drop (kept the first of each; 1 exactly repeated rows dropped)" in output, output
    assert compute_preferences(Dataset.objects.get(name="dropped"), n_resamples=20)["n_preferences"] == 2
    code, output = run(str(path), "--mapping", str(mapping), "--dataset", "kept", "--duplicates", "keep")
    assert code == 0, output
    assert "duplicates: keep (1 exactly repeated rows imported as they are)" in output, output
    assert compute_preferences(Dataset.objects.get(name="kept"), n_resamples=20)["n_preferences"] == 3
    code, output = run(str(path), "--mapping", str(mapping), "--preview", "--duplicates", "drop")
    assert code == 0, output
    preview = json.loads(output)
    assert preview["duplicates"] == {"choice": "drop", "repeated": 1}
    assert preview["preferences"] == 2


@pytest.mark.django_db
def test_a_half_point_on_a_whole_number_scale_is_refused(tmp_path: Path) -> None:
    rows = [row[:] for row in HELPSTEER_ROWS]
    rows[1][2] = "2.5"
    path = write_csv(tmp_path / "train.csv", HELPSTEER_HEADER, rows)
    before = row_counts()
    code, message = run(str(path), "--mapping", "helpsteer2", "--dataset", "hs")
    assert code == 1
    assert "data row 2, field turns[0].responses.response_2.human_evals.helpfulness[0]" in message, message
    assert "score between the scale's steps" in message and "in steps of 1 from 0" in message, message
    assert "found 2.5" in message
    assert row_counts() == before


@pytest.mark.django_db
def test_row_numbers_count_data_rows_and_name_the_line_a_multiline_row_starts_on(tmp_path: Path) -> None:
    path = tmp_path / "train.csv"
    # Data row 1 spans lines 2-4 (a quoted answer with two line breaks), a blank line follows; data row 3, the bad
    # one, starts on line 7.
    path.write_text(
        ",".join(HELPSTEER_HEADER) + "\n"
        'c#,"C# is\na\nlanguage.",3,4,4,2,1\n'
        "\n"
        "c#,C# is a note.,0,1,3,1,1\n"
        "bacillus subtilus,A bacterium.,9,4,4,1,0\n",
        encoding="utf-8",
    )
    code, message = run(str(path), "--mapping", "helpsteer2", "--dataset", "hs")
    assert code == 1
    assert "data row 3 (line 7), field turns[0].responses.response_1.human_evals.helpfulness[0]" in message, message
    assert "score out of range" in message


@pytest.mark.django_db
def test_wrong_cell_count_names_the_data_row_not_the_line(tmp_path: Path) -> None:
    path = tmp_path / "train.csv"
    path.write_text(
        ",".join(HELPSTEER_HEADER) + '\nc#,"C# is\na language.",3,4,4,2,1\nc#,C# is a note.,0,1,3,1\n',
        encoding="utf-8",
    )
    code, message = run(str(path), "--mapping", "helpsteer2", "--dataset", "hs")
    assert code == 1
    assert "data row 2 (line 4): wrong number of cells: expected 7 cells, found 6" in message, message


HELPSTEER_LINES: list[dict[str, Any]] = [
    dict(zip(HELPSTEER_HEADER, [row[0], row[1], *map(int, row[2:])], strict=True)) for row in HELPSTEER_ROWS
]


@pytest.mark.django_db
def test_helpsteer2_published_jsonl_gz(tmp_path: Path) -> None:
    plain = write_lines(tmp_path / "train.jsonl", HELPSTEER_LINES)
    path = tmp_path / "train.jsonl.gz"
    path.write_bytes(gzip.compress(plain.read_bytes()))
    code, output = run(str(path), "--mapping", "helpsteer2", "--dataset", "hs2")
    assert code == 0, output
    assert "read " + str(path) + ": JSONL, gzip, 3 rows" in output, output
    assert Rating.objects.filter(response__turn__item__dataset__name="hs2").count() == 15


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("delimiter", "encoding", "shown"),
    [
        (";", "utf-8", "CSV, UTF-8, delimiter ';'"),
        ("|", "utf-8-sig", "CSV, UTF-8 with BOM, delimiter '|'"),
        ("\t", "utf-16-le", "CSV, UTF-16, delimiter tab"),
        (";", "utf-16-be", "CSV, UTF-16, delimiter ';'"),
        (",", "utf-16-le", "CSV, UTF-16, delimiter ','"),
    ],
)
def test_delimiter_and_encoding_are_sniffed(tmp_path: Path, delimiter: str, encoding: str, shown: str) -> None:
    # Excel's "CSV (semicolon)" in European locales, and "Unicode text" (UTF-16 with a byte-order mark).
    rows = [[cell.replace(".", "; ok.") for cell in row] for row in HELPSTEER_ROWS] if delimiter != ";" else []
    rows = rows or [row[:] for row in HELPSTEER_ROWS]
    text = "\r\n".join(delimiter.join(row) for row in [HELPSTEER_HEADER, *rows]) + "\r\n"
    bom = {"utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE, "utf-8-sig": b""}.get(encoding, b"")
    path = tmp_path / "train.csv"
    path.write_bytes(bom + text.encode(encoding))
    code, output = run(str(path), "--mapping", "helpsteer2", "--dataset", "sniffed")
    assert code == 0, output
    assert shown in output, output
    assert Rating.objects.filter(response__turn__item__dataset__name="sniffed").count() == 15
    assert exported("sniffed")[0]["turns"][0]["responses"]["response_1"]["response"] == rows[0][1]


@pytest.mark.django_db
def test_undecodable_text_and_utf16_without_a_mark_are_named(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes((",".join(HELPSTEER_HEADER) + "\nCafé?,Oui.,3,4,4,2,1\n").encode("latin-1"))
    code, message = run(str(path), "--mapping", "helpsteer2", "--dataset", "x")
    assert code == 1 and "not valid UTF-8" in message and "byte 0xe9" in message, message
    assert "or UTF-16 with a byte-order mark" in message
    path = tmp_path / "nobom.csv"
    path.write_bytes((",".join(HELPSTEER_HEADER) + "\nc#,C#.,3,4,4,2,1\n").encode("utf-16-le"))
    code, message = run(str(path), "--mapping", "helpsteer2", "--dataset", "x")
    assert code == 1 and "UTF-16 without a byte-order mark" in message, message


# --- limits -----------------------------------------------------------------------------------------------------


class CountedName:
    """A column name that counts how often it is compared, to show the duplicate check is one pass."""

    comparisons = 0

    def __init__(self, text: str) -> None:
        self.text = text

    def __hash__(self) -> int:
        return hash(self.text)

    def __eq__(self, other: object) -> bool:
        CountedName.comparisons += 1
        return isinstance(other, CountedName) and self.text == other.text


def test_the_duplicate_column_check_is_linear() -> None:
    for n in (20, 20_000):
        CountedName.comparisons = 0
        names = [CountedName(f"c{i}") for i in range(n)] + [CountedName("c0")]
        assert first_repeated(names) == names[0]
        # A count per name (the old check) compares n * n times; a set compares about once per name.
        assert CountedName.comparisons <= 2


def long_header(n: int) -> str:
    # Every name the same: were any per-column work (the duplicate check) done first, it would be what refused.
    return ",".join(["x"] * n) + "\n"


@pytest.mark.django_db
def test_a_20000_column_header_is_refused_by_the_column_limit_first(tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    path.write_text(long_header(20_000))
    code, message = run(str(path), "--mapping", "helpsteer2", "--dataset", "wide")
    assert code == 1
    assert "too many columns: expected at most 1000 columns (limit IMPORT_MAX_COLUMNS), found at least" in message


def zstd_bomb(path: Path, rows: int, cell: int) -> Path:
    """A Parquet file of highly compressible cells: kilobytes on disk, rows * cell bytes once decompressed."""
    table = pa.table(
        {
            "prompt": pa.array([f"p{i % 7}" for i in range(rows)]),
            "response": pa.array([f"{i}" + "a" * cell for i in range(rows)]),
        }
    )
    pq.write_table(table, path, compression="zstd", compression_level=19)
    return path


@pytest.mark.django_db
@override_settings(IMPORT_MAX_TABLE_BYTES=2 * 1024 * 1024)
def test_a_parquet_bomb_is_refused_from_its_metadata(tmp_path: Path) -> None:
    path = zstd_bomb(tmp_path / "bomb.parquet", rows=400, cell=20_000)
    assert path.stat().st_size < 64 * 1024 < 8 * 1024 * 1024
    before = row_counts()
    code, message = run(str(path), "--mapping", "helpsteer2", "--preview")
    assert code == 1
    assert "table too large: expected at most 2097152 bytes of data once decompressed" in message, message
    assert "(limit IMPORT_MAX_TABLE_BYTES)" in message
    # The number comes from the footer, read before any data page is decompressed.
    assert "bytes declared by the file's metadata" in message, message
    assert row_counts() == before


@override_settings(IMPORT_MAX_TABLE_BYTES=2 * 1024 * 1024)
def test_parquet_data_beyond_what_the_metadata_declared_is_refused_while_read(tmp_path: Path) -> None:
    path = zstd_bomb(tmp_path / "bomb.parquet", rows=400, cell=20_000)
    with open(path, "rb") as stream:
        reader = TableReader(stream=stream, filename="bomb.parquet")
        # The metadata check trusts the writer's figures; a file that lies about them is caught by the count of
        # decoded bytes as batches arrive.
        reader.check_parquet_metadata = lambda metadata, columns: None  # type: ignore[method-assign]
        with pytest.raises(DatasetImportError, match="table too large") as caught:
            for _row in reader.iter_rows():
                pass
    assert "found more" in str(caught.value) and reader.rows < 400


@pytest.mark.django_db
@override_settings(IMPORT_MAX_ROWS=2)
def test_row_limit_parquet_metadata_and_csv_while_read(tmp_path: Path) -> None:
    path = zstd_bomb(tmp_path / "rows.parquet", rows=3, cell=1)
    code, message = run(str(path), "--mapping", "helpsteer2", "--preview")
    assert code == 1 and "too many rows: expected at most 2 data rows (limit IMPORT_MAX_ROWS)" in message, message
    assert "found 3 in the file's metadata" in message
    path = write_csv(tmp_path / "rows.csv", HELPSTEER_HEADER, HELPSTEER_ROWS)
    code, message = run(str(path), "--mapping", "helpsteer2", "--preview")
    assert code == 1 and "data row 3: too many rows" in message, message


@pytest.mark.django_db
@override_settings(IMPORT_MAX_TABLE_BYTES=1024 * 1024)
def test_a_gzip_bomb_is_stopped_at_the_byte_limit(tmp_path: Path) -> None:
    path = tmp_path / "train.csv.gz"
    body = (",".join(HELPSTEER_HEADER) + "\n").encode() + b"c#," + b"a" * (16 * 1024 * 1024) + b",3,4,4,2,1\n"
    path.write_bytes(gzip.compress(body))
    assert path.stat().st_size < 64 * 1024
    code, message = run(str(path), "--mapping", "helpsteer2", "--preview")
    assert code == 1 and "table too large" in message and "(limit IMPORT_MAX_TABLE_BYTES)" in message, message


@pytest.mark.django_db
@override_settings(IMPORT_MAX_CELL_CHARS=100)
def test_a_cell_over_the_limit_is_named(tmp_path: Path) -> None:
    rows = [row[:] for row in HELPSTEER_ROWS]
    rows[1][1] = "x" * 101
    path = write_csv(tmp_path / "train.csv", HELPSTEER_HEADER, rows)
    code, message = run(str(path), "--mapping", "helpsteer2", "--preview")
    assert code == 1
    assert "data row 2: cell too large in column 'response': expected at most 100 characters" in message, message
    assert "(limit IMPORT_MAX_CELL_CHARS), found 101 characters" in message


def test_limits_come_from_the_settings() -> None:
    with override_settings(IMPORT_MAX_COLUMNS=3, IMPORT_MAX_ROWS=4, IMPORT_MAX_TABLE_BYTES=5, IMPORT_MAX_CELL_CHARS=6):
        assert TableLimits.from_settings() == TableLimits(columns=3, rows=4, bytes=5, cell_chars=6)


@pytest.mark.django_db
def test_a_step_that_does_not_divide_the_scale_is_refused(tmp_path: Path) -> None:
    mapping = tmp_path / "m.toml"
    mapping.write_text(
        'prompt = "prompt"\nanswer = "response"\nsystem_by_position = "r"\n'
        '[[ratings]]\nlayout = "wide"\naspects = ["helpfulness"]\nrater_name = "x"\n'
        '[rubric]\naspects = [{ name = "helpfulness", min = 0, max = 4, step = 3 }]\n'
    )
    path = write_csv(tmp_path / "train.csv", HELPSTEER_HEADER, HELPSTEER_ROWS)
    code, message = run(str(path), "--mapping", str(mapping), "--preview")
    assert code == 1 and "'step' must be a positive number that divides the scale [0, 4] evenly, found 3" in message
