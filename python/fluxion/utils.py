"""Pytree utilities with MLX's semantics.

A tree is built from lists, tuples and dicts; anything else is a leaf
(unless ``is_leaf`` says otherwise). Paths name leaves with dot-separated
list indices and dict keys ("layers.0.weight").
"""

import re
from collections import defaultdict

_INDEX = re.compile(r"0|[1-9][0-9]*")

__all__ = [
    "tree_flatten",
    "tree_unflatten",
    "tree_map",
    "tree_map_with_path",
    "tree_visit",
    "tree_reduce",
    "tree_merge",
]


def _rebuild(tree, children):
    """A list or tuple of ``tree``'s type holding ``children`` (NamedTuples
    take them as positional arguments)."""
    tree_type = type(tree)
    if isinstance(tree, tuple) and hasattr(tree_type, "_fields"):
        return tree_type(*children)
    return tree_type(children)


def tree_map(fn, tree, *rest, is_leaf=None):
    """Apply a function to the leaves of a tree.

    Args:
        fn (Callable): Called as ``fn(leaf, *rest_leaves)``.
        tree: A tree: nested lists, tuples and dicts; anything else is a leaf.
        *rest: Trees with (at least) the structure of ``tree``, whose
            matching leaves are passed to ``fn`` too.
        is_leaf (Callable, optional): ``is_leaf(node)`` returns ``True`` for a
            node to treat as a leaf (not descended into).

    Returns:
        A tree of ``tree``'s structure holding ``fn``'s results.

    Example:
        >>> tree_map(lambda x: x * 2, {"a": 1, "b": [2, 3]})
        {'a': 2, 'b': [4, 6]}
    """
    if is_leaf is not None and is_leaf(tree):
        return fn(tree, *rest)
    if isinstance(tree, (list, tuple)):
        return _rebuild(
            tree,
            [
                tree_map(fn, child, *(r[i] for r in rest), is_leaf=is_leaf)
                for i, child in enumerate(tree)
            ],
        )
    if isinstance(tree, dict):
        return {
            k: tree_map(fn, child, *(r[k] for r in rest), is_leaf=is_leaf)
            for k, child in tree.items()
        }
    return fn(tree, *rest)


def tree_map_with_path(fn, tree, *rest, is_leaf=None, path=None):
    """Like :func:`tree_map`, with each leaf's path passed first.

    Args:
        fn (Callable): Called as ``fn(path, leaf, *rest_leaves)``; paths are
            dotted (``"layers.0.weight"``).
        tree: The tree.
        *rest: Trees with (at least) the structure of ``tree``.
        is_leaf (Callable, optional): ``is_leaf(node)`` returns ``True`` for a
            node to treat as a leaf (not descended into).
        path (str, optional): Prefix of the paths.

    Returns:
        A tree of ``tree``'s structure holding ``fn``'s results.
    """
    if is_leaf is not None and is_leaf(tree):
        return fn(path, tree, *rest)
    if isinstance(tree, (list, tuple)):
        prefix = f"{path}." if path else ""
        return _rebuild(
            tree,
            [
                tree_map_with_path(
                    fn,
                    child,
                    *(r[i] for r in rest),
                    is_leaf=is_leaf,
                    path=f"{prefix}{i}",
                )
                for i, child in enumerate(tree)
            ],
        )
    if isinstance(tree, dict):
        prefix = f"{path}." if path else ""
        return {
            k: tree_map_with_path(
                fn,
                child,
                *(r[k] for r in rest),
                is_leaf=is_leaf,
                path=f"{prefix}{k}",
            )
            for k, child in tree.items()
        }
    return fn(path, tree, *rest)


def tree_flatten(tree, prefix="", is_leaf=None, destination=None):
    """The leaves of a tree as ``(path, leaf)`` pairs, in order.

    Args:
        tree: The tree.
        prefix (str, optional): Prefix of the paths.
        is_leaf (Callable, optional): ``is_leaf(node)`` returns ``True`` for a
            node to treat as a leaf (not descended into).
        destination (list or dict, optional): Receives the pairs and is
            returned; a new list by default.

    Returns:
        list(tuple(str, Any)) or dict: The pairs.

    Example:
        >>> tree_flatten([[[0]]])
        [('0.0.0', 0)]
        >>> tree_flatten({"a": 1, "b": [2, 3]})
        [('a', 1), ('b.0', 2), ('b.1', 3)]
    """
    if destination is None:
        destination = []
    if isinstance(destination, dict):
        add = destination.__setitem__
    elif isinstance(destination, list):

        def add(k, v):
            destination.append((k, v))

    else:
        raise ValueError(
            "[tree_flatten] destination must be a list or a dict, got "
            f"{type(destination).__name__}"
        )
    _flatten_into(tree, prefix, is_leaf, add)
    return destination


def _flatten_into(tree, prefix, is_leaf, add):
    if is_leaf is None or not is_leaf(tree):
        if isinstance(tree, (list, tuple)):
            for i, child in enumerate(tree):
                _flatten_into(child, f"{prefix}.{i}", is_leaf, add)
            return
        if isinstance(tree, dict):
            for k, child in tree.items():
                _flatten_into(child, f"{prefix}.{k}", is_leaf, add)
            return
    add(prefix[1:], tree)


def tree_unflatten(tree):
    """Rebuild a tree from ``(path, leaf)`` pairs.

    Path components that are integers make lists, others dicts (tuples come
    back as lists).

    Args:
        tree (list(tuple(str, Any)) or dict): The pairs, as
            :func:`tree_flatten` gives them.

    Returns:
        The tree.

    Example:
        >>> tree_unflatten([("a", 1), ("b.0", 2), ("b.1", 3)])
        {'a': 1, 'b': [2, 3]}
    """
    if isinstance(tree, dict):
        tree = list(tree.items())
    if len(tree) == 0:
        return {}
    if len(tree) == 1 and tree[0][0] == "":
        return tree[0][1]

    children = defaultdict(list)
    for key, value in tree:
        current, *rest = key.split(".", maxsplit=1)
        children[current].append((rest[0] if rest else "", value))

    # A level is a list only when every key is a canonical index ("0",
    # "12", not "01"), so that distinct keys never collapse onto one slot.
    is_list = all(_INDEX.fullmatch(k) for k in children)

    if is_list:
        out = []
        for i, k in sorted((int(k), k) for k in children):
            # Missing indices are filled with empty dicts, as in MLX.
            out.extend({} for _ in range(i - len(out)))
            out.append(tree_unflatten(children[k]))
        return out
    return {k: tree_unflatten(v) for k, v in children.items()}


def tree_visit(fn, tree, is_leaf=None):
    """Call a function on every leaf of a tree, in flatten order.

    Args:
        fn (Callable): Called as ``fn(leaf)`` for its side effects.
        tree: The tree.
        is_leaf (Callable, optional): ``is_leaf(node)`` returns ``True`` for a
            node to treat as a leaf (not descended into).

    Returns:
        None.
    """
    if is_leaf is not None and is_leaf(tree):
        fn(tree)
    elif isinstance(tree, (list, tuple)):
        for child in tree:
            tree_visit(fn, child, is_leaf)
    elif isinstance(tree, dict):
        for child in tree.values():
            tree_visit(fn, child, is_leaf)
    else:
        fn(tree)


def tree_reduce(fn, tree, initializer=None, is_leaf=None):
    """Fold a function over the leaves of a tree.

    Args:
        fn (Callable): Called as ``fn(accumulator, leaf)``; returns the new
            accumulator.
        tree: The tree.
        initializer (optional): The starting accumulator; the first leaf
            when omitted.
        is_leaf (Callable, optional): ``is_leaf(node)`` returns ``True`` for a
            node to treat as a leaf.

    Returns:
        The final accumulator.

    Example:
        >>> tree_reduce(lambda acc, x: acc + x, {"a": [1, 2], "b": 3}, 0)
        6
    """
    if is_leaf is not None and is_leaf(tree):
        return tree if initializer is None else fn(initializer, tree)
    accumulator = initializer
    if isinstance(tree, (list, tuple)):
        for child in tree:
            accumulator = tree_reduce(fn, child, accumulator, is_leaf)
    elif isinstance(tree, dict):
        for child in tree.values():
            accumulator = tree_reduce(fn, child, accumulator, is_leaf)
    else:
        return tree if accumulator is None else fn(accumulator, tree)
    return accumulator


def _is_empty_node(tree):
    return isinstance(tree, (list, tuple, dict)) and len(tree) == 0


def tree_merge(tree_a, tree_b, merge_fn=None):
    """Merge two trees into one.

    Where only one tree has something (the other has ``None``, an empty node,
    or nothing at all), that is taken. Lists and tuples merge item by item,
    dicts key by key.

    Args:
        tree_a: The first tree.
        tree_b: The second tree.
        merge_fn (Callable, optional): ``merge_fn(a, b)`` combines two leaves
            at the same place; without it that is a ``ValueError``, as are
            nodes of different kinds at the same place.

    Returns:
        The merged tree.

    Example:
        >>> tree_merge({"a": 1}, {"b": [2]})
        {'a': 1, 'b': [2]}
    """
    empty_a, empty_b = _is_empty_node(tree_a), _is_empty_node(tree_b)
    if empty_a and empty_b:
        if type(tree_a) is not type(tree_b):
            raise ValueError(
                "[tree_merge] Cannot merge empty nodes of different types: "
                f"{type(tree_a).__name__} and {type(tree_b).__name__}"
            )
        return tree_a
    if tree_a is None or empty_a:
        return tree_b
    if tree_b is None or empty_b:
        return tree_a

    a_seq = isinstance(tree_a, (list, tuple))
    b_seq = isinstance(tree_b, (list, tuple))
    if a_seq and b_seq:
        n = max(len(tree_a), len(tree_b))
        items = [
            tree_merge(
                tree_a[i] if i < len(tree_a) else None,
                tree_b[i] if i < len(tree_b) else None,
                merge_fn,
            )
            for i in range(n)
        ]
        return _rebuild(tree_a, items)
    if isinstance(tree_a, dict) and isinstance(tree_b, dict):
        out = {}
        for k in list(tree_a.keys()) + [k for k in tree_b if k not in tree_a]:
            out[k] = tree_merge(tree_a.get(k), tree_b.get(k), merge_fn)
        return out
    if a_seq or b_seq or isinstance(tree_a, dict) or isinstance(tree_b, dict):
        raise ValueError(
            "[tree_merge] Trees have different structures at the same place: "
            f"{type(tree_a).__name__} and {type(tree_b).__name__}"
        )
    if merge_fn is None:
        raise ValueError(
            "[tree_merge] Both trees have a leaf at the same place and no "
            "merge_fn was given"
        )
    return merge_fn(tree_a, tree_b)
