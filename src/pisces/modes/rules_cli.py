"""``pisces rules list`` and ``pisces rules test RULE --text "..."``: the stream rules (docs/planning.md) as the
session finds them, and one rule tried on a text.

``test`` prints whether RULE (a rule name from the rule directories, or a rule file's path) fires on the text
in the given scope (``text`` by default; ``thinking``; ``tool:NAME`` with ``--path``), and exits 0 when it
fires, 1 when it does not, 2 on an error (no such rule, a regex RE2 refuses).
"""

from __future__ import annotations

import argparse
import os
import sys

from pisces.core.config.paths import agent_dir
from pisces.core.config.settings import Settings
from pisces.core.planning.rules import WINDOW, Rule, load_rule, load_rules, rule_dirs


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pisces rules", description="Stream rules (TTSR): list them, try one.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the rules in force here (user and trusted project rule files)")
    test = sub.add_parser("test", help="whether RULE fires on a text")
    test.add_argument("rule", help="a rule name, or the path of a rule file")
    test.add_argument("--text", required=True, help="the text to try (as streamed by the model)")
    test.add_argument("--scope", default="text", help="text (default), thinking, or tool:NAME")
    test.add_argument("--path", default=None, help="with --scope tool:NAME: the tool call's path argument")
    return parser


def run_rules(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    cwd = os.getcwd()
    settings = Settings(agent_dir(), cwd)
    rules, errors = load_rules(rule_dirs(agent_dir(), cwd, settings.project_trusted))
    for error in errors:
        sys.stderr.write(f"pisces: rule skipped: {error}\n")
    if args.command == "list":
        for rule in rules:
            print(f"{rule.name}\t{rule.trigger}\t{','.join(repr(s) for s in rule.scopes)}\t{rule.path}")
        if not rules:
            print("no stream rules (put rule files in " + ", ".join(rule_dirs(agent_dir(), cwd, True)) + ")")
        return 0
    try:
        found: Rule | None
        if args.rule.endswith(".md") and os.path.exists(args.rule):
            found = load_rule(args.rule)
            if found is None:
                raise ValueError(f"{args.rule} has no ttsrTrigger (or condition): it never fires while streaming")
        else:
            found = next((r for r in rules if r.name == args.rule), None)
            if found is None:
                raise ValueError(f"no rule named {args.rule!r}; known: {', '.join(r.name for r in rules) or 'none'}")
        rule = found
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"pisces: {exc}\n")
        return 2
    kind, _, tool = args.scope.partition(":")
    if kind not in ("text", "thinking", "tool"):
        sys.stderr.write(f"pisces: unknown scope {args.scope!r}: use text, thinking or tool:NAME\n")
        return 2
    if not rule.applies(kind, tool or None, args.path):
        print(f"{rule.name}: does not look at {args.scope}" + (f" ({args.path})" if args.path else "")
              + f"; its scope is {', '.join(repr(s) for s in rule.scopes)}")
        return 1
    match = rule.regex.search(args.text[-WINDOW:])
    if match is None:
        print(f"{rule.name}: no match")
        return 1
    print(f"{rule.name}: fires on {match.group(0)!r} (characters {match.start()}-{match.end()})")
    return 0
