"""Finding and loading extensions: locations, load order, trust, entry points, failures."""

from __future__ import annotations

import json
import os
import sys

import pytest
from ext_helpers import make

from pisces.core.extensions.api import Runtime
from pisces.core.extensions.entry_points import entry_points
from pisces.core.extensions.loader import discover, load_all


def trust(cwd, agent_dir):
    from pisces.core.config.trust import trust_project

    trust_project(str(cwd), str(agent_dir))


def ext_file(path, name, body=""):
    path.mkdir(parents=True, exist_ok=True)
    f = path / name
    f.write_text(body or f"ORDER = []\n\ndef register(pi):\n    pi.register_command({name.split('.')[0]!r}, "
                         f"handler=lambda a: None)\n")
    return f


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    agent = tmp_path / "agent"
    cwd = tmp_path / "proj"
    cwd.mkdir()
    agent.mkdir()
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("PISCES_DISABLE_EXTENSION_AUTOLOAD", "1")
    return agent, cwd


def paths(sources):
    return [os.path.basename(s.path) for s in sources]


def test_load_order_cli_settings_project_user(dirs, tmp_path):
    agent, cwd = dirs
    cli = ext_file(tmp_path / "cli", "cli_ext.py")
    ext_file(agent / "extensions", "b_user.py")
    ext_file(agent / "extensions", "a_user.py")
    pkg = agent / "extensions" / "pkg_user"
    ext_file(pkg, "__init__.py", "def register(pi):\n    pass\n")
    (agent / "extensions" / "_private.py").write_text("raise SystemExit('never imported')\n")
    (agent / "extensions" / "notes.txt").write_text("ignored")
    ext_file(cwd / ".pisces" / "extensions", "project_ext.py")
    listed = ext_file(tmp_path / "listed", "listed_ext.py")
    trust(cwd, agent)
    sources, notes = discover(str(cwd), str(agent), global_settings={"extensions": [str(listed)]},
                              project_settings={}, cli_paths=[str(cli)])
    assert paths(sources) == ["cli_ext.py", "listed_ext.py", "project_ext.py", "a_user.py", "b_user.py",
                              "pkg_user"]
    assert sources[0].source_info == {"path": str(cli), "source": "cli", "scope": "temporary",
                                      "origin": "top-level"}
    assert sources[2].source_info["scope"] == "project" and sources[3].source_info["scope"] == "user"
    assert notes == []


def test_an_untrusted_project_loads_nothing_of_its_own(dirs, tmp_path):
    agent, cwd = dirs
    ext_file(cwd / ".pisces" / "extensions", "project_ext.py")
    ext_file(cwd / ".pisces" / "hooks", "project_hook.py")
    ext_file(agent / "extensions", "user_ext.py")
    sources, notes = discover(str(cwd), str(agent), global_settings={},
                              project_settings={"extensions": ["x.py"]}, cli_paths=[])
    assert paths(sources) == ["user_ext.py"]
    assert notes and all("not trusted" in n for n in notes)
    trust(cwd, agent)
    sources, _ = discover(str(cwd), str(agent), global_settings={}, project_settings={}, cli_paths=[])
    assert paths(sources) == ["project_ext.py", "user_ext.py", "project_hook.py"]
    assert [s.kind for s in sources] == ["extension", "extension", "hook"]


def test_no_extensions_keeps_cli_and_inline_only(dirs, tmp_path):
    agent, cwd = dirs
    cli = ext_file(tmp_path / "cli", "cli_ext.py")
    ext_file(agent / "extensions", "user_ext.py")

    def inline(pi):
        pass

    sources, _ = discover(str(cwd), str(agent), global_settings={"extensions": ["/x.py"]}, project_settings={},
                          cli_paths=[str(cli)], no_extensions=True, inline=[inline])
    assert [s.path for s in sources] == [str(cli), "<inline:inline>"]


def test_the_same_file_twice_loads_once(dirs):
    agent, cwd = dirs
    f = ext_file(agent / "extensions", "dup.py")
    sources, _ = discover(str(cwd), str(agent), global_settings={"extensions": [str(f)]}, project_settings={},
                          cli_paths=[str(f)])
    assert [s.source_info["source"] for s in sources] == ["cli"]


async def test_failures_are_reported_and_the_rest_loads(dirs, tmp_path, capsys):
    agent, cwd = dirs
    bad_syntax = ext_file(tmp_path / "e", "a_syntax.py", "def register(pi)\n")
    no_entry = ext_file(tmp_path / "e", "b_noentry.py", "X = 1\n")
    raising = ext_file(tmp_path / "e", "c_raises.py", "def register(pi):\n    raise RuntimeError('nope')\n")
    good = ext_file(tmp_path / "e", "d_good.py")
    missing = tmp_path / "e" / "missing.py"
    sources, _ = discover(str(cwd), str(agent), global_settings={}, project_settings={},
                          cli_paths=[str(p) for p in (bad_syntax, no_entry, raising, missing, good)])
    exts, failures = await load_all(sources, Runtime(str(cwd)))
    assert [e.path for e in exts] == [str(good)]
    errors = {os.path.basename(s.path): err for s, err in failures}
    assert errors["a_syntax.py"].startswith("SyntaxError")
    assert errors["b_noentry.py"] == f"ImportError: Extension does not export a register(pi) function: {no_entry}"
    assert errors["c_raises.py"] == "RuntimeError: nope"
    assert "no such file" in errors["missing.py"]


async def test_async_register_and_action_methods_during_loading(dirs, tmp_path):
    agent, cwd = dirs
    body = ("import asyncio\nSEEN = []\n"
            "async def register(pi):\n"
            "    await asyncio.sleep(0)\n"
            "    pi.register_command('late', handler=lambda a: None)\n"
            "    try:\n"
            "        pi.set_session_name('x')\n"
            "    except RuntimeError as exc:\n"
            "        SEEN.append(str(exc))\n"
            "    pi.register_provider('p', {'baseUrl': 'http://127.0.0.1:9/v1', 'apiKey': 'k', 'api': "
            "'openai-completions', 'models': [{'id': 'm1'}]})\n")
    f = ext_file(tmp_path / "e", "async_ext.py", body)
    sources, _ = discover(str(cwd), str(agent), global_settings={}, project_settings={}, cli_paths=[str(f)])
    runtime = Runtime(str(cwd))
    exts, failures = await load_all(sources, runtime)
    assert failures == [] and list(exts[0].commands) == ["late"]
    module = [m for n, m in sys.modules.items() if n.startswith("pisces_ext_") and hasattr(m, "SEEN")][-1]
    assert module.SEEN == ["Extension runtime not initialized. Action methods cannot be called during extension "
                           "loading."]
    assert [p[0] for p in runtime.pending_providers] == ["p"]


async def test_a_provider_registered_while_loading_is_selectable(tmp_path, faux):
    def ext(pi):
        pi.register_provider("extprov", {"baseUrl": "http://127.0.0.1:9/v1", "apiKey": "literal-key",
                                         "api": "openai-completions", "models": [{"id": "ext-model"}]})

    session, _ = await make(tmp_path, ext)
    found = session.registry.find("extprov", "ext-model")
    assert found is not None and session.registry.has_auth(found)
    model = session.set_model_by_id("extprov", "ext-model")
    assert model.id == "ext-model"


def test_entry_points_are_found_and_cached(tmp_path, monkeypatch):
    site = tmp_path / "site"
    dist = site / "demo_ext-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "entry_points.txt").write_text("[console_scripts]\nx = y:z\n\n"
                                           "[pisces.extensions]\ndemo = demo_ext:register\n")
    (site / "demo_ext.py").write_text("def register(pi):\n    pi.register_command('from-entry-point', "
                                      "handler=lambda a: None)\n")
    monkeypatch.syspath_prepend(str(site))
    agent = tmp_path / "agent"
    assert entry_points("pisces.extensions", str(agent)) == [["demo", "demo_ext:register", "demo_ext"]]
    cache = json.loads((agent / "cache" / "entry-points.json").read_text())
    assert cache["groups"] == {"pisces.extensions": [["demo", "demo_ext:register", "demo_ext"]]}
    (dist / "entry_points.txt").write_text("")  # the cache answers while sys.path's directories are unchanged
    assert entry_points("pisces.extensions", str(agent)) == [["demo", "demo_ext:register", "demo_ext"]]
    sources, _ = discover(str(tmp_path), str(agent), global_settings={}, project_settings={}, cli_paths=[])
    ep = [s for s in sources if s.path == "entry-point:demo"]
    assert ep and ep[0].source_info["origin"] == "package"


async def test_an_entry_point_extension_loads(tmp_path, monkeypatch):
    site = tmp_path / "site"
    dist = site / "demo_ext2-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "entry_points.txt").write_text("[pisces.extensions]\ndemo2 = demo_ext2:setup\n")
    (site / "demo_ext2.py").write_text("def setup(pi):\n    pi.register_command('ep-cmd', handler=lambda a: None)\n")
    monkeypatch.syspath_prepend(str(site))
    agent = tmp_path / "agent"
    sources, _ = discover(str(tmp_path), str(agent), global_settings={}, project_settings={}, cli_paths=[])
    exts, failures = await load_all([s for s in sources if s.path == "entry-point:demo2"], Runtime(str(tmp_path)))
    assert failures == [] and list(exts[0].commands) == ["ep-cmd"]
