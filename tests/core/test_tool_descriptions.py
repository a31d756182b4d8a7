"""The default tools' descriptions are read without loading the tools, and are the tools' own texts."""

from __future__ import annotations

from pisces.core.tools import ALL_TOOL_NAMES, create_tools, descriptions, truncate


def test_limits_written_in_descriptions_are_truncates():
    assert descriptions.MAX_LINES == truncate.DEFAULT_MAX_LINES
    assert descriptions.MAX_BYTES == truncate.DEFAULT_MAX_BYTES


def test_lazy_description_is_the_loaded_tools_and_loads_nothing_for_the_defaults(tmp_path):
    tools = create_tools(str(tmp_path))
    assert set(tools) == set(ALL_TOOL_NAMES)
    lazy_texts = {name: tool.description for name, tool in tools.items()}
    for name in ("read", "bash", "edit", "write"):
        assert tools[name]._tool is None, f"{name} was loaded to read its description"
    for name, tool in tools.items():
        loaded = tool.load()
        assert lazy_texts[name] == loaded.description != ""
        assert type(loaded).description == loaded.description  # a class constant: the same for every instance
    assert "2000 lines or 50KB" in lazy_texts["read"]
