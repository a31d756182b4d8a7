"""Importing a vendor SDK: ``import_sdk`` (used by the providers and the idle warm-up thread)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time

import pytest

from pisces.ai.providers import import_sdk

SLOW_MODULE = '''
import time
started = True
time.sleep(0.3)
ready = "complete"
'''


@pytest.fixture
def slow_module(tmp_path, monkeypatch):
    """A module that takes 0.3 s to import and sets ``ready`` last, as an SDK's package sets its names."""
    name = f"pisces_slow_sdk_{time.monotonic_ns()}"
    (tmp_path / f"{name}.py").write_text(SLOW_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_a_second_importer_waits_for_the_first_to_finish(slow_module):
    # The warm-up thread starts importing; the first request asks for the same SDK meanwhile.
    warm = threading.Thread(target=import_sdk, args=(slow_module,))
    warm.start()
    deadline = time.monotonic() + 5
    while slow_module not in sys.modules and time.monotonic() < deadline:
        time.sleep(0.005)
    assert slow_module in sys.modules, "the warm-up thread never started the import"
    module = import_sdk(slow_module)
    seen = getattr(module, "ready", None)  # what the request would use, before the warm-up is done
    warm.join(5)
    assert seen == "complete"


def test_the_collector_is_paused_during_the_import_and_restored_after(tmp_path, monkeypatch):
    name = f"pisces_gc_probe_{time.monotonic_ns()}"
    (tmp_path / f"{name}.py").write_text("import gc\nenabled_during_import = gc.isenabled()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert gc.isenabled()
    try:
        module = import_sdk(name)
    finally:
        sys.modules.pop(name, None)
    assert module.enabled_during_import is False
    assert gc.isenabled()


def test_a_missing_sdk_raises_module_not_found_with_its_name():
    with pytest.raises(ModuleNotFoundError) as info:
        import_sdk("pisces_no_such_sdk")
    assert info.value.name == "pisces_no_such_sdk"
    assert gc.isenabled()


PREPARE_THEN_BUILD = '''
import sys
from pisces.ai.providers import get_provider, import_sdk, prepare
prepare({api!r})
before = set(sys.modules)
{build}
print(sorted(set(sys.modules) - before))
'''


@pytest.mark.parametrize("api, build", [
    ("openai-completions", 'import_sdk("openai").AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:1/v1")'),
    ("openai-responses", 'import_sdk("openai").AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:1/v1")'),
    ("anthropic-messages", 'import_sdk("anthropic").AsyncAnthropic(api_key="k", base_url="http://127.0.0.1:1")'),
    ("google-generative-ai", 'import_sdk("google.genai").Client(api_key="k")'),
])
def test_after_prepare_the_first_client_imports_nothing_more(api, build):
    # What the idle warm-up thread does when requests go through the SDK (the direct APIs' warm-up imports
    # no SDK: tests/ai/test_direct_transport.py); a fresh interpreter, so nothing was imported before.
    code = PREPARE_THEN_BUILD.format(api=api, build=build)
    env = {**os.environ, "PISCES_PROVIDER_TRANSPORT": "sdk"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
