"""gunicorn settings for the web process: `gunicorn --config python:evalsite.gunicorn_config`.

docker-compose's web service and bench/annotate_load.py both start gunicorn with this module, so the load test
measures the configuration that is deployed. WEB_WORKERS, WEB_THREADS, WEB_CONNECTIONS_PER_WORKER and
GUNICORN_BIND override the defaults.
"""

import os
from typing import Any

from evalsite.env import env_int, env_str

wsgi_app = "evalsite.wsgi:application"
bind = [env_str("GUNICORN_BIND", "0.0.0.0:8000")]

# Threads rather than one process per request: an annotator request spends part of its time waiting for Postgres,
# and keep-alive connections need the gthread worker (the sync worker closes every connection). Few threads per
# worker: the requests a worker runs at once share one interpreter lock, so each extra thread makes every request
# in flight slower, while waiting requests are served in arrival order. In annotate_load (2 workers, 30 annotators,
# at most 16 connections each) the p95/mean latency ratio was 1.39 with 4 threads, 1.58 with 8 and 1.78 with 12 at
# the same throughput; with 3 threads throughput fell, with 2 it halved.
worker_class = "gthread"
workers = env_int("WEB_WORKERS", os.cpu_count() or 2, minimum=1)
threads = env_int("WEB_THREADS", 4, minimum=1)

# A gthread worker accepts every connection it wins, and a kept-alive connection stays with that worker for good.
# Clients that connect at the same moment then pile onto one worker: in annotate_load, one of two workers held 23 of
# the 30 annotators' connections and their requests waited three times longer than the others'. A worker holding
# more than its share therefore answers with "Connection: close", and the client's next connection goes to whichever
# worker accepts it. A hard cap (worker_connections) would balance too, but clients beyond it would wait for a free
# slot for as long as the others stay busy; here they only pay for a new connection.
connections_per_worker = env_int("WEB_CONNECTIONS_PER_WORKER", 4 * threads, minimum=1)


def pre_request(worker: Any, request: Any) -> None:
    if getattr(worker, "nr_conns", 0) > connections_per_worker:
        request.must_close = True


# The access log (off unless --access-logfile is given) names the path without its query string and leaves out the
# Referer: study links carry the platforms' worker ids in the query string (see evalsite.access_log).
access_log_format = '%(h)s %(l)s %(u)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s "%(a)s"'

timeout = 120
