"""The SVG charts: ticks, number formatting, escaping of labels, empty data."""

from __future__ import annotations

from selfplay.report import charts


def test_ticks_cover_the_range_and_counts_get_whole_ticks():
    assert charts.nice_ticks(0, 1) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert charts.nice_ticks(0, 3, whole=True) == [0, 1, 2, 3]
    assert charts.nice_ticks(0, 17, whole=True) == [0, 5, 10, 15, 20]
    assert charts.nice_ticks(-0.5, 0.2)[0] <= -0.5 and charts.nice_ticks(-0.5, 0.2)[-1] >= 0.2


def test_numbers_print_short():
    assert [charts.fmt(v) for v in (3.0, 0.123456, None, float("nan"), 1_700_000_000)] == [
        "3", "0.1235", "–", "–", "1700000000"]


def test_labels_are_escaped_everywhere():
    name = '<script>x</script>"'
    svg = (charts.line_chart("c1", name, {name: [(1, 0.5), (2, 1.0)]}, y_label=name)
           + charts.bar_chart("c2", name, [(name, 2)], x_label=name)
           + charts.histogram("c3", name, [name], {name: [1]}, x_label=name))
    assert "<script" not in svg and "&lt;script&gt;x&lt;/script&gt;&quot;" in svg
    assert svg.count("<svg ") == 3


def test_no_data_says_so():
    assert "No data in this run yet." in charts.line_chart("c", "t", {"a": []}, y_label="y")
    assert "No data in this run yet." in charts.histogram("c", "t", ["0"], {"a": [0]}, x_label="x")
    assert "No data in this run yet." in charts.bar_chart("c", "t", [], x_label="x")


def test_iteration_axis_has_whole_ticks_only():
    svg = charts.line_chart("c", "t", {"a": [(1, 0.0), (2, 1.0)]}, y_label="y")
    assert ">1.5<" not in svg and ">1.2<" not in svg and ">2<" in svg
