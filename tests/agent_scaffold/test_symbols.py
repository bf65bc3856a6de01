"""Python names as edit targets: the pure resolution (`agent_scaffold.symbols`) and the editor on the
LocalSandbox test double (the Docker path is in test_agent_docker.py)."""

import pytest

from agent_scaffold.editor import EditError, Editor
from agent_scaffold.symbols import (
    Definition,
    grep_command,
    is_symbol,
    module_of,
    parse_hits,
    pick_definitions,
)
from tests.agent_scaffold.local_sandbox import LocalSandbox

PARSE = [Definition("parse/__init__.py", 518, False), Definition("parse/__init__.py", 988, True)]


def test_a_qualifier_picks_the_module_and_whether_it_is_a_method():
    assert pick_definitions("parse.search", PARSE) == [PARSE[1]]  # the module's function, not the method
    assert pick_definitions("parse.Parser.search", PARSE) == [PARSE[0]]  # a class after the module: the method
    assert pick_definitions("search", PARSE) == [PARSE[1]]  # a bare name: what a test imports
    assert pick_definitions("result.search", PARSE) == PARSE  # an instance: both fit, the editor lists them
    lists = [Definition("src/humanize/lists.py", 12, True), Definition("src/humanize/other.py", 3, True)]
    assert pick_definitions("humanize.natural_list", lists) == lists  # a package above both
    assert pick_definitions("humanize.lists.natural_list", lists) == [lists[0]]
    assert pick_definitions("parse.search", []) == []


def test_module_names_and_test_files():
    assert module_of("src/humanize/lists.py") == "humanize.lists" and module_of("parse/__init__.py") == "parse"
    assert module_of("inflection.py") == "inflection"
    out = ("pkg/a.py:3:def f(x):\npkg/a.py:9:    def f(self):\ntests/test_a.py:1:def f():\n"
           "pkg/test_b.py:2:def f():\nconftest.py:1:def f():\nnot a hit\n")
    assert parse_hits(out) == [Definition("pkg/a.py", 3, True, "f"), Definition("pkg/a.py", 9, False, "f")]


def test_only_dotted_identifiers_reach_the_command():
    assert is_symbol("inflection.singularize") and is_symbol("merge")
    for bad in ("a;rm -rf /", "$(id)", "a..b", "a.b/c", ".a", "a" * 101, "x" + ".y" * 9, "a b"):
        assert not is_symbol(bad), bad
    with pytest.raises(ValueError, match="not an identifier"):
        grep_command("a.b")
    assert "def|class)[[:space:]]+merge[[:space:]]*[(:]" in grep_command("merge")


@pytest.fixture
def repo(tmp_path):
    return LocalSandbox(tmp_path, {
        "parse/__init__.py": "class Parser:\n    def search(self, s):\n        return s\n\n\n"
                             "def search(fmt, s):\n    return Parser().search(s) is None\n",
        "tests/test_parse.py": "def search():\n    pass\n",
        "pkg/a.py": "def dup():\n    return 1\n", "pkg/b.py": "def dup():\n    return 2\n",
    })


def test_view_and_str_replace_take_a_name_as_the_tests_call_it(repo):
    ed = Editor(repo)
    page = ed.view("parse.search")
    assert page.startswith("parse.search is defined at parse/__init__.py:6:\n     6\tdef search(fmt, s):")
    assert "return Parser().search(s) is None" in page and "class Parser" not in page
    with pytest.raises(EditError, match="not found in parse/__init__.py at or after line 6"):
        ed.str_replace("parse.search", "return s\n", "return s or None\n")  # the method above is not searched
    out = ed.str_replace("parse.search", "    return Parser().search(s) is None\n", "    return Parser().search(s)\n")
    assert out.startswith("Edited parse/__init__.py.")  # the path is named for the next action
    assert repo.read_file("parse/__init__.py").decode().endswith("\n    return Parser().search(s)\n")
    assert "def search(self, s)" in ed.view("parse.Parser.search")


def test_a_name_that_fits_several_or_none_is_refused_with_what_to_do(repo):
    ed = Editor(repo)
    with pytest.raises(EditError, match=r"pkg.dup is no file, and 2 definitions fit that name \(pkg/a.py:1, "
                                        r"pkg/b.py:1\); use one of them as the target, e.g. `view PATH:LINE`"):
        ed.view("pkg.dup")
    with pytest.raises(EditError, match=r"parse.nothing does not exist \(paths are relative to .*\), and no "
                                        r"function or class `nothing` is defined outside the tests; use a name "
                                        r"the new test calls, or a path from a grep hit"):
        ed.str_replace("parse.nothing", "a", "b")
    with pytest.raises(EditError, match=r"infer.py does not exist \(paths are relative to .*\); its Python "
                                        r"files outside the tests include "):  # a file name, not a name `py`
        ed.view("infer.py")
    with pytest.raises(EditError, match=r"a;id does not exist"):  # no name: never reaches a command
        ed.view("a;id")
    assert not any("id" in c and "git grep" in c for c in repo.commands)
    with pytest.raises(EditError, match="out of range"):  # a name with lines is taken as a path's lines
        ed.view("parse/__init__.py", 50)


def test_a_name_in_another_letter_case_is_taken_when_exactly_one_definition_fits(repo):
    """`view parse.parser` for the spec's `parse.Parser(...)`: the one definition in another case, named in
    the view's head; the demonstrations' check (`definition` without `any_case`) still wants the exact name."""
    ed = Editor(repo)
    page = ed.view("parse.parser")
    assert page.startswith("parse.parser is not defined; `Parser` (another letter case) is defined at "
                           "parse/__init__.py:1:\n     1\tclass Parser:")
    assert ed.definition("parse.parser") is None and ed.definition("parse.parser", any_case=True) == ("parse/__init__.py", 1)
    out = ed.str_replace("parse.parser", "        return s\n", "        return s.strip()\n")
    assert out.startswith("Edited parse/__init__.py.")
    assert "        return s.strip()\n" in repo.read_file("parse/__init__.py").decode()
    with pytest.raises(EditError, match=r"pkg.DUP does not exist .*no function or class `DUP`"):
        ed.view("pkg.DUP")  # two definitions in another case: refused as the name was written
    assert "git grep -n -i -E" in grep_command("merge", any_case=True)
    assert parse_hits("pkg/a.py:3:class Parser(object):\n") == [Definition("pkg/a.py", 3, True, "Parser")]
