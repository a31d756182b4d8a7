"""The built-in tools' schemas are read without loading the tools: a request describes every active tool,
and a first prompt sent right after start-up should not wait for the tools' modules to describe them."""

from __future__ import annotations

import json
import subprocess
import sys

from pisces.core.tools import ALL_TOOL_NAMES, create_tools

TOOL_MODULES = [f"pisces.core.tools.{name}" for name in ALL_TOOL_NAMES]


def test_describing_the_tools_loads_none_of_them(tmp_path):
    code = (
        "import json, sys\n"
        "from pisces.core.tools import DEFAULT_TOOL_NAMES, create_tools\n"
        f"tools = create_tools({str(tmp_path)!r})\n"
        "schemas = [t.parameters for t in tools.values()]\n"
        "texts = [tools[n].description for n in DEFAULT_TOOL_NAMES]  # the others' texts live in their modules\n"
        f"print(json.dumps([m for m in {TOOL_MODULES!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


def test_the_lazy_schema_is_the_tool_classes_own(tmp_path):
    for name, lazy in create_tools(str(tmp_path)).items():
        described = lazy.parameters
        loaded = lazy.load()
        assert described is type(loaded).parameters, name  # one schema object, not a copy that could drift
        assert described["type"] == "object" and described["properties"], name
