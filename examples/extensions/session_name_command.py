"""A command with an input dialog: ``/name`` asks for a session name (or takes it as an argument) and sets it.

    > {"id":"1","type":"prompt","message":"/name"}
    < {"type":"extension_ui_request","id":"…","method":"input","title":"Session name","placeholder":"…"}
    > {"type":"extension_ui_response","id":"…","value":"Refactor auth"}
    < {"type":"session_info_changed","name":"Refactor auth"}
    < {"type":"extension_ui_request","id":"…","method":"notify","message":"Session named: Refactor auth",…}
    < {"id":"1","type":"response","command":"prompt","success":true}
"""


def register(pi):
    @pi.command("name", description="Name this session (asks for the name when none is given)")
    async def name(args, ctx):
        value = args.strip() or await ctx.ui.input("Session name", pi.get_session_name() or "what is this about?")
        if not value or not value.strip():
            ctx.ui.notify("Session name unchanged", "info")
            return
        pi.set_session_name(value)
        ctx.ui.notify(f"Session named: {value.strip()}", "info")
