from celery import shared_task

from annotations.models import WorkerPing


@shared_task(name="annotations.worker_ping", ignore_result=True)
def worker_ping(token: str) -> None:
    import socket

    WorkerPing.objects.get_or_create(token=token, defaults={"worker_hostname": socket.gethostname()})
