"""gunicorn settings for the web process: `gunicorn --config python:evalsite.gunicorn_config`.

docker-compose's web service and bench/annotate_load.py both start gunicorn with this module, so the load test
measures the configuration that is deployed. WEB_WORKERS, WEB_THREADS and GUNICORN_BIND override the defaults.
"""

import os

from evalsite.env import env_int, env_str

wsgi_app = "evalsite.wsgi:application"
bind = [env_str("GUNICORN_BIND", "0.0.0.0:8000")]

# Threads rather than one process per request: an annotator request spends part of its time waiting for Postgres,
# and keep-alive connections need the gthread worker (the sync worker closes every connection).
worker_class = "gthread"
workers = env_int("WEB_WORKERS", os.cpu_count() or 2, minimum=1)
threads = env_int("WEB_THREADS", 8, minimum=1)

# A gthread worker accepts every connection it wins, and a kept-alive connection stays with that worker for good.
# Clients that connect at the same moment then pile onto one worker: in annotate_load, without this cap, one of two
# workers held 23 of the 30 annotators' connections and their requests waited three times longer than the others'.
# Twice the thread count still lets a worker keep `threads` idle connections open (gunicorn closes a connection
# after its response once worker_connections - threads are idle); further connections wait for another worker.
worker_connections = 2 * threads

timeout = 120
