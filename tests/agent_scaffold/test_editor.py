"""Editor edge cases, on the LocalSandbox test double (the Docker path is covered in test_agent_docker.py)."""

import pytest

from agent_scaffold.editor import EditError, Editor, replace_once


def test_replace_once_refuses_an_edit_that_changes_nothing():
    with pytest.raises(EditError, match="REPLACE text is the same as the SEARCH text"):
        replace_once("x = 1\ny = 2\n", "y = 2", "y = 2", "f")
    # a text that is not in the file is still reported as not found
    with pytest.raises(EditError, match="not found"):
        replace_once("x = 1\n", "z = 3", "z = 3", "f")


def test_replace_once_counts_matches():
    assert replace_once("a b c", "b", "X", "f").content == "a X c"
    with pytest.raises(EditError, match="not found"):
        replace_once("a b c", "z", "X", "f")
    with pytest.raises(EditError, match=r"matches 2 times in f \(lines 1, 3\)"):
        replace_once("x = 1\ny\nx = 1\n", "x = 1", "x = 2", "f")
    with pytest.raises(EditError, match="most like its first line, copied exactly .*:\n    return 1$"):
        replace_once("    return 1\n", "return 1\n\n\n", "", "f")
    with pytest.raises(EditError, match="empty"):
        replace_once("abc", "", "x", "f")


def test_replace_once_accepts_a_uniform_indentation_change_and_reindents_the_replacement():
    src = "class A:\n    def f(self):\n        if x:\n            return 1\n        return 2\n"
    # one level too deep (the held-out failure: 8 spaces for the file's 4), relative indentation kept
    done = replace_once(src, "            if x:\n                return 1\n", "            if not x:\n"
                        "                return 1\n", "f")
    assert done.reindented and done.line == 3
    assert done.content == src.replace("if x:", "if not x:")
    # too shallow, trailing spaces, a replacement with more lines and a deeper block
    done = replace_once(src, "return 2  ", "y = 2\nif y:\n    return y", "f")
    assert done.content.endswith("        y = 2\n        if y:\n            return y\n") and done.line == 5
    # an exact match is used as is, without moving anything
    exact = replace_once(src, "return 1", "return 3", "f")
    assert not exact.reindented and exact.content == src.replace("return 1", "return 3")
    # deleting the matched lines
    assert replace_once(src, "          return 2\n", "", "f").content == src.replace("        return 2\n", "")


def test_replace_once_refuses_what_indentation_does_not_explain():
    src = "def f():\n    if x:\n        return 1\n    if y:\n        return 1\n"
    with pytest.raises(EditError, match="not found"):  # stripped lines that are not the file's
        replace_once(src, "if x:\nreturn 3\n", "if x:\nreturn 2\n", "f")
    with pytest.raises(EditError, match=r"matches 2 places in f up to indentation \(lines 3, 5\)"):
        replace_once(src, "            return 1\n", "            return 2\n", "f")
    with pytest.raises(EditError, match="REPLACE text is the same"):  # the same text once re-indented
        replace_once(src, "        if x:\n", "        if x:\n", "f")
    with pytest.raises(EditError, match="not found"):  # blank lines alone match nothing
        replace_once(src, "  \n\n", "x\n", "f")


def test_replace_once_matches_lines_copied_at_one_indent_line_by_line():
    """FORMAT 18 policies wrote a nested `if` and its body at one indent; with as many REPLACE lines as
    SEARCH lines each REPLACE line takes the indentation of the file line it replaces."""
    src = "def f(items):\n    if len(items) != 1:\n        return items[0]\n    return ''\n"
    done = replace_once(src, "        if len(items) != 1:\n        return items[0]\n",
                        "        if len(items) == 1:\n        return items[0]\n", "f")
    assert done.reindented and done.line == 2
    assert done.content == src.replace("!= 1", "== 1")
    # a REPLACE line indented past its SEARCH line keeps that shift from the file's indentation
    done = replace_once(src, "if len(items) != 1:\nreturn items[0]\n", "if len(items) == 1:\n    return items[1]\n", "f")
    assert done.content == "def f(items):\n    if len(items) == 1:\n            return items[1]\n    return ''\n"
    # another number of REPLACE lines is refused with the lines to copy, as the file has them
    with pytest.raises(EditError, match=r"matches lines 2-3 of f only when each line's indentation and spacing are ignored\. "
                                        r"Copy those lines as the view shows them:\n    if len"):
        replace_once(src, "if len(items) != 1:\nreturn items[0]\n", "if len(items) == 1:\n", "f")
    twice = src + "def g(items):\n    if len(items) != 1:\n        return items[0]\n"
    with pytest.raises(EditError, match=r"matches 2 places in f only when each line's indentation and spacing are ignored "
                                        r"\(lines 2, 6\)"):
        replace_once(twice, "if len(items) != 1:\nreturn items[0]\n", "if len(items) == 1:\nreturn items[0]\n", "f")
    done = replace_once(twice, "if len(items) != 1:\nreturn items[0]\n", "if len(items) == 1:\nreturn items[0]\n",
                        "f", start=5)  # from START: the first
    assert done.line == 6 and done.content.endswith("def g(items):\n    if len(items) == 1:\n        return items[0]\n")


def test_replace_once_matches_lines_spaced_loosely_but_not_words_run_together_or_strings():
    """FORMAT 20 policies wrote the page's line from their thought with a space before `:`; a line with a
    quote keeps its spaces (they may be inside a string), and words never run together."""
    src = "def f(rule, word):\n    if re.search(rule, word):\n        return not word\n    s = 'a b'\n"
    done = replace_once(src, "    if re.search(rule, word) :\n", "    if re.search(word, rule) :\n", "f")
    assert done.content == src.replace("    if re.search(rule, word):", "    if re.search(word, rule) :")
    done = replace_once(src, "if re.search( rule,word ):\n  return  not word\n",
                        "if re.search(rule, word):\n  return word\n", "f")
    assert "        return word\n" in done.content
    with pytest.raises(EditError, match="not found"):
        replace_once(src, "        return notword\n", "        return word\n", "f")
    with pytest.raises(EditError, match="not found"):
        replace_once(src, "    s = 'a  b'\n", "    s = 'c'\n", "f")


def test_replace_once_from_a_line_takes_the_first_match_on_or_after_it():
    src = "def f():\n    return 1\n\n\ndef g():\n    return 1\n"
    done = replace_once(src, "    return 1\n", "    return 2\n", "f", start=5)  # two matches: no error
    assert done.content == "def f():\n    return 1\n\n\ndef g():\n    return 2\n" and done.line == 6
    assert replace_once(src, "return 1", "return 3", "f", start=1).line == 2
    done = replace_once(src, "        return 1\n", "        return 2\n", "f", start=3)  # up to indentation
    assert done.reindented and done.content.endswith("def g():\n    return 2\n") and done.line == 6
    with pytest.raises(EditError, match="not found in f at or after line 3"):
        replace_once(src, "def f():\n", "def h():\n", "f", start=3)
    with pytest.raises(EditError, match="line 7 is out of range; f has 6 lines"):
        replace_once(src, "return 1", "return 2", "f", start=7)


def test_replace_once_bounds_the_search_up_to_indentation_on_a_file_of_repeated_lines():
    """The policy writes the SEARCH and the host compares it: a file of 200,000 equal lines and a SEARCH of
    2,000 of them one level deeper match everywhere; the refusal names the first places, not all of them."""
    src = "    x = 1\n" * 200_000
    with pytest.raises(EditError, match=r"matches at least 10 places in f up to indentation \(lines 1, 2, "):
        replace_once(src, "        x = 1\n" * 2_000, "        x = 2\n", "f")
    with pytest.raises(EditError, match=r"matches 200000 times in f \(lines 1, 2, .*, 10, \.\.\.\)"):
        replace_once(src, "    x = 1\n", "    x = 2\n", "f")
    # equal stripped lines with another relative indentation match only line by line, here everywhere
    with pytest.raises(EditError, match=r"matches at least 10 places in f only when each line's indentation and "
                                        r"spacing are ignored \(lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10\)"):
        replace_once(src, "  x = 1\n    x = 1\n" * 1_000, "x = 2\n", "f")


def test_str_replace_view_insert_undo(local_sandbox):
    ed = Editor(local_sandbox)
    out = ed.str_replace("pkg/mod.py", "    return a - b\n", "    return a + b\n")
    assert "Edited pkg/mod.py" in out and "return a + b" in out
    assert "     2\t    return a + b" in ed.view("pkg/mod.py", 1, 2) and "re-indented" not in out
    out = ed.str_replace("pkg/mod.py", "        return a + b\n", "        return b + a\n")
    assert "re-indented to match" in out and "     2\t    return b + a" in out
    ed.undo("pkg/mod.py")
    ed.insert("pkg/mod.py", 0, '"""Doc."""\n')
    assert local_sandbox.read_file("pkg/mod.py").decode().startswith('"""Doc."""\ndef add')
    ed.undo("pkg/mod.py")
    ed.undo("pkg/mod.py")
    assert local_sandbox.read_file("pkg/mod.py").decode().startswith("def add(a, b):\n    return a - b")
    with pytest.raises(EditError, match="no edit of pkg/mod.py to undo"):
        ed.undo("pkg/mod.py")


def test_create_and_undo_removes_new_file(local_sandbox):
    ed = Editor(local_sandbox)
    assert ed.create("pkg/new.py", "x = 1\n") == "Created pkg/new.py (1 lines)."
    assert "new.py" in local_sandbox.diff()
    ed.undo("pkg/new.py")
    assert local_sandbox.diff() == ""


def test_errors_name_the_problem(local_sandbox):
    ed = Editor(local_sandbox)
    with pytest.raises(EditError, match=r"missing.py does not exist.*grep hit or from the listing `view \.` shows \(`create` makes"):
        ed.str_replace("missing.py", "a", "b")
    with pytest.raises(EditError, match="out of range; pkg/mod.py has 6 lines"):
        ed.view("pkg/mod.py", 50, 60)
    with pytest.raises(EditError, match="line 99 is out of range"):
        ed.insert("pkg/mod.py", 99, "x\n")
    assert "mod.py" in ed.view("pkg")  # a directory lists its files


def test_view_without_end_pages_whole_lines_within_the_observation_limit(local_sandbox):
    from agent_scaffold.editor import PAGE_NOTE_CHARS, numbered, page_last
    lines = [f"line_{i:03d} = {'x' * 40}" for i in range(1, 201)]
    local_sandbox.write_file("pkg/long.py", "\n".join(lines) + "\n")
    ed = Editor(local_sandbox)
    page = ed.view("pkg/long.py", 50, max_chars=1500)
    shown, note = page.rsplit("\n", 1)
    last = page_last(lines, 50, 1500)
    assert shown == numbered(lines[49:last], 50)  # whole lines from the copied START, none cut
    assert len(shown) <= 1500 - PAGE_NOTE_CHARS and len(page) <= 1500
    assert note == f"[... {200 - last} more lines; view pkg/long.py {last + 1} to see them]"
    assert 50 < last < 200
    # the next page starts where the note says; the last page has no note
    assert ed.view("pkg/long.py", last + 1, max_chars=1500).startswith(f"{last + 1:6d}\tline_{last + 1:03d}")
    assert "more lines" not in ed.view("pkg/long.py", 195, max_chars=1500)
    # a single line longer than the page is still shown (the Toolbox's truncate cuts it)
    assert page_last(["y" * 5000, "z"], 1, 1500) == 1
    # without a limit, the old 400-line window
    assert page_last(lines, 1, None) == 200


def test_a_page_from_a_def_line_ends_with_that_function():
    from agent_scaffold.editor import block_end, page_last
    src = ["import os", "", "", "def f(a,", "      b):", '    """Doc.', "", 'text"""', "    if a:",
           "        return b", "", "    return a", "", "", "class C:", "    def m(self):", "        return (",
           "            1", "        )", "", "    x = 1", "", "y = 2"]
    assert block_end(src, 4) == 12  # blank lines and a dedented docstring line inside the body do not end it
    assert block_end(src, 16) == 19 and block_end(src, 15) == 21  # a method; a class with a `)` line inside
    assert block_end(src, 1) is None and block_end(src, 99) is None  # not a def line
    broken = src[:3] + ["def f(a:", "    x = 1", "", "def g():", "    pass"]  # no parse: by indentation
    assert block_end(broken, 4) == 5
    assert page_last(src, 4, 1500) == 12 and page_last(src, 4, None) == 12
    assert page_last(src, 1, 1500) == len(src)  # not at a def: the page is bounded by characters only
    assert page_last(src, 4, 150) < 12  # and the characters still bound a long function


def test_a_refused_search_shows_the_lines_most_like_it():
    """Not found: the file's lines (from START on) most like the SEARCH's first line, as they are, at most 3;
    nothing alike, the old advice."""
    src = "def f(items):\n    item_list = [str(i) for i in items]\n    if not item_list:\n        return ''\n" \
          "    return item_list[0]\n"
    with pytest.raises(EditError) as exc:
        replace_once(src, "        return item\n", "        return x\n", "f")
    shown = str(exc.value).split("indentation matters):\n", 1)[1].split("\n")
    assert shown[0] == "    return item_list[0]" and 1 <= len(shown) <= 3 and all(x in src.split("\n") for x in shown)
    with pytest.raises(EditError, match=r"not found in f at or after line 5\.\nThe lines .*:\n    return item_list\[0\]$"):
        replace_once(src, "if not item_lst:\n", "x\n", "f", start=5)  # only lines from START are offered
    with pytest.raises(EditError, match=r"not found in f\. View the file and copy the lines exactly"):
        replace_once(src, "zzzzqqqq = 12345\n", "x\n", "f")
    long = "\n".join(f"    value_{i} = compute({i})" for i in range(100_000)) + "\n"
    with pytest.raises(EditError, match="value_1 = compute"):  # a large file: the scan is bounded
        replace_once(long, "    value_1 = computed(1)\n", "x\n", "f")


def test_a_search_copied_with_the_views_line_numbers_matches_without_them():
    src = "def f(items):\n    item_list = list(items)\n    if item_list:\n        return ''\n"
    done = replace_once(src, "     3\t    if item_list:\n", "     3\t    if not item_list:\n", "f")
    assert done.unnumbered and done.content == src.replace("if item_list", "if not item_list")
    done = replace_once(src, "     3\t    if item_list:\n", "    if not item_list:\n", "f")  # REPLACE without them
    assert done.content == src.replace("if item_list", "if not item_list")
    with pytest.raises(EditError, match="without the line numbers copied from the view, the REPLACE text is the same"):
        replace_once(src, "     3\t    if item_list:\n", "    if item_list:\n", "f")
    # one line copied with its number among unnumbered ones (`    33\t    item_list = ...`)
    done = replace_once(src, "     2\t    item_list = list(items)\n    if item_list:\n",
                        "    item_list = list(items)\n    if not item_list:\n", "f")
    assert done.unnumbered and done.content == src.replace("if item_list", "if not item_list")
    # a file whose lines really start with digits and a tab is matched as written
    tsv = "1\tone\n2\ttwo\n"
    assert not replace_once(tsv, "2\ttwo\n", "2\tzwei\n", "f").unnumbered


def test_a_missing_module_file_is_the_package_it_names(tmp_path):
    """`inflection.py` for the listed `inflection/__init__.py` (held-out policies of the localize warm start):
    one file that is that module is edited and viewed, and the observation names it; two are refused."""
    from tests.agent_scaffold.local_sandbox import LocalSandbox

    box = LocalSandbox(tmp_path, {"infl/__init__.py": "def f(w):\n    if not w and w:\n        return w\n",
                                  "src/hum/lists.py": "x = 1\n", "two.py.txt": ""})
    ed = Editor(box)
    out = ed.str_replace("infl.py", "if not w and w:", "if not w or w:", 2)
    assert "Edited infl/__init__.py. (infl.py is no file; infl/__init__.py is that module.)" in out
    assert box.read_file("infl/__init__.py").decode() == "def f(w):\n    if not w or w:\n        return w\n"
    assert ed.view("hum/lists.py", 1).startswith("hum/lists.py is no file; src/hum/lists.py is that module:\n")
    assert "(infl.__init__.py is no file; infl/__init__.py is that module.)" in ed.str_replace(
        "infl.__init__.py", "if not w or w:", "if w:", 2)
    box2 = LocalSandbox(tmp_path / "b", {"m/__init__.py": "a = 1\n", "src/m.py": "a = 1\n"})
    with pytest.raises(EditError, match="m.py does not exist"):
        Editor(box2).str_replace("m.py", "a = 1", "a = 2")


def test_a_missing_path_is_refused_with_the_repos_source_files(tmp_path):
    """Held-out policies asked for a training repo's file (`toolz/itertoolz.py` in parse): the refusal lists
    the repo's tracked Python files outside the tests, those with the asked file's name first and build or
    docs scripts last, at most LISTED_SOURCES of them with a count of the rest."""
    from agent_scaffold.editor import LISTED_SOURCES
    from tests.agent_scaffold.local_sandbox import LocalSandbox

    box = LocalSandbox(tmp_path, {"setup.py": "", "docs/conf.py": "", "parse/__init__.py": "x = 1\n",
                                  "parse/core.py": "", "tests/test_parse.py": "", "test_top.py": ""})
    ed = Editor(box)
    with pytest.raises(EditError) as refused:
        ed.view("toolz/itertoolz.py")
    assert str(refused.value) == (
        f"toolz/itertoolz.py does not exist (paths are relative to {box.workdir}); its Python files outside "
        "the tests include parse/__init__.py, parse/core.py, docs/conf.py, setup.py: copy one of them, or a "
        "path from a grep hit or from the listing `view .` shows (`create` makes a new file).")
    with pytest.raises(EditError, match=r"include parse/core.py, parse/__init__.py, docs/conf.py"):
        ed.str_replace("pkg/core.py", "a", "b")          # the file's name first
    many = LocalSandbox(tmp_path / "many", {f"m{i:02}.py": "" for i in range(LISTED_SOURCES + 3)})
    with pytest.raises(EditError, match=rf"include m00.py, .*, m0{LISTED_SOURCES - 1}.py \(and 3 more\): copy"):
        Editor(many).insert("x.py", 0, "y\n")
    with pytest.raises(EditError, match=r"nothing.py does not exist \(paths are relative to .*\); copy the path"):
        Editor(LocalSandbox(tmp_path / "none", {"tests/test_a.py": ""})).view("nothing.py")


def test_a_missing_path_is_the_one_file_holding_the_search_texts_first_line(tmp_path):
    """`inflection/inflection.py` for the listed `inflection/__init__.py`: the one non-test file holding the
    SEARCH's first line is edited, and the observation says so; a line in two files, or too short to tell,
    is the missing-path refusal as before."""
    from tests.agent_scaffold.local_sandbox import LocalSandbox

    box = LocalSandbox(tmp_path, {"pkg/__init__.py": "def f(w):\n    if not w and w.lower():\n        return w\n",
                                  "pkg/other.py": "def g(x):\n    return x\n",
                                  "tests/test_pkg.py": "    if not w and w.lower():\n    return x\n"})
    ed = Editor(box)
    out = ed.str_replace("pkg/pkg.py", "if not w and w.lower():", "if not w or w.lower():", 2)
    assert "(pkg/pkg.py is no file; pkg/__init__.py is the one file that holds the SEARCH text's first line.)" in out
    assert "if not w or w.lower():" in box.read_file("pkg/__init__.py").decode()
    with pytest.raises(EditError, match="pkg/x.py does not exist"):
        ed.str_replace("pkg/x.py", "return x", "return -x")       # shorter than HOLDER_MIN_CHARS
    box2 = LocalSandbox(tmp_path / "b", {"a.py": "value = compute(1)\n", "b.py": "value = compute(1)\n"})
    with pytest.raises(EditError, match="c.py does not exist"):
        Editor(box2).str_replace("c.py", "value = compute(1)", "value = compute(2)")


def test_undo_under_a_miswritten_path_undoes_the_module_or_the_one_edited_file(tmp_path):
    """`undo parse.py` after an edit of `parse/__init__.py` made through `parse.py` (held-out policies of the
    recovery warm start), and any path while one file has an edit to undo; with two edited files a path that is
    neither is refused."""
    from tests.agent_scaffold.local_sandbox import LocalSandbox

    box = LocalSandbox(tmp_path, {"parse/__init__.py": "a = 1\n", "other.py": "b = 1\n"})
    ed = Editor(box)
    ed.str_replace("parse.py", "a = 1", "a = 2")
    out = ed.undo("parse.py")
    assert out == ("Restored parse/__init__.py to its content before the last edit. (parse.py has no edit; "
                   "parse/__init__.py is the file edited.)")
    assert box.read_file("parse/__init__.py").decode() == "a = 1\n"
    ed.str_replace("parse/__init__.py", "a = 1", "a = 3")
    assert "parse/__init__.py is the file edited" in ed.undo("infix.py")  # the one edited file
    assert box.read_file("parse/__init__.py").decode() == "a = 1\n"
    ed.str_replace("parse/__init__.py", "a = 1", "a = 4")
    ed.str_replace("other.py", "b = 1", "b = 2")
    with pytest.raises(EditError, match="no edit of infix.py to undo"):
        ed.undo("infix.py")
    assert "parse/__init__.py is the file edited" in ed.undo("parse.py")  # the module still resolves
    assert box.read_file("other.py").decode() == "b = 2\n"
