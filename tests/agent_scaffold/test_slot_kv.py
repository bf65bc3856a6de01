"""`SlotKV` against a plain reference: random joins, leaves and decode steps, with every live row's KV and
mask compared to the list of positions it should hold. No model: the buffers are checked directly."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agent_scaffold.policies.slot_kv import SlotKV  # noqa: E402

LAYERS, HEADS, DIM = 2, 3, 4


def _row(length: int, seed: int) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(1, HEADS, length, DIM, generator=g), torch.randn(1, HEADS, length, DIM, generator=g))
            for _ in range(LAYERS)], torch.ones(length)


def _left_padded(rows: list[list[tuple[torch.Tensor, torch.Tensor]]]) -> tuple[list, list[int]]:
    width = max(r[0][0].shape[2] for r in rows)
    pads = [width - r[0][0].shape[2] for r in rows]
    pad = torch.nn.functional.pad
    layers = [(torch.cat([pad(r[i][0], (0, 0, p, 0), value=float("nan")) for r, p in zip(rows, pads)]),
               torch.cat([pad(r[i][1], (0, 0, p, 0), value=float("nan")) for r, p in zip(rows, pads)]))
              for i in range(LAYERS)]
    return layers, pads


def _check(kv: SlotKV, expected: list[list[tuple[torch.Tensor, torch.Tensor]]]) -> None:
    """Each slot's real positions equal its expected KV, its mask marks exactly them, and everything in the
    batch's view is finite (masked columns are still read by attention)."""
    assert kv.rows == len(expected)
    cache, mask = kv.step_inputs()
    for slot, layers in enumerate(expected):
        n = layers[0][0].shape[2]
        assert mask[slot, :-1].tolist() == [0] * (kv.width - n) + [1] * n and mask[slot, -1] == 1
        for (k, v), layer in zip(layers, cache.layers):
            assert torch.equal(layer.keys[slot, :, kv.width - n:], k[0])
            assert torch.equal(layer.values[slot, :, kv.width - n:], v[0])
        assert [tuple(t.shape) for t in kv.row_kv(slot)[0]] == [(1, HEADS, n, DIM)] * 2
    for layer in cache.layers:
        assert torch.isfinite(layer.keys).all() and torch.isfinite(layer.values).all()
    assert min(kv.first) == kv.start  # no column is padding in every row


@pytest.mark.parametrize("seed", range(8))
def test_random_joins_leaves_and_steps_keep_every_rows_kv(seed):
    rng = random.Random(seed)
    kv, expected, made = SlotKV(torch), [], 0
    for _ in range(60):
        action = rng.random()
        if action < 0.3 or not expected:  # join 1-3 rows of 1-400 positions
            rows = []
            for _ in range(rng.randint(1, 3)):
                rows.append(_row(rng.choice([1, rng.randint(1, 40), rng.randint(200, 400)]), made)[0])
                made += 1
            layers, pads = _left_padded(rows)
            kv.join(layers, pads)
            expected += rows
        elif action < 0.55:  # some rows leave
            slots = rng.sample(range(len(expected)), rng.randint(1, len(expected)))
            order = kv.leave(slots)
            assert sorted(order) == sorted(set(range(len(expected))) - set(slots))
            expected = [expected[s] for s in order]
            if not expected:
                assert kv.rows == 0
                continue
        else:  # a decode step writes one column for every row
            cache, mask = kv.step_inputs()
            new = [_row(1, made + i)[0] for i in range(len(expected))]
            made += len(expected)
            for i, layer in enumerate(cache.layers):
                layer.update(torch.cat([n[i][0] for n in new]), torch.cat([n[i][1] for n in new]))
            kv.advanced()
            expected = [[(torch.cat([e[i][0], n[i][0]], dim=2), torch.cat([e[i][1], n[i][1]], dim=2))
                         for i in range(LAYERS)] for e, n in zip(expected, new)]
        if expected:
            _check(kv, expected)


def test_a_leave_copies_one_row_and_keeps_the_buffers():
    kv = SlotKV(torch)
    rows = [_row(n, i)[0] for i, n in enumerate((5, 9, 7, 3))]
    layers, pads = _left_padded(rows)
    kv.join(layers, pads)
    buffers = [k.data_ptr() for k, _ in kv.kv]
    assert kv.leave([1]) == [0, 3, 2]  # the last row took the freed slot
    assert [k.data_ptr() for k, _ in kv.kv] == buffers
    _check(kv, [rows[0], rows[3], rows[2]])
    assert kv.width == 7  # the 9-position row's padding left with it
    assert kv.fill() == pytest.approx((5 + 3 + 7) / (3 * 7))


def test_fill_is_the_share_of_the_attended_columns_that_are_the_rows_own():
    kv = SlotKV(torch)
    assert kv.fill() == 1.0  # no rows
    kv.join(*_left_padded([_row(4, 0)[0], _row(4, 1)[0]]))
    assert kv.fill() == 1.0
    kv.join(*_left_padded([_row(12, 2)[0]]))
    assert kv.fill() == pytest.approx((4 + 4 + 12) / (3 * 12))


def test_growing_past_the_buffers_keeps_every_row(monkeypatch):
    """More rows than slots, a row longer than the room left of `start`, and steps past the capacity each
    reallocate; the rows survive each."""
    calls = []
    real = SlotKV._reallocate
    monkeypatch.setattr(SlotKV, "_reallocate", lambda self, rows, width: (calls.append((rows, width)),
                                                                         real(self, rows, width)))
    kv = SlotKV(torch)
    rows = [_row(10, 0)[0]]
    kv.join(*_left_padded(rows))
    for i in range(1, 7):  # past the first 5 slots
        rows.append(_row(10, i)[0])
        kv.join(*_left_padded(rows[-1:]))
    rows.append(_row(600, 7)[0])  # longer than the 10 columns plus the room on their left
    kv.join(*_left_padded(rows[-1:]))
    _check(kv, rows)
    for step in range(400):  # past the right room (a quarter more than the 610 columns)
        cache, _ = kv.step_inputs()
        new = [_row(1, 100 + step * 10 + j)[0] for j in range(len(rows))]
        for i, layer in enumerate(cache.layers):
            layer.update(torch.cat([n[i][0] for n in new]), torch.cat([n[i][1] for n in new]))
        kv.advanced()
        rows = [[(torch.cat([e[i][0], n[i][0]], dim=2), torch.cat([e[i][1], n[i][1]], dim=2))
                 for i in range(LAYERS)] for e, n in zip(rows, new)]
    _check(kv, rows)
    assert len(calls) >= 3
