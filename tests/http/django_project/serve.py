"""Serve the test project: ``python -m django_project.serve wsgi|asgi`` (from tests/http)
listens on a free loopback port, creates the table, and prints ``listening <port>``.

WSGI: wsgiref's server with a thread per request; ASGI: uvicorn."""

from __future__ import annotations

import os
import socket
import socketserver
import sys
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "django_project.settings")


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    import django

    django.setup()
    from django.conf import settings

    from firstwrite.idempotency import Idempotency, IdempotencyConfig

    table = settings.FIRSTWRITE_IDEMPOTENCY["TABLE"]
    Idempotency(IdempotencyConfig(table_name=table)).ensure_table()
    if sys.argv[1] == "wsgi":
        from django.core.wsgi import get_wsgi_application

        server = make_server(
            "127.0.0.1", 0, get_wsgi_application(), _ThreadingServer, _QuietHandler
        )
        print("listening", server.server_port, flush=True)
        server.serve_forever()
    else:
        import uvicorn
        from django.core.asgi import get_asgi_application

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        print("listening", sock.getsockname()[1], flush=True)
        config = uvicorn.Config(
            get_asgi_application(), lifespan="off", log_level="warning", access_log=False
        )
        uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
