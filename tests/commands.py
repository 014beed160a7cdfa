"""Management commands called in the test's own process, their output read back."""

import io
import json
from typing import Any

from django.core.management import call_command


def command_output(*args: str) -> str:
    """What the command prints."""
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def command_json(*args: str) -> Any:
    """The command run with --json, its output parsed."""
    return json.loads(command_output(*args, "--json"))
