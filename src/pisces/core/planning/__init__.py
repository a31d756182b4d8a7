"""Planning tools of a session (docs/planning.md): the todo list (``todos``: the data; ``session_todos``: its
persistence in the session file, events and reminders; ``todo_tool``: the ``todo_write`` tool), the stream
rules (``rules``, ``ttsr``) and plan mode (``plan_mode``, loaded only by a session that uses it).

Each part is a session collaborator: given a few callables (emit, append an entry, the branch, the settings)
and fed the session's events; none reaches into the session's private members. Plan mode is given the session
itself (its store, agent tools, approval gate and prompt), through public methods only.
"""
