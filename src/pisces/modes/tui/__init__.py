"""The interactive terminal UI (``pisces`` on a terminal): a client of the host, imported only in that mode."""
