"""Access logs without query strings.

Study links arrive with the platform's ids in the query string (PROLIFIC_PID, workerId, SESSION_ID, assignmentId...),
and these ids are personal data kept only in the recruitment tables. A request line logged whole would copy them
into every log file and log shipper, so the development server's access log (the `django.server` logger, which
rundemo's runserver writes) drops the query string of the request line, and gunicorn's access log format
(evalsite.gunicorn_config) logs the path without the query string and without the Referer, which carries the
previous page's query string."""

import logging
import re

_QUERY = re.compile(r"\?[^\s\"]*")


def without_query_string(text: str) -> str:
    return _QUERY.sub("", text)


class QueryStringFilter(logging.Filter):
    """Removes query strings from the text arguments of a record (the request line of runserver's access log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(without_query_string(a) if isinstance(a, str) else a for a in record.args)
        if isinstance(record.msg, str) and "?" in record.msg:
            record.msg = without_query_string(record.msg)
        return True
