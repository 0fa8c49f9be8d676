"""fluxion.utils pytree functions (MLX semantics)."""

import pytest

import fluxion.core as mx
from fluxion.utils import (tree_flatten, tree_map, tree_map_with_path,
                           tree_reduce, tree_unflatten, tree_visit)

TREE = {"a": [1, (2, 3)], "b": {"c": 4}, "d": 5}


def test_flatten_unflatten():
    flat = tree_flatten(TREE)
    assert flat == [("a.0", 1), ("a.1.0", 2), ("a.1.1", 3), ("b.c", 4),
                    ("d", 5)]
    assert tree_unflatten(flat) == {"a": [1, [2, 3]], "b": {"c": 4}, "d": 5}
    assert tree_flatten([[[0]]]) == [("0.0.0", 0)]
    assert tree_flatten(7) == [("", 7)]
    assert tree_unflatten([("", 7)]) == 7
    assert tree_flatten([1, 2], prefix=".p") == [("p.0", 1), ("p.1", 2)]
    # Leaves chosen by is_leaf are kept whole.
    assert tree_flatten({"x": [1, 2]}, is_leaf=lambda t: isinstance(t, list)) \
        == [("x", [1, 2])]
    # Missing list positions are filled with empty dicts.
    assert tree_unflatten([("0", 1), ("2", 3)]) == [1, {}, 3]
    assert tree_unflatten([("10", "a"), ("2", "b")])[2] == "b"


def test_map():
    out = tree_map(lambda x: x * 10, TREE)
    assert out == {"a": [10, (20, 30)], "b": {"c": 40}, "d": 50}
    assert isinstance(out["a"][1], tuple)
    summed = tree_map(lambda x, y: x + y, TREE, TREE)
    assert summed["a"][1] == (4, 6)
    counted = tree_map(len, {"x": [1, 2], "y": [3]},
                       is_leaf=lambda t: isinstance(t, list))
    assert counted == {"x": 2, "y": 1}
    arrays = tree_map(lambda x: mx.array(x), TREE)
    assert tree_map(lambda a: a.item(), arrays) == TREE | {"a": [1, (2, 3)]}


def test_map_with_path():
    paths = tree_map_with_path(lambda p, x: p, TREE)
    assert paths == {"a": ["a.0", ("a.1.0", "a.1.1")], "b": {"c": "b.c"},
                     "d": "d"}
    both = tree_map_with_path(lambda p, x, y: (p, x + y), [1, 2], [10, 20])
    assert both == [("0", 11), ("1", 22)]
    assert tree_map_with_path(lambda p, x: p, 5) is None


def test_visit_and_reduce():
    seen = []
    assert tree_visit(seen.append, TREE) is None
    assert seen == [1, 2, 3, 4, 5]
    assert tree_reduce(lambda acc, x: acc + x, TREE, 0) == 15
    assert tree_reduce(lambda acc, x: acc + x, TREE) == 15
    assert tree_reduce(lambda acc, x: acc * x, [2, [3, 4]], 1) == 24
    assert tree_reduce(lambda acc, x: acc + len(x), {"a": [1, 2], "b": [3]},
                       0, is_leaf=lambda t: isinstance(t, list)) == 3
    assert tree_reduce(lambda acc, x: acc + x, [], 0) == 0


def test_flatten_into_destination():
    tree = {"a": [1, {"b": 2}], "c": {}}
    d = {}
    assert tree_flatten(tree, destination=d) is d
    assert d == {"a.0": 1, "a.1.b": 2}
    lst = [("x", 0)]
    # As MLX, the prefix carries its own leading dot.
    assert tree_flatten([5], prefix=".p", destination=lst) == [("x", 0), ("p.0", 5)]
    with pytest.raises(ValueError, match="destination"):
        tree_flatten(tree, destination=())


def test_named_tuples_and_tuple_subclasses_keep_their_type():
    from typing import NamedTuple

    class Pair(NamedTuple):
        left: int
        right: int

    class Vec(tuple):
        pass

    p = tree_map(lambda x: x * 10, Pair(1, 2))
    assert isinstance(p, Pair) and p == Pair(10, 20)
    v = tree_map(lambda x: -x, Vec([1, 2]))
    assert type(v) is Vec and v == (-1, -2)
    paths = []
    q = tree_map_with_path(lambda path, a, b: paths.append(path) or a + b,
                           Pair(1, 2), Pair(3, 4))
    assert q == Pair(4, 6) and paths == ["0", "1"]


def test_unflatten_only_canonical_indices_make_lists():
    assert tree_unflatten([("0", "a"), ("1", "b")]) == ["a", "b"]
    t = tree_unflatten([("01", "a"), ("1", "b")])
    assert t == {"01": "a", "1": "b"}
    assert tree_unflatten([("1", "b")]) == [{}, "b"]
    assert tree_unflatten([]) == {}
    assert tree_unflatten({"a.b": 1}) == {"a": {"b": 1}}


def test_tree_merge():
    from fluxion.utils import tree_merge

    assert tree_merge({"a": 1}, {"b": [2]}) == {"a": 1, "b": [2]}
    assert tree_merge([{"a": 1}, {}], [{"b": 2}, {}]) == [{"a": 1, "b": 2}, {}]
    assert tree_merge({"x": [None, 2]}, {"x": [1]}) == {"x": [1, 2]}
    # Empty nodes give way to the other side and are kept when both are
    # empty (of the same type).
    assert tree_merge({"a": 1, "b": {}, "c": {}}, {"a": {}, "b": {}, "c": 2}) == {
        "a": 1, "b": {}, "c": 2}
    assert tree_merge({"a": []}, {"a": []}) == {"a": []}
    with pytest.raises(ValueError, match="different types"):
        tree_merge({}, [])
    with pytest.raises(ValueError, match="merge_fn"):
        tree_merge({"a": 1}, {"a": 2})
    with pytest.raises(ValueError, match="different structures"):
        tree_merge({"a": [1]}, {"a": {"b": 1}})
    assert tree_merge({"a": 1, "b": (2,)}, {"a": 10, "b": (3,)}, lambda x, y: x + y) == {
        "a": 11, "b": (5,)}
