import os

import pytest
from msgspec import UNSET
from tools_testutil import text_of

from pisces.agent.types import ToolError
from pisces.core.tools.find import FindTool
from pisces.core.tools.grep import GrepTool, find_rg
from pisces.core.tools.ls import LsTool, collation_key

RG = find_rg()
needs_rg = pytest.mark.skipif(RG is None, reason="ripgrep not installed")


def make_tree(root, git=True):
    files = {
        "README.md": "hello world\nTODO: write docs\n",
        "src/app.py": "import os\n\ndef main():\n    # TODO: implement\n    return 'hello'\n",
        "src/util/helpers.py": "def helper():\n    return 'Hello'\n",
        "src/util/helpers_test.py": "from helpers import helper\n",
        "build/out.py": "hello from build\n",
        "logs/app.log": "hello log\n",
        ".env": "SECRET=hello\n",
        ".hidden/cfg.toml": "hello = true\n",
        "docs/a.b/c.md": "hello nested\n",
        "data.bin": "hello\x00binary\n",
        "CRLF.txt": "hello\r\nworld\r\n",
        "long.txt": "hello " + "x" * 700 + "\n",
        "node_modules/pkg/index.js": "hello()\n",
    }
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
    (root / ".gitignore").write_text("build/\n*.log\nnode_modules\n!keep.log\n")
    (root / "logs/keep.log").write_text("hello kept\n")
    (root / "src/.gitignore").write_text("*_test.py\n")
    if git:
        (root / ".git").mkdir()
        (root / ".git/HEAD").write_text("ref: refs/heads/main\n")


GREP_CASES = [
    {"pattern": "hello"},
    {"pattern": "HELLO", "ignoreCase": True},
    {"pattern": "TODO", "context": 1},
    {"pattern": "hel+o", "glob": "*.py"},
    {"pattern": "hello", "glob": "*.log"},
    {"pattern": "hello", "glob": "!src/**"},
    {"pattern": "'hello'", "literal": True},
    {"pattern": "hello", "path": "src"},
    {"pattern": "hello", "path": "src/app.py"},
    {"pattern": "hello", "limit": 3},
    {"pattern": "^world", "path": "CRLF.txt"},
    {"pattern": "nothing-matches-this"},
]


@needs_rg
@pytest.mark.parametrize("params", GREP_CASES)
async def test_grep_python_fallback_matches_rg(tmp_path, run, params):
    make_tree(tmp_path)
    with_rg = await run(GrepTool(str(tmp_path), rg_path=RG))(dict(params))
    python = await run(GrepTool(str(tmp_path), rg_path=None))(dict(params))
    assert text_of(python) == text_of(with_rg)
    assert python.details == with_rg.details


async def test_grep_output_format(tmp_path, run):
    make_tree(tmp_path)
    tool = run(GrepTool(str(tmp_path), rg_path=None))
    r = await tool({"pattern": "hello"})
    lines = text_of(r).split("\n")
    assert "README.md:1: hello world" in lines
    assert ".env:1: SECRET=hello" in lines and ".hidden/cfg.toml:1: hello = true" in lines
    assert not any(line.startswith(("build/", "logs/app.log", "node_modules/", "src/util/helpers_test.py", "data.bin"))
                   for line in lines)  # .gitignore'd (nested too) and binary files are skipped
    assert "logs/keep.log:1: hello kept" in lines  # re-included by "!keep.log"
    assert "CRLF.txt:1: hello" in lines
    assert f"long.txt:1: hello {'x' * 494}... [truncated]" in lines
    assert text_of(r).endswith("\n\n[Some lines truncated to 500 chars. Use read tool to see full lines]")
    assert r.details == {"linesTruncated": True}
    r = await tool({"pattern": "TODO", "context": 1, "path": "src"})
    assert text_of(r) == "app.py-3- def main():\napp.py:4:     # TODO: implement\napp.py-5-     return 'hello'"
    r = await tool({"pattern": "hello", "limit": 2})
    assert text_of(r).endswith("\n\n[2 matches limit reached. Use limit=4 for more, or refine pattern]")
    assert r.details == {"matchLimitReached": 2}
    r = await tool({"pattern": "zzz"})
    assert text_of(r) == "No matches found" and r.details is UNSET
    with pytest.raises(ToolError, match=r"^Path not found: .*/nope$"):
        await tool({"pattern": "x", "path": "nope"})


@pytest.mark.parametrize("rg", [RG, None] if RG else [None])
async def test_gitignore_needs_a_repository_for_grep_but_not_for_find(tmp_path, run, rg):
    make_tree(tmp_path, git=False)
    grep = await run(GrepTool(str(tmp_path), rg_path=rg))({"pattern": "hello from build"})
    assert text_of(grep) == "build/out.py:1: hello from build"
    found = await run(FindTool(str(tmp_path), rg_path=rg))({"pattern": "*.py"})
    assert "build/out.py" not in text_of(found)


FIND_CASES = [
    {"pattern": "*.py"},
    {"pattern": "*"},
    {"pattern": "src/**/*.py"},
    {"pattern": "util"},
    {"pattern": "*.{md,toml}"},
    {"pattern": "*.PY"},
    {"pattern": "*.py", "path": "src"},
    {"pattern": "*", "limit": 4},
    {"pattern": "*.nothing"},
]


@needs_rg
@pytest.mark.parametrize("params", FIND_CASES)
async def test_find_python_fallback_matches_rg(tmp_path, run, params):
    make_tree(tmp_path)
    with_rg = await run(FindTool(str(tmp_path), rg_path=RG))(dict(params))
    python = await run(FindTool(str(tmp_path), rg_path=None))(dict(params))
    assert text_of(python) == text_of(with_rg)
    assert python.details == with_rg.details


async def test_find_output(tmp_path, run):
    make_tree(tmp_path)
    tool = run(FindTool(str(tmp_path), rg_path=None))
    r = await tool({"pattern": "*.py"})
    assert text_of(r) == "src/app.py\nsrc/util/helpers.py"
    assert text_of(await tool({"pattern": "util"})) == "src/util/"
    assert text_of(await tool({"pattern": "src/**/*.py"})) == "src/app.py\nsrc/util/helpers.py"
    assert text_of(await tool({"pattern": "*.{md,toml}"})) == ".hidden/cfg.toml\nREADME.md\ndocs/a.b/c.md"
    assert text_of(await tool({"pattern": "*.PY"})) == "No files found matching pattern"  # smart case
    r = await tool({"pattern": "*", "limit": 2})
    assert text_of(r) == ".env\n.git/\n\n[2 results limit reached. Use limit=4 for more, or refine pattern]"
    assert r.details == {"resultLimitReached": 2}
    with pytest.raises(ToolError, match=r"^Path not found: "):
        await tool({"pattern": "*", "path": "missing"})


async def test_ls(tmp_path, run):
    for name in ["b.txt", "A.txt", ".dot", "_under", "file10", "file2", "Zeta"]:
        (tmp_path / name).write_text("x")
    (tmp_path / "dir").mkdir()
    (tmp_path / "empty").mkdir()
    os.symlink("dir", tmp_path / "link")
    tool = run(LsTool(str(tmp_path)))
    r = await tool({})
    assert text_of(r).split("\n") == ["_under", ".dot", "A.txt", "b.txt", "dir/", "empty/", "file10", "file2",
                                      "link/", "Zeta"]
    r = await tool({"limit": 3})
    assert text_of(r) == "_under\n.dot\nA.txt\n\n[3 entries limit reached. Use limit=6 for more]"
    assert r.details == {"entryLimitReached": 3}
    assert text_of(await tool({"path": "empty"})) == "(empty directory)"
    with pytest.raises(ToolError, match=r"^Path not found: .*/missing$"):
        await tool({"path": "missing"})
    with pytest.raises(ToolError, match=r"^Not a directory: .*/b.txt$"):
        await tool({"path": "b.txt"})


def test_collation_matches_icu_on_common_names():
    # the order node's localeCompare (ICU 78) gives for these, lower-cased
    expected = [" a", "_a", "-a", ",a", ";a", ":a", "!a", "?a", ".a", "'a", '"a', "(a", ")a", "[a", "]a", "{a", "}a",
                "@a", "*a", "/a", "\\a", "&a", "#a", "%a", "`a", "^a", "+a", "<a", "=a", ">a", "|a", "~a", "$a",
                "0a", "9a", "a b", "a_b", "a-b", "a.b", "a1", "a10", "a2", "aa", "ab", "B", "ea", "éa", "fa",
                "file_1.txt", "file-1.txt", "file.txt", "file1.txt", "File2.txt", "ss", "ß", "st", "za"]
    assert sorted(reversed(expected), key=collation_key) == expected


# -- the string fast path of simple globs gives RE2's answers --------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pisces.core.tools._walk import Glob  # noqa: E402

_SIMPLE_GLOBS = ["*.py", "*.PY", "a*", "A*", "abc", "k*", "*k", "*.p", "*/a", "a/*", "ss*", "*.test.ts"]
# slashes, case, the Kelvin sign and long s (RE2 folds them to k and s), sharp s, an undecodable name
_NAME_PIECES = ["a", "A", "b", ".", "/", "py", "PY", "K", "k", "\u212a", "\u017f", "s", "\u00df", "\udcff", "x",
                ".test.ts"]


@pytest.mark.parametrize("pattern", _SIMPLE_GLOBS)
@pytest.mark.parametrize("ignore_case", [False, True])
@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.sampled_from(_NAME_PIECES), max_size=8))
def test_simple_globs_match_as_re2_does(pattern, ignore_case, pieces):
    glob = Glob(pattern, ignore_case=ignore_case)
    assert glob._simple is not None  # these take the string path
    name = "".join(pieces)
    assert glob.match(name) == (glob._full(name.encode("utf-8", "replace")) is not None)


@pytest.mark.parametrize("pattern", ["*a*b", "**/*.py", "[ab].py", "?.py", "{a,b}.py", "a\\*", "*.py*", "é*"])
def test_other_globs_stay_on_re2(pattern):
    assert Glob(pattern)._simple is None


def test_find_matches_simple_globs_against_names_and_their_directories(tmp_path):
    from pisces.core.tools.find import match_paths

    files = ["a.py", "b.PY", "sub/c.py", "sub/d.txt", "sub/deeper/e.py", "x.py.bak"]
    assert match_paths(files, str(tmp_path), "*.py") == ["a.py", "b.PY", "sub/c.py", "sub/deeper/e.py"]
    assert match_paths(files, str(tmp_path), "*.PY") == ["b.PY"]
    assert match_paths(files, str(tmp_path), "sub") == ["sub/"]
