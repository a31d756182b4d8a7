"""Extensions: Python modules that hook into the session (pi's extension API, in Python idiom).

    # ~/.pisces/agent/extensions/gate.py
    def register(pi):
        @pi.on("tool_call")
        async def gate(event, ctx):
            if event.tool_name == "bash" and "rm -rf" in event.input["command"]:
                return {"block": True, "reason": "Dangerous command"}

Modules: ``loader`` (discovery, entry points, trust, import), ``api`` (the object ``register`` receives),
``runner`` (events, pi's combination rules, error isolation), ``context`` (what handlers get as ``ctx``),
``host`` (the wiring into a session), ``tools`` (registered tools as agent tools), ``legacy`` (seed 003's hooks
and custom tools). Nothing here is imported unless a session has an extension source. See docs/extensions.md.
"""
