"""One session, many clients: everything stdio, the browsers, ACP and the terminal UI share.

``host`` holds the Host (responses to the asker, events to all with a sequence number, dialogs and approvals to
all, first answer wins) and the Client interface; ``commands`` is the one command table; ``framing`` parses an
input line; ``encoding`` writes an event in the client's stream profile; ``replay`` catches a client up;
``ui_requests``, ``approvals`` and ``host_tools`` are the requests a session sends to people and programs.
"""
