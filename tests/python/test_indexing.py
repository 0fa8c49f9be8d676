"""__getitem__, __setitem__ and .at[] against NumPy over generated index
expressions: ints, negative ints, slices with steps, None, Ellipsis, integer
arrays (and lists), and their combinations."""

import numpy as np
import pytest

import fluxion.core as mx

SHAPE = (4, 5, 6)


def random_slice(rng, n):
    def bound():
        if rng.random() < 0.3:
            return None
        return int(rng.integers(-n - 2, n + 3))

    step = None if rng.random() < 0.4 else int(rng.choice([-3, -2, -1, 1,
                                                            2, 3]))
    return slice(bound(), bound(), step)


def random_array_index(rng, n, shape, as_list=False):
    idx = rng.integers(-n, n, size=shape)
    if as_list and idx.ndim > 0:
        return idx.tolist()
    return idx


def random_index(rng, allow_arrays=True):
    """A random index expression for an array of SHAPE, as NumPy objects."""
    items = []
    axis = 0
    used_ellipsis = False
    n_items = int(rng.integers(1, 5))
    # Array indices of one expression must broadcast together.
    base = [(3,), (2, 2), (2, 1), (1,)][int(rng.integers(4))]
    shapes = [base, (), (1,) * len(base), base[-1:]]
    for _ in range(n_items):
        r = rng.random()
        if r < 0.12:
            items.append(None)
            continue
        if r < 0.2 and not used_ellipsis:
            items.append(Ellipsis)
            used_ellipsis = True
            # The ellipsis takes what the remaining items do not.
            continue
        if axis >= len(SHAPE):
            break
        n = SHAPE[axis]
        if r < 0.4:
            items.append(int(rng.integers(-n, n)))
        elif r < 0.7 or not allow_arrays:
            items.append(random_slice(rng, n))
        else:
            shape = shapes[int(rng.integers(len(shapes)))]
            items.append(random_array_index(rng, n, shape, as_list=r > 0.9))
        axis += 1
    if used_ellipsis:
        # Drop items beyond the array's rank.
        consumed = sum(1 for i in items if i is not None and i is not Ellipsis)
        while consumed > len(SHAPE):
            for k in range(len(items) - 1, -1, -1):
                if items[k] is not None and items[k] is not Ellipsis:
                    del items[k]
                    break
            consumed -= 1
    return items[0] if len(items) == 1 and rng.random() < 0.5 else tuple(
        items)


def to_mx_index(index):
    def conv(i):
        if isinstance(i, np.ndarray):
            return mx.array(i)
        return i

    if isinstance(index, tuple):
        return tuple(conv(i) for i in index)
    return conv(index)


def index_cases(count, seed, allow_arrays=True):
    rng = np.random.default_rng(seed)
    return [random_index(rng, allow_arrays) for _ in range(count)]


BASE = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)


@pytest.mark.parametrize("index", index_cases(400, 0), ids=repr)
def test_getitem(index):
    x = mx.array(BASE)
    expected = BASE[index]
    got = x[to_mx_index(index)]
    assert got.shape == expected.shape
    np.testing.assert_array_equal(np.array(got), expected)


@pytest.mark.parametrize("index", index_cases(300, 1), ids=repr)
def test_setitem(index):
    ref = BASE.copy()
    target_shape = ref[index].shape
    rng = np.random.default_rng(len(repr(index)))
    value = rng.integers(-100, 0, size=target_shape).astype(np.float32)
    ref[index] = value
    if np.asarray(value).size and len(set(map(float, ref[index].ravel()))) \
            != len(set(map(float, np.asarray(value).ravel()))):
        # Duplicate positions: NumPy leaves the winner unspecified.
        pytest.skip("duplicate positions")
    x = mx.array(BASE)
    x[to_mx_index(index)] = mx.array(value)
    np.testing.assert_array_equal(np.array(x), ref)


@pytest.mark.parametrize("index", index_cases(100, 2), ids=repr)
def test_setitem_scalar_and_broadcast(index):
    ref = BASE.copy()
    ref[index] = -1
    x = mx.array(BASE)
    x[to_mx_index(index)] = -1
    np.testing.assert_array_equal(np.array(x), ref)
    # A row broadcast along the leading dims of the target.
    shape = BASE[index].shape
    if len(shape) >= 1:
        row = np.arange(shape[-1], dtype=np.float32) - 50
        ref[index] = row
        x[to_mx_index(index)] = row
        np.testing.assert_array_equal(np.array(x), ref)


AT_OPS = [
    ("add", np.add),
    ("subtract", np.subtract),
    ("multiply", np.multiply),
    ("divide", np.true_divide),
    ("maximum", np.maximum),
    ("minimum", np.minimum),
]


@pytest.mark.parametrize("name,ufunc", AT_OPS)
@pytest.mark.parametrize("index", index_cases(40, 3), ids=repr)
def test_at_updates(name, ufunc, index):
    rng = np.random.default_rng(7)
    base = rng.uniform(1, 2, size=SHAPE).astype(np.float64)
    value = rng.uniform(0.5, 3, size=base[index].shape)
    ref = base.copy()
    ufunc.at(ref, index, value)
    x = mx.array(base, mx.float64)  # float64 NumPy data would be float32
    out = getattr(x.at[to_mx_index(index)], name)(mx.array(value, mx.float64))
    np.testing.assert_allclose(np.array(out), ref, rtol=1e-12)
    # Functional: x itself is unchanged.
    np.testing.assert_array_equal(np.array(x), base)


def test_at_duplicates_accumulate():
    x = mx.zeros((5,))
    idx = mx.array([0, 1, 1, 1, 4, 0])
    assert x.at[idx].add(1.0).tolist() == [2, 3, 0, 0, 1]
    assert x.at[idx].subtract(mx.array([1, 2, 3, 4, 5, 6.0])).tolist() == [
        -7, -9, 0, 0, -5]
    y = mx.ones((4,)) * 2
    assert y.at[mx.array([1, 1, 3])].multiply(3.0).tolist() == [2, 18, 2, 6]
    assert y.at[mx.array([1, 1])].divide(2.0).tolist() == [2, 0.5, 2, 2]
    m = mx.array([0, 5, 0])
    assert m.at[mx.array([0, 0, 2])].maximum(mx.array([3, 7, -1])).tolist() \
        == [7, 5, 0]
    assert m.at[mx.array([1, 1])].minimum(mx.array([4, 2])).tolist() == [0, 2,
                                                                         0]
    z = mx.zeros((3, 2), mx.int32)
    out = z.at[mx.array([0, 2, 0]), 1].add(mx.array([1, 2, 3]))
    assert out.tolist() == [[0, 4], [0, 0], [0, 2]]
    assert out.dtype == mx.int32


def test_setitem_rebinds_and_casts():
    x = mx.array([1, 2, 3])
    alias = x
    before = x[0]
    x[1] = 7.9  # cast to the array's dtype
    assert x.dtype == mx.int32
    assert x.tolist() == [1, 7, 3]
    assert alias.tolist() == [1, 7, 3]  # same Python object
    assert before.item() == 1
    x[mx.array([0, 2])] = mx.array([10, 20])
    assert x.tolist() == [10, 7, 20]
    x[:] = 0
    assert x.tolist() == [0, 0, 0]
    x[...] = mx.array([4, 5, 6])
    assert x.tolist() == [4, 5, 6]


def test_index_types():
    x = mx.arange(10)
    assert x[np.int64(3)].item() == 3
    assert x[mx.array(4)].item() == 4
    assert x[[1, -1]].tolist() == [1, 9]
    assert x[np.array([2, 3])].tolist() == [2, 3]
    assert x[mx.array([1, 2], mx.uint8)].tolist() == [1, 2]
    assert x[[]].shape == (0,)
    assert x[::-3].tolist() == [9, 6, 3, 0]
    assert x[8:2:-2].tolist() == [8, 6, 4]
    assert x[-100:100].tolist() == list(range(10))


def test_index_errors():
    x = mx.zeros((2, 3))
    with pytest.raises(IndexError, match=r"\[getitem\] Index 3 is out of "
                       r"bounds for axis 1 with size 3"):
        x[0, 3]
    with pytest.raises(IndexError, match=r"\[getitem\] Index -3 is out"):
        x[-3]
    # A malformed index is a ValueError (MLX), whether read or written.
    with pytest.raises(ValueError, match=r"\[getitem\] Too many indices"):
        x[0, 0, 0]
    with pytest.raises(ValueError, match=r"single ellipsis"):
        x[..., ...]
    with pytest.raises(ValueError, match=r"\[setitem\] Too many indices"):
        x[0, 0, 0] = 1
    with pytest.raises(ValueError, match=r"\[setitem\] An index can only"):
        x[..., ...] = 1
    with pytest.raises(ValueError, match=r"\[getitem\] Boolean"):
        x[mx.array([True, False])]
    with pytest.raises(ValueError, match=r"integer type"):
        x[mx.array([0.5])]
    with pytest.raises(ValueError, match=r"\[getitem\] Cannot index"):
        x["a"]
    with pytest.raises(ValueError, match=r"step cannot be zero|stride"):
        x[::0]
    # Out-of-range array indices are found when the kernel runs.
    with pytest.raises(IndexError):
        mx.eval(x[mx.array([5])])
    with pytest.raises(IndexError):
        mx.eval(x[mx.array([0, 1]), mx.array([1, 7])])
    with pytest.raises(ValueError, match=r"broadcast"):
        y = mx.zeros((2, 3))
        y[0] = mx.ones((2,))
    with pytest.raises(ValueError, match=r"\[at\] Index the array first"):
        x.at.add(1)


def test_iteration_and_len():
    x = mx.arange(6).reshape(3, 2)
    rows = list(x)
    assert len(rows) == 3 and len(x) == 3
    assert [r.tolist() for r in rows] == [[0, 1], [2, 3], [4, 5]]
    k1, k2 = mx.random.split(mx.random.key(0))
    assert k1.shape == (2,)
    with pytest.raises(TypeError):
        len(mx.array(1))
    with pytest.raises(TypeError):
        iter(mx.array(1))


def test_update_errors_name_the_operation():
    x = mx.zeros((2, 3))
    with pytest.raises(IndexError, match=r"^\[setitem\] Index 2 is out of "
                       r"bounds for axis 0 with size 2"):
        x[2] = 1
    with pytest.raises(ValueError, match=r"^\[at\] Too many indices"):
        x.at[0, 0, 0].add(1)
    # Boolean masks are accepted for updates (MLX semantics) but not for
    # reads, whose output shape would depend on the data.
    with pytest.raises(ValueError, match=r"^\[getitem\] Boolean"):
        x[mx.array([True, False])]
