"""An ASGI or WSGI app served from a thread on a free loopback port, for the docs' blocks.

Standalone (standard library, plus uvicorn for an ASGI app): the docs harness imports it, and
the child interpreter that runs a page's visible blocks as pasted (``doc_pasted.py``) loads it
by path, so that nothing of tests/ becomes importable there.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

START_TIMEOUT = 60.0


class AppServer:
    """An ASGI app on uvicorn, or a WSGI app on a threading wsgiref server, served from a
    thread on a free loopback port."""

    def __init__(self, app: Any) -> None:
        self._stop: Callable[[], None]
        if inspect.iscoroutinefunction(app) or inspect.iscoroutinefunction(type(app).__call__):
            import uvicorn

            server = uvicorn.Server(
                uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
            )
            thread = threading.Thread(target=server.run, daemon=True)
            thread.start()
            deadline = time.monotonic() + START_TIMEOUT
            while not server.started:
                if not thread.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError("the ASGI app did not start (see the captured log)")
                time.sleep(0.01)
            port = server.servers[0].sockets[0].getsockname()[1]

            def stop() -> None:
                server.should_exit = True
                thread.join(START_TIMEOUT)

            self._stop = stop
        else:
            httpd = make_server(
                "127.0.0.1", 0, app, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler
            )
            # serve_forever looks for shutdown() every poll_interval (0.5 s by default)
            threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True).start()
            port = httpd.server_address[1]

            def stop() -> None:
                httpd.shutdown()
                httpd.server_close()

            self._stop = stop
        self.address = f"127.0.0.1:{port}"
        self.url = "http://" + self.address

    def stop(self) -> None:
        self._stop()


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass
