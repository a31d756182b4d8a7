"""A TCP forwarder on 127.0.0.1 whose connections a test can cut, and which can refuse new ones for a while:
a network that drops, between ``pisces attach`` and the web mode. ``close`` stops it and every connection."""

from __future__ import annotations

import socket
import threading


class Proxy:
    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.refusing = False
        self.accepted = 0
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                conn.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                conn.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self.accepted += 1
                self._open += [conn, upstream]
            # the web mode checks the Host header (DNS rebinding): the request names the server's own port
            host = (f"127.0.0.1:{self.port}".encode(), f"127.0.0.1:{self.target[1]}".encode())
            threading.Thread(target=self._pump, args=(conn, upstream, host), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, conn, None), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, host: tuple[bytes, bytes] | None) -> None:
        try:
            first = True
            while data := src.recv(65536):
                if first and host is not None:
                    data = data.replace(*host, 1)
                first = False
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self, *, refuse: bool) -> None:
        """Drop every connection (as a network would); with ``refuse``, new ones are closed at once."""
        self.refusing = refuse
        with self._lock:
            conns, self._open = self._open, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def allow(self) -> None:
        self.refusing = False

    def close(self) -> None:
        self._closed = True
        self.cut(refuse=True)
        self.listener.close()
