class DatasetImportError(Exception):
    """A problem with an import file, located precisely enough to fix it by hand."""

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
        parts = []
        if line is not None:
            parts.append(f"line {line}")
        if field:
            parts.append(f"field {field}")
        location = ", ".join(parts)
        detail = message
        if expected is not None:
            detail += f": expected {expected}, found {found}"
        super().__init__(f"{location}: {detail}" if location else detail)


class RubricError(ValueError):
    pass


class RatingOutOfRange(ValueError):
    pass


class DatasetEditError(ValueError):
    """A change to a dataset's name, owner or sharing was refused; the message says why."""
