"""The web mode: HTTP + WebSocket clients of the host (``pisces.modes.host.host``) and the browser UI's files.

Importing this package costs nothing; the server library is imported by ``pisces.modes.web.server`` only.
"""
