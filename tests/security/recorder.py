"""A tiny OpenAI-compatible endpoint that records every request's headers, for key-leak and SSRF tests.

server = RecordingServer("127.0.0.2").start()
server.mode = "ok" | "echo_key_401" | "redirect"   (redirect_to=...)
server.requests  -> [{"path": ..., "headers": {...}, "body": ...}]
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class RecordingServer:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.requests: list[dict[str, Any]] = []
        self.mode = "ok"
        self.redirect_to = ""
        self.content = "The answer is fine.\nScore: 3"
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> "RecordingServer":
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode("utf-8", errors="replace") if length else ""
                recorder.requests.append(
                    {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
                )
                if recorder.mode == "redirect":
                    self.send_response(307)
                    self.send_header("Location", recorder.redirect_to + self.path.removeprefix("/v1"))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if recorder.mode == "echo_key_401":
                    # Like real providers, echo the credential in the error message.
                    message = f"Incorrect API key provided: {self.headers.get('Authorization', '')}"
                    self._json(401, {"error": {"message": message, "type": "invalid_request_error"}})
                    return
                self._json(
                    200,
                    {
                        "id": "chatcmpl-recorder",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "gpt-4o-mini",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": recorder.content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    },
                )

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer((self.host, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def saw(self, secret: str) -> bool:
        return any(secret in json.dumps(request) for request in self.requests)
