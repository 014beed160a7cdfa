import ctypes
import os
import signal

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")

app = Celery("evalsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Hybrid campaigns read the analysis layer's judge confidences, which judging.tasks sits below, so their task lives
# in the hybrid package's own tasks module.
app.autodiscover_tasks(["judging.hybrid"])


# A worker started with --beat (the deployed worker, docker-compose.yml) runs the scheduler in a child process. When
# the worker is killed outright (SIGKILL, the OOM killer) nothing tells that child: the orphaned scheduler went on
# enqueuing the periodic tasks beside the one the restarted worker starts. So the child asks the kernel to kill it
# when its parent dies (Linux; elsewhere nothing changes). The kernel ties this to the thread that forked the child,
# which for the scheduler is the worker's main thread, alive as long as the worker.
PR_SET_PDEATHSIG = 1


def stop_with_parent(**_: object) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return  # not Linux
    if os.getppid() == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # the parent died before the request took effect


signals.beat_embedded_init.connect(stop_with_parent, weak=False)
