"""``pisces --mode acp``: pisces as an Agent Client Protocol agent (Zed, JetBrains, any ACP client).

Built on the official SDK (``agent-client-protocol``, imported only here: it costs over a second). The
modules translate between ACP and the AgentSession; the agent's behaviour lives in ``pisces.core``.

    main.py        entry point: stdout hygiene, the SDK connection, shutdown
    transport.py   JSON-RPC messages over stdin/stdout (a thread reads stdin; malformed lines get an error)
    agent.py       the ACP methods, each a few lines that hand over to a session
    sessions.py    one ACP session = one AgentSession: create, load, resume, close, prompt, cancel
    outbox.py      a session's notifications, in order, never before the client has the session
    translate.py   AgentSession events -> session/update notifications during a turn
    replay.py      a stored conversation -> the notifications of session/load
    toolview.py    how a tool call looks in ACP: kind, title, locations, diff and output content
    config.py      session modes and config options (model, thinking level)
    content.py     ACP prompt content blocks -> prompt text and images
    delegate.py    file and terminal backends served by the client, when it advertises them
    permission.py  the approver: asks the client with session/request_permission
"""
