import msgspec
import pytest
from tools_testutil import text_of

from pisces.agent.types import ToolError
from pisces.ai.abort import AbortSignal
from pisces.core.tools.edit import EDIT_SCHEMA, EditTool, prepare_edit_arguments
from pisces.core.tools.edit_diff import generate_diff_string
from pisces.core.tools.write import WriteTool


# Expected outputs produced by pi 0.73.1's generateDiffString (diff 8.0.4) on the same inputs.
@pytest.mark.parametrize("old,new,diff,first", [
    ("a\nb\nc\n", "a\nB\nc\n", " 1 a\n-2 b\n+2 B\n 3 c", 2),
    ("".join(f"l{i}\n" for i in range(1, 13)), "".join(f"{'X' if i == 6 else 'l'}{i}\n" for i in range(1, 13)),
     "    ...\n  2 l2\n  3 l3\n  4 l4\n  5 l5\n- 6 l6\n+ 6 X6\n  7 l7\n  8 l8\n  9 l9\n 10 l10\n    ...", 6),
    ("".join(f"{i}\n" for i in range(1, 21)),
     "".join(f"{ {2: 'TWO', 19: 'NINETEEN'}.get(i, i)}\n" for i in range(1, 21)),
     "  1 1\n- 2 2\n+ 2 TWO\n  3 3\n  4 4\n  5 5\n  6 6\n    ...\n 15 15\n 16 16\n 17 17\n 18 18\n-19 19\n+19 NINETEEN\n 20 20", 2),
    ("a\nb", "a\nb\nc", " 1 a\n-2 b\n+2 b\n+3 c", 2),
])
def test_generate_diff_string_matches_pi(old, new, diff, first):
    assert generate_diff_string(old, new) == (diff, first)


def test_generate_diff_string_huge_rewrite_falls_back_but_shows_every_change():
    old = "".join(f"old{i}\n" for i in range(4000))
    new = "".join(f"new{i}\n" for i in range(4000))
    diff, first = generate_diff_string(old, new)
    assert first == 1
    assert diff.count("\n-") + diff.startswith("-") == 4000 and diff.count("\n+") == 4000


async def test_write_creates_parent_dirs(tmp_path, run):
    r = await run(WriteTool(str(tmp_path)))({"path": "a/b/c.txt", "content": "hello 😀\n"})
    assert text_of(r) == "Successfully wrote 9 bytes to a/b/c.txt"  # JS length: the emoji is 2 units
    assert (tmp_path / "a/b/c.txt").read_text() == "hello 😀\n"
    assert "details" not in msgspec.json.encode(r).decode()


async def test_write_into_a_directory_fails(tmp_path, run):
    (tmp_path / "d").mkdir()
    with pytest.raises(ToolError, match=r"^EISDIR: illegal operation on a directory, open '.*/d'$"):
        await run(WriteTool(str(tmp_path)))({"path": "d", "content": "x"})


async def test_edit_legacy_form(tmp_path, run):
    f = tmp_path / "f.py"
    f.write_text("def a():\n    return 1\n")
    r = await run(EditTool(str(tmp_path)))({"path": "f.py", "oldText": "return 1", "newText": "return 2"})
    assert text_of(r) == "Successfully replaced 1 block(s) in f.py."
    assert f.read_text() == "def a():\n    return 2\n"
    assert r.details == {"diff": " 1 def a():\n-2     return 1\n+2     return 2", "firstChangedLine": 2}


async def test_edit_edits_form_matches_against_original(tmp_path, run):
    f = tmp_path / "f.txt"
    f.write_text("alpha\nbeta\ngamma\n")
    # the second edit's oldText only exists in the original, not after the first edit
    r = await run(EditTool(str(tmp_path)))({"path": "f.txt", "edits": [
        {"oldText": "alpha\nbeta", "newText": "ALPHA"}, {"oldText": "gamma", "newText": "GAMMA"}]})
    assert text_of(r) == "Successfully replaced 2 block(s) in f.txt."
    assert f.read_text() == "ALPHA\nGAMMA\n"


async def test_edit_text_found_twice(tmp_path, run):
    f = tmp_path / "f.txt"
    f.write_text("x = 1\nx = 1\n")
    with pytest.raises(ToolError) as err:
        await run(EditTool(str(tmp_path)))({"path": "f.txt", "edits": [{"oldText": "x = 1", "newText": "x = 2"}]})
    assert str(err.value) == ("Found 2 occurrences of the text in f.txt. The text must be unique. Please provide "
                              "more context to make it unique.")
    assert f.read_text() == "x = 1\nx = 1\n"
    with pytest.raises(ToolError) as err:
        await run(EditTool(str(tmp_path)))({"path": "f.txt", "edits": [
            {"oldText": "nothing", "newText": "y"}, {"oldText": "x = 1", "newText": "x = 2"}]})
    assert str(err.value).startswith("Could not find edits[0] in f.txt.")


async def test_edit_not_found_overlap_empty_and_missing_file(tmp_path, run):
    f = tmp_path / "f.txt"
    f.write_text("one two three\n")
    tool = run(EditTool(str(tmp_path)))
    with pytest.raises(ToolError) as err:
        await tool({"path": "f.txt", "edits": [{"oldText": "four", "newText": "4"}]})
    assert str(err.value) == ("Could not find the exact text in f.txt. The old text must match exactly including all "
                              "whitespace and newlines.")
    with pytest.raises(ToolError) as err:
        await tool({"path": "f.txt", "edits": [{"oldText": "one two", "newText": "1"},
                                                {"oldText": "two three", "newText": "3"}]})
    assert str(err.value) == "edits[0] and edits[1] overlap in f.txt. Merge them into one edit or target disjoint regions."
    with pytest.raises(ToolError, match=r"^oldText must not be empty in f.txt.$"):
        await tool({"path": "f.txt", "edits": [{"oldText": "", "newText": "x"}]})
    with pytest.raises(ToolError, match=r"^Could not edit file: nope.txt. Error code: ENOENT.$"):
        await tool({"path": "nope.txt", "edits": [{"oldText": "a", "newText": "b"}]})
    with pytest.raises(ToolError, match="edits must contain at least one replacement"):
        await tool({"path": "f.txt", "edits": []})


async def test_edit_preserves_crlf_and_bom(tmp_path, run):
    f = tmp_path / "win.txt"
    f.write_bytes("\ufeffline one\r\nline two\r\n".encode())
    r = await run(EditTool(str(tmp_path)))({"path": "win.txt", "edits": [{"oldText": "line two\n", "newText": "line 2\n"}]})
    assert f.read_bytes() == "\ufeffline one\r\nline 2\r\n".encode()
    assert r.details["diff"] == " 1 line one\n-2 line two\n+2 line 2"


async def test_edit_fuzzy_match_of_smart_quotes_and_trailing_spaces(tmp_path, run):
    f = tmp_path / "q.txt"
    f.write_text("say \u201chello\u201d   \nend\n")
    await run(EditTool(str(tmp_path)))({"path": "q.txt", "edits": [{"oldText": 'say "hello"', "newText": "say hi"}]})
    assert f.read_text() == "say hi\nend\n"


def test_prepare_arguments():
    assert prepare_edit_arguments({"path": "p", "oldText": "a", "newText": "b"}) == {
        "path": "p", "edits": [{"oldText": "a", "newText": "b"}]}
    assert prepare_edit_arguments({"path": "p", "edits": '[{"oldText": "a", "newText": "b"}]'}) == {
        "path": "p", "edits": [{"oldText": "a", "newText": "b"}]}
    assert EDIT_SCHEMA["required"] == ["path", "edits"]


async def test_parallel_edits_to_one_file_are_serialised(tmp_path):
    import asyncio
    f = tmp_path / "f.txt"
    f.write_text("".join(f"v{i} = 0\n" for i in range(20)))
    tool = EditTool(str(tmp_path))
    await asyncio.gather(*(tool.execute(f"c{i}", {"path": "f.txt", "edits": [
        {"oldText": f"v{i} = 0", "newText": f"v{i} = 1"}]}, AbortSignal(), lambda u: None) for i in range(20)))
    assert f.read_text() == "".join(f"v{i} = 1\n" for i in range(20))


async def test_aborted_before_start(tmp_path, run):
    s = AbortSignal()
    s.abort()
    with pytest.raises(ToolError, match="^Operation aborted$"):
        await run(WriteTool(str(tmp_path)))({"path": "x", "content": "y"}, s)
    assert not (tmp_path / "x").exists()
