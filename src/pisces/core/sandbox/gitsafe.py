"""Every git command pisces runs itself (the task tool's worktrees, patches, merges) ignores the programs a
repository's configuration names, so that opening an untrusted repository (one unpacked from an archive, or
whose ``.git/config`` a model just edited) never runs its code.

``safe_env(cwd, base_env)`` returns the environment for ``git`` in ``cwd``: the configuration git reads there
is listed first (``git config --list -z``, includes followed; listing runs nothing), and every key that names
a program is overridden for the command through ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n``
(command-line scope: it wins over the system, global, repository and included files):

* always: ``core.fsmonitor=false``, ``core.hooksPath=/dev/null`` (no hook runs), ``core.pager=cat``,
  ``core.editor``/``sequence.editor=true``, ``core.askPass=`` (none), ``credential.helper=`` (the list reset),
  ``core.alternateRefsCommand=``, ``gpg.ssh.defaultKeyCommand=``, the ``gpg`` programs back to their
  defaults, signing and signature display off, ``protocol.ext.allow``/``protocol.git.allow=never`` (no
  ``ext::`` transport, no ``git://`` through ``core.gitProxy``), ``submodule.recurse=false``,
  ``maintenance.auto=false``, ``gc.auto=0``; ``GIT_SSH_COMMAND=ssh`` unless the user's environment names one;
* per configured driver or tool: ``filter.<d>.clean``/``smudge``/``process`` emptied and ``required=false``
  (the file content is taken as it is), ``merge.<d>.driver`` replaced by git's own text merge
  (``git merge-file``), ``diff.<d>.textconv=cat``, ``pager.<cmd>=false``, ``credential.<url>.helper=``,
  ``trailer.<t>.command``/``cmd=``, ``interactive.diffFilter=``, ``remote.<r>.uploadpack``/``receivepack``
  back to git's, ``submodule.<n>.update=checkout``, and ``difftool``/``mergetool``/``browser``/``man``/
  ``guitool`` ``.cmd`` emptied;
* ``diff.external`` and ``diff.<d>.command`` cannot be emptied (git then fails to run ""): ``safe_args``
  adds ``--no-ext-diff --no-textconv`` to the commands that produce diffs (``diff``, ``log``, ``show``,
  ``format-patch``, ``whatchanged``).

``alias.*`` needs nothing: pisces runs built-in commands, which an alias cannot replace. What this does not
cover: git programs found on ``PATH`` (``git-remote-<vcs>``), and a repository that changes its
configuration while the command runs (the list is read just before).
"""

from __future__ import annotations

import os
import re
import subprocess

MAX_OVERRIDES = 4096

STATIC = (
    ("core.fsmonitor", "false"), ("core.hooksPath", "/dev/null"), ("core.pager", "cat"),
    ("core.editor", "true"), ("sequence.editor", "true"), ("core.askPass", ""), ("credential.helper", ""),
    ("core.alternateRefsCommand", ""), ("gpg.program", "gpg"), ("gpg.openpgp.program", "gpg"),
    ("gpg.x509.program", "gpgsm"), ("gpg.ssh.program", "ssh-keygen"), ("gpg.ssh.defaultKeyCommand", ""),
    ("commit.gpgSign", "false"), ("tag.gpgSign", "false"), ("push.gpgSign", "false"),
    ("log.showSignature", "false"), ("merge.verifySignatures", "false"), ("protocol.ext.allow", "never"),
    ("protocol.git.allow", "never"), ("submodule.recurse", "false"), ("maintenance.auto", "false"),
    ("gc.auto", "0"), ("interactive.diffFilter", ""), ("core.sshCommand", "ssh"),
)

_MERGE_BUILTIN = "git merge-file --marker-size=%L %A %O %B"
# (pattern over the key as git lists it: section and variable lower-case, subsection as written) -> value
_PER_KEY = (
    (re.compile(r"^filter\.(.+)\.(clean|smudge|process)$", re.S), ""),
    (re.compile(r"^filter\.(.+)\.required$", re.S), "false"),
    (re.compile(r"^merge\.(.+)\.driver$", re.S), _MERGE_BUILTIN),
    (re.compile(r"^diff\.(.+)\.textconv$", re.S), "cat"),
    (re.compile(r"^pager\.(.+)$", re.S), "false"),
    (re.compile(r"^credential\.(.+)\.helper$", re.S), ""),
    (re.compile(r"^trailer\.(.+)\.(command|cmd)$", re.S), ""),
    (re.compile(r"^(difftool|mergetool|browser|man|guitool)\.(.+)\.cmd$", re.S), ""),
    (re.compile(r"^remote\.(.+)\.uploadpack$", re.S), "git-upload-pack"),
    (re.compile(r"^remote\.(.+)\.receivepack$", re.S), "git-receive-pack"),
    (re.compile(r"^submodule\.(.+)\.update$", re.S), "checkout"),
)
DIFF_COMMANDS = frozenset({"diff", "log", "show", "format-patch", "whatchanged"})
_CLEAR_ENV = ("GIT_EXTERNAL_DIFF", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_PAGER", "GIT_EDITOR",
              "GIT_SEQUENCE_EDITOR", "GIT_ASKPASS", "GIT_PROXY_COMMAND")


class UnsafeRepository(Exception):
    """The repository's configuration cannot be neutralised (too many programs in it, unreadable)."""


def configured_keys(cwd: str, env: dict[str, str]) -> list[str]:
    """The names of the configuration entries git sees in ``cwd`` (all scopes, includes followed)."""
    try:
        out = subprocess.run(["git", "config", "--list", "-z", "--name-only"], cwd=cwd, env=env,
                             capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise UnsafeRepository(f"cannot list the git configuration in {cwd}: {exc}") from None
    if out.returncode not in (0, 1):  # 1: no configuration at all
        raise UnsafeRepository(f"cannot list the git configuration in {cwd}: "
                               f"{out.stderr.decode('utf-8', 'replace').strip()[:500]}")
    return [k for k in out.stdout.decode("utf-8", "surrogateescape").split("\0") if k]


def overrides(keys: list[str]) -> list[tuple[str, str]]:
    """The ``(key, value)`` pairs that neutralise ``keys`` (the static ones first)."""
    out = list(STATIC)
    seen = set()
    for key in keys:
        for pattern, value in _PER_KEY:
            if pattern.match(key) and key not in seen:
                seen.add(key)
                out.append((key, value))
                break
    if len(out) > MAX_OVERRIDES:
        raise UnsafeRepository(f"the git configuration names {len(out)} programs; pisces will not run git there")
    return out


def safe_env(cwd: str, base: dict[str, str]) -> dict[str, str]:
    """``base`` with the overrides for ``cwd`` added (see the module's docstring). Blocking: call it off the
    event loop."""
    env = {k: v for k, v in base.items() if k not in _CLEAR_ENV and not k.startswith("GIT_CONFIG_KEY_")
           and not k.startswith("GIT_CONFIG_VALUE_")}
    env.update(GIT_PAGER="cat", GIT_EDITOR="true", GIT_SEQUENCE_EDITOR="true", GIT_TERMINAL_PROMPT="0")
    if "GIT_SSH_COMMAND" not in base and "GIT_SSH" not in base:
        env["GIT_SSH_COMMAND"] = "ssh"
    pairs = overrides(configured_keys(cwd, env) if os.path.isdir(cwd) else [])
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def safe_args(args: list[str]) -> list[str]:
    """``args`` (a git subcommand and its arguments) with ``--no-ext-diff --no-textconv`` after a command that
    produces diffs."""
    if args and args[0] in DIFF_COMMANDS:
        return [args[0], "--no-ext-diff", "--no-textconv", *args[1:]]
    return list(args)
