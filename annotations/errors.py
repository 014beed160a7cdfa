class DatasetImportError(Exception):
    """A problem with an import file, located precisely enough to fix it by hand: the line of a JSONL file, or the
    row (and file) of a table read through a mapping."""

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        field: str | None = None,
        expected: str | None = None,
        found: str | None = None,
    ) -> None:
        self.line = line
        self.field = field
        self.expected = expected
        self.found = found
        self.reason = message
        self.row: int | None = None
        self.unit = "row"
        self.source_line: int | None = None  # the file's line where the row starts, when a field spans lines
        self.file: str | None = None
        super().__init__(self._text())

    def _text(self) -> str:
        parts = []
        if self.file is not None:
            parts.append(self.file)
        if self.row is not None:
            parts.append(f"{self.unit} {self.row}" + (f" (line {self.source_line})" if self.source_line else ""))
        elif self.line is not None:
            parts.append(f"line {self.line}")
        if self.field:
            parts.append(f"field {self.field}")
        location = ", ".join(parts)
        detail = self.reason
        if self.expected is not None:
            detail += f": expected {self.expected}, found {self.found}"
        return f"{location}: {detail}" if location else detail

    def at_row(self, row: int | None, *, unit: str = "row") -> "DatasetImportError":
        """The same problem, located at a row of a table (or a line of a JSONL table) instead."""
        self.row = row
        self.unit = unit
        self.args = (self._text(),)
        return self

    def starting_on_line(self, line: int | None) -> "DatasetImportError":
        self.source_line = line
        self.args = (self._text(),)
        return self

    def in_file(self, name: str) -> "DatasetImportError":
        self.file = name
        self.args = (self._text(),)
        return self


class RubricError(ValueError):
    pass


class RatingOutOfRange(ValueError):
    pass


class DatasetEditError(ValueError):
    """A change to a dataset's name, owner or sharing was refused; the message says why."""
