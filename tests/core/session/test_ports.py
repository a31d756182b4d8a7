"""core/session/ports.py is typing only: importing it loads no pisces module besides the session package."""

import json
import subprocess
import sys


def test_ports_import_no_other_pisces_module():
    code = ("import sys, json; before = set(sys.modules); import pisces.core.session.ports as p; "
            "print(json.dumps({'new': sorted(set(sys.modules) - before), 'all': p.__all__}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    data = json.loads(out.stdout)
    pisces_new = [m for m in data["new"] if m.startswith("pisces")]
    assert set(pisces_new) <= {"pisces", "pisces.core", "pisces.core.session", "pisces.core.session.ports"}, pisces_new
    assert {"SessionHooks", "Budget", "Approval", "BashRunnerPort", "CompactionHost"} <= set(data["all"])


def test_default_collaborators_have_every_protocol_member():
    from pisces.core.session import ports
    from pisces.core.session.hooks import NoHooks
    from pisces.core.session.user_bash import BashRunner

    for impl, proto in ((NoHooks, ports.SessionHooks), (BashRunner, ports.BashRunnerPort)):
        members = {n for n in vars(proto) if not n.startswith("_")} - {"__protocol_attrs__"}
        missing = [n for n in members if not hasattr(impl, n)]
        assert not missing, (impl.__name__, missing)
