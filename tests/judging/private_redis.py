"""A redis-server of one test alone, for the tests that stop the broker and limiter mid-run; the machine's shared
Redis is never touched."""

import shutil
import subprocess
from pathlib import Path

import redis

from tests.conftest import wait_for
from tests.fakeprovider import free_port

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


class PrivateRedis:
    """A redis-server of this test alone, without persistence like the one of docker-compose.yml: a restart loses
    the queued tasks and the limiter's state."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "PrivateRedis":
        self.process = subprocess.Popen(
            [
                REDIS_SERVER,
                *("--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory)),
                *("--save", "", "--appendonly", "no", "--logfile", str(self.directory / "redis.log")),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        wait_for(lambda: _answers(client), timeout=10, message="the private redis-server to answer")
        client.close()
        return self

    def stop(self) -> None:
        """SIGTERM, as in a restart of the service."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
        self.process = None


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
