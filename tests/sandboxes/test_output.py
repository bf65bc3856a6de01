"""Output capping without Docker: head and tail kept, dropped bytes counted, bad UTF-8 replaced."""

import pytest

from sandboxes.output import OutputCap, cap_text


def test_small_output_is_kept_whole():
    cap = OutputCap(100)
    for chunk in (b"hello ", b"", b"world"):
        cap.feed(chunk)
    assert cap.text() == "hello world"
    assert cap.dropped == 0


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 1000])
def test_flood_keeps_head_and_tail_and_counts_the_rest(chunk):
    data = bytes(range(48, 58)) * 100  # "0123456789" * 100
    cap = OutputCap(20)
    for i in range(0, len(data), chunk):
        cap.feed(data[i:i + chunk])
    assert cap.total == 1000
    assert cap.dropped == 980
    text = cap.text()
    assert text.startswith("0123456789")  # head: first 10 bytes
    assert text.endswith("0123456789")  # tail: last 10 bytes
    assert "980 bytes of output dropped" in text


def test_invalid_utf8_is_replaced_not_raised():
    text, dropped = cap_text(b"ok \xff\xfe end", 100)
    assert text == "ok \ufffd\ufffd end"
    assert dropped == 0


def test_limit_must_leave_room():
    with pytest.raises(ValueError, match="max_output_bytes"):
        OutputCap(1)
