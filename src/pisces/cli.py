"""Command-line parsing: flags in, a mode out. Heavy imports happen only once a mode is chosen."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from typing import Any, Sequence

from pisces import __version__

THINKING_CHOICES = ("off", "minimal", "low", "medium", "high", "xhigh")
MODES = ("text", "json", "rpc", "acp", "web")
STREAM_PROFILES = ("full", "lean", "deltas")  # pisces.modes.host.encoding.PROFILES, without importing it
APPROVAL_MODES = ("yolo", "write", "always-ask")  # pisces.core.approval.MODES, without importing it
SANDBOX_MODES = ("read-only", "workspace-write", "off")  # pisces.core.sandbox.policy.MODES, without importing it

# Flags pisces accepts for pi's wrappers but does not act on (yet): dest -> why. A mode prints one line about
# the ones given. Features built later remove their entry here.
IGNORED_FLAGS: dict[str, str] = {
    "themes": "themes apply to the terminal UI only",
    "no_themes": "themes apply to the terminal UI only",
    "verbose": "pisces prints no start-up banner",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one clear line and exit 2, no usage dump
        sys.stderr.write(f"pisces: {message}\nTry 'pisces --help' for the options.\n")
        raise SystemExit(2)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse builds a formatter for every add_argument, and its default width comes from
    ``shutil.get_terminal_size``: importing shutil (with bz2, lzma, ...) cost 1.7 ms of each start."""

    def __init__(self, prog: str, **kwargs: Any) -> None:
        kwargs.setdefault("width", _terminal_width() - 2)  # argparse's own margin
        super().__init__(prog, **kwargs)


def _terminal_width() -> int:
    """$COLUMNS, else the terminal's width, else 80 (what shutil.get_terminal_size would say)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ is not None else 80
        except (AttributeError, ValueError, OSError):
            columns = 80
    return columns or 80


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="pisces",
        description="A coding agent. Its headless RPC mode speaks pi's JSON-lines protocol on stdin/stdout.",
        epilog="Examples:\n"
               "  pisces --provider faux -p \"What files are here?\"   # built-in scripted model, no key\n"
               "  pisces --mode rpc                                    # JSON lines on stdin/stdout\n"
               "  pisces --model anthropic/claude-sonnet-4-5 -p \"Explain main.py\"\n"
               "  echo 'review this' | pisces -p                       # piped stdin joins the prompt\n",
        formatter_class=_Formatter,
    )
    p.add_argument("messages", nargs="*", help="the prompt (several arguments are sent one after another)")
    p.add_argument("--version", "-v", action="version", version=f"pisces {__version__}")
    p.add_argument("--provider", help="provider name (anthropic, openai, google, faux, or one from models.json)")
    p.add_argument("--model", help="model id, provider/id, or a pattern; a ':<thinking>' suffix sets the level")
    p.add_argument("--models", help="comma-separated model patterns to cycle through (cycle_model)")
    p.add_argument("--api-key", dest="api_key", help="API key for the selected provider (overrides env and auth.json)")
    p.add_argument("--thinking", type=_choice(THINKING_CHOICES, "--thinking"), help="thinking level: "
                   + ", ".join(THINKING_CHOICES))
    p.add_argument("--mode", type=_choice(MODES, "--mode"), default=None,
                   help="output mode: text (default), json, rpc, acp, web (the browser UI: docs/web.md)")
    p.add_argument("-p", "--print", dest="print_mode", action="store_true",
                   help="answer the prompt, print the final text and exit")
    p.add_argument("--no-session", dest="no_session", action="store_true", help="keep the session in memory only")
    p.add_argument("--session-dir", dest="session_dir", help="directory for session files")
    p.add_argument("--session", help="open this session file (path or id)")
    p.add_argument("-c", "--continue", dest="continue_session", action="store_true",
                   help="continue the most recent session of this directory")
    p.add_argument("-r", "--resume", dest="resume", action="store_true",
                   help="pick one of this directory's sessions from a numbered list (needs a terminal)")
    p.add_argument("--fork", metavar="PATH|ID", help="copy this session into a new session and continue there")
    p.add_argument("-t", "--tools", help="comma-separated tools to enable (read,bash,edit,write,grep,find,ls)")
    p.add_argument("-nt", "--no-tools", dest="no_tools", action="store_true", help="start with no tools")
    p.add_argument("-nbt", "--no-builtin-tools", dest="no_builtin_tools", action="store_true",
                   help="start without the built-in tools (--tools still picks some)")
    p.add_argument("--system-prompt", dest="system_prompt", help="replace the system prompt (text or a file)")
    p.add_argument("--append-system-prompt", dest="append_system_prompt", action="append", metavar="TEXT",
                   help="append text or a file's contents to the system prompt (repeatable)")
    p.add_argument("-nc", "--no-context-files", dest="no_context_files", action="store_true",
                   help="do not read AGENTS.md / CLAUDE.md")
    p.add_argument("-e", "--extension", dest="extensions", action="append", metavar="PATH",
                   help="load an extension (repeatable)")
    p.add_argument("-ne", "--no-extensions", dest="no_extensions", action="store_true",
                   help="do not discover extensions")
    p.add_argument("--skill", dest="skills", action="append", metavar="PATH", help="load a skill (repeatable)")
    p.add_argument("-ns", "--no-skills", dest="no_skills", action="store_true", help="do not discover skills")
    p.add_argument("--prompt-template", dest="prompt_templates", action="append", metavar="PATH",
                   help="load a prompt template file or directory (repeatable)")
    p.add_argument("-np", "--no-prompt-templates", dest="no_prompt_templates", action="store_true",
                   help="do not discover prompt templates")
    p.add_argument("--theme", dest="themes", action="append", metavar="PATH",
                   help="a theme file in pi's JSON format for the terminal UI (the last one is used)")
    p.add_argument("--no-themes", dest="no_themes", action="store_true",
                   help="the terminal UI reads no theme file from the agent dir (built-in themes and --theme only)")
    p.add_argument("--list-models", dest="list_models", nargs="?", const=True, default=None, metavar="SEARCH",
                   help="list the model catalogue with each provider's key status, and exit")
    p.add_argument("--verbose", action="store_true", help="accepted for pi's wrappers (pisces prints no banner)")
    p.add_argument("--offline", action="store_true",
                   help="no network at start-up (pisces never uses the network before a prompt)")
    p.add_argument("--faux-script", dest="faux_script", metavar="FILE",
                   help="JSON script of replies for the built-in faux model (implies --provider faux)")
    p.add_argument("--export", nargs="+", metavar=("SESSION", "OUT"),
                   help="write SESSION (a .jsonl file) as a self-contained HTML file and exit")
    p.add_argument("--no-ready", dest="no_ready", action="store_true",
                   help="RPC mode: do not send the {\"type\":\"ready\"} frame at start-up")
    p.add_argument("--stream-profile", dest="stream_profile", type=_choice(STREAM_PROFILES, "--stream-profile"),
                   help="RPC and json modes: what message_update frames carry: full (pi's frames, the "
                        "default), lean (the snapshot once) or deltas (no snapshots)")
    p.add_argument("--plain", action="store_true",
                   help="interactive mode line by line, without cursor movement (also when TERM=dumb)")
    _add_trust_flags(p)
    p.add_argument("--approval-mode", dest="approval_mode", type=_choice(APPROVAL_MODES, "--approval-mode"),
                   help="which tool calls run without asking (docs/approval.md): yolo (all), write (reads and "
                        "edits; commands ask), always-ask (only reads); known-dangerous commands always ask")
    p.add_argument("--yolo", dest="approval_mode", action="store_const", const="yolo",
                   help="the same as --approval-mode yolo")
    p.add_argument("--sandbox", dest="sandbox_mode", type=_choice(SANDBOX_MODES, "--sandbox"),
                   help="the OS sandbox of the commands run for the model (docs/security.md#the-os-sandbox): "
                        "workspace-write (writes only in the working directory and a private temp dir), read-only, "
                        "or off; the default is workspace-write where a person approves (typed RPC clients, ACP, "
                        "web) and off for pi's clients and -p")
    _add_web_flags(p)
    return p


def _add_web_flags(p: argparse.ArgumentParser) -> None:
    """The web mode (docs/web.md): ``--mode web``, or ``--mode rpc --web`` for stdio and browsers at once."""
    p.add_argument("--web", action="store_true",
                   help="RPC mode: also serve the browser UI on the same live session (see --mode web)")
    p.add_argument("--host", metavar="ADDR", help="web: the address to listen on (default 127.0.0.1; any "
                   "other needs a token: --web-token-file or PISCES_WEB_TOKEN)")
    p.add_argument("--port", type=int, metavar="N",
                   help="web: the port (default: the web.port setting, else one derived from the project directory, "
                        "the same on every run; 0: a free one)")
    p.add_argument("--web-token", dest="web_token", metavar="TOKEN",
                   help="refused: a token on the command line is visible to every local user; use "
                        "--web-token-file or PISCES_WEB_TOKEN")
    p.add_argument("--web-token-file", dest="web_token_file", metavar="PATH",
                   help="web: read the token programs send (Authorization: Bearer) from PATH (mode 600; '-': "
                        "stdin, with --mode web); default PISCES_WEB_TOKEN, else a random one")
    p.add_argument("--web-origin", dest="web_origins", action="append", metavar="URL",
                   help="web: one more Origin browsers may connect from, e.g. https://box.example:8443 "
                        "behind a proxy (repeatable)")


def _add_trust_flags(p: argparse.ArgumentParser) -> None:
    """Project trust (see docs/security.md): which of a repository's own settings may take effect."""
    p.add_argument("-a", "--approve", dest="approve", action="store_const", const=True, default=None,
                   help="trust this project for this run: its .pisces/settings.json may set the shell, "
                        "the session directory, ...")
    p.add_argument("-na", "--no-approve", dest="approve", action="store_const", const=False,
                   help="ignore this project's trust-gated settings for this run, even if it is trusted")
    p.add_argument("--trust-project", dest="trust_project", action="store_true",
                   help="trust the project in the current directory from now on (saved in the agent dir's "
                        "trust.json), then run as asked, or exit when nothing else was asked")


def _apply_trust_flags(args: Any) -> int | None:
    """Returns an exit code when the run ends here."""
    if args.approve is None and not args.trust_project:
        return None
    from pisces.core.config import trust  # noqa: PLC0415 - only the chosen mode is imported
    from pisces.core.config.paths import agent_dir  # noqa: PLC0415 - only the chosen mode is imported

    trust.set_run_override(args.approve)
    if not args.trust_project:
        return None
    try:
        path = trust.trust_project(os.getcwd(), agent_dir())
    except (OSError, ValueError) as exc:
        return _fail(f"cannot trust this project: {exc}")
    sys.stderr.write(f"pisces: trusted {path}: its .pisces settings apply from now on\n")
    if not args.messages and not args.mode and not args.print_mode:
        return 0
    return None


def _choice(choices: Sequence[str], flag: str) -> Any:
    def parse(value: str) -> str:
        if value not in choices:
            raise argparse.ArgumentTypeError(f"invalid value '{value}' for {flag}: choose one of {', '.join(choices)}")
        return value

    return parse


def ignored_flags_note(args: Any, used: tuple[str, ...] = ()) -> str | None:
    """One line naming the given flags that have no effect here (``used``: those the chosen mode reads), with
    why; None when there are none."""
    if not any(getattr(args, dest, None) for dest in IGNORED_FLAGS if dest not in used):
        return None
    names = {a.dest: a.option_strings[-1] for a in build_parser()._actions if a.option_strings}
    given: dict[str, list[str]] = {}
    for dest, why in IGNORED_FLAGS.items():
        if getattr(args, dest, None) and dest not in used:
            given.setdefault(why, []).append(names.get(dest, dest))
    return "pisces: ignoring " + "; ".join(f"{', '.join(flags)} ({why})" for why, flags in given.items())


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["batch"]:  # a subcommand: its own flags (docs/batch.md)
        from pisces.modes.batch.main import run_batch  # noqa: PLC0415 - only the chosen mode is imported

        return run_batch(words[1:])
    if words[:2] in (["rules", "test"], ["rules", "list"]):  # stream rules (docs/planning.md)
        from pisces.modes.rules_cli import run_rules  # noqa: PLC0415 - only the chosen mode is imported

        return run_rules(words[1:])
    if words[:2] in (["mcp", "login"], ["mcp", "logout"], ["mcp", "list"]):  # MCP servers (docs/mcp.md)
        from pisces.modes.mcp_cli import run_mcp  # noqa: PLC0415 - only the chosen mode is imported

        return run_mcp(words[1:])
    if words[:1] == ["web"]:  # the browsers the web mode remembers (docs/web.md)
        from pisces.modes.web.devices_cli import run_web_cli  # noqa: PLC0415 - only the chosen mode is imported

        return run_web_cli(words[1:])
    if words[:1] in (["login"], ["logout"]):  # subscription logins (docs/providers.md)
        from pisces.modes.login_cli import run_login, run_logout  # noqa: PLC0415 - only the chosen mode is imported

        return (run_login if words[0] == "login" else run_logout)(words[1:])
    if words[:1] == ["attach"]:  # the terminal UI on a session served by --mode web (docs/tui.md)
        from pisces.modes.tui.attach import run_attach  # noqa: PLC0415 - only the chosen mode is imported

        return run_attach(words[1:])
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # words argparse does not know may be flags an extension registers (--plan, --name=value): the session
    # checks them once extensions are loaded, and refuses the rest as argparse would
    if any(not a.startswith("--") for a in extra):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extension_flags = extra
    if args.list_models is not None:
        from pisces.modes.list_models import run_list_models  # noqa: PLC0415 - only the chosen mode is imported

        return run_list_models(None if args.list_models is True else args.list_models, api_key=args.api_key,
                               provider=args.provider)
    if args.export:
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if len(args.export) > 2:
            return _fail("--export takes a session file and an optional output path")
        from pisces.modes.export_cli import run_export  # noqa: PLC0415 - only the chosen mode is imported

        return run_export(args.export[0], args.export[1] if len(args.export) > 1 else None)
    ended = _apply_trust_flags(args)
    if ended is not None:
        return ended
    mode = args.mode or "text"
    if args.faux_script and not args.provider:
        args.provider = "faux"
    problem = _session_flag_conflict(args)
    if problem:
        return _fail(problem)
    tui = mode == "text" and not args.print_mode and (args.plain or (sys.stdin.isatty() and sys.stdout.isatty()))
    note = ignored_flags_note(args, ("themes", "no_themes") if tui else ())
    if note:
        sys.stderr.write(note + "\n")
    if args.resume:
        from pisces.modes.session_picker import pick_session  # noqa: PLC0415 - only the chosen mode is imported

        picked = pick_session(args)
        if picked is None:
            return 0
        if isinstance(picked, int):
            return picked
        args.session = picked
    if mode == "web" or args.web:
        problem = _web_flag_problem(args, mode)
        if problem:
            return _fail(problem)
    if mode == "web":
        gc.disable()
        from pisces.modes.web.main import run_web  # noqa: PLC0415 - only the chosen mode is imported

        return run_web(args)
    if mode == "rpc":
        if args.print_mode:
            return _fail("-p/--print cannot be combined with --mode rpc")
        if any(m.startswith("@") for m in args.messages):
            return _fail("@file arguments are not supported in RPC mode")
        # Start-up only builds objects that live as long as the process (modules, classes, the session):
        # no cycle search until the server is up (run_rpc turns the collector back on).
        gc.disable()
        from pisces.modes.rpc.main import run_rpc  # noqa: PLC0415 - only the chosen mode is imported

        return run_rpc(args)
    if mode == "acp":  # an Agent Client Protocol agent for editors (docs/acp.md)
        if args.print_mode or args.messages:
            return _fail("--mode acp takes its prompts from the editor: no -p and no message arguments")
        from pisces.modes.acp.main import run_acp  # noqa: PLC0415 - only the chosen mode is imported

        return run_acp(args)
    if mode == "json" or args.print_mode:
        from pisces.modes.print import run_print  # noqa: PLC0415 - only the chosen mode is imported

        return run_print(args, json_events=(mode == "json"))
    if args.plain or (sys.stdin.isatty() and sys.stdout.isatty()):
        from pisces.modes.tui.main import run_tui  # noqa: PLC0415 - only the chosen mode is imported

        return run_tui(args)
    from pisces.modes.print import run_print  # noqa: PLC0415 - only the chosen mode is imported

    return run_print(args, json_events=False)


def _web_flag_problem(args: Any, mode: str) -> str | None:
    if args.web and mode != "rpc":
        return "--web goes with --mode rpc (stdio and browsers on one session); for browsers alone use --mode web"
    if args.print_mode or args.messages:
        return "the web mode takes its prompts from the browser: no -p and no message arguments"
    from pisces.modes.web.main import check_args  # noqa: PLC0415 - only the chosen mode is imported

    return check_args(args)


def _session_flag_conflict(args: Any) -> str | None:
    if args.fork:
        others = [flag for flag, on in (("--session", args.session), ("--continue", args.continue_session),
                                        ("--resume", args.resume), ("--no-session", args.no_session)) if on]
        if others:
            return f"--fork cannot be combined with {', '.join(others)}"
    return None


def _fail(message: str) -> int:
    sys.stderr.write(f"pisces: {message}\n")
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

