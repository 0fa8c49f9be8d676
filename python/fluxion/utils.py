"""Pytree utilities with MLX's semantics.

A tree is built from lists, tuples and dicts; anything else is a leaf
(unless ``is_leaf`` says otherwise). Paths name leaves with dot-separated
list indices and dict keys ("layers.0.weight").
"""

from collections import defaultdict

__all__ = [
    "tree_flatten",
    "tree_unflatten",
    "tree_map",
    "tree_map_with_path",
    "tree_visit",
    "tree_reduce",
]


def _rebuild(tree, children):
    """A list or tuple of ``tree``'s type holding ``children`` (NamedTuples
    take them as positional arguments)."""
    tree_type = type(tree)
    if isinstance(tree, tuple) and hasattr(tree_type, "_fields"):
        return tree_type(*children)
    return tree_type(children)


def tree_map(fn, tree, *rest, is_leaf=None):
    """Apply ``fn`` to the leaves of ``tree``, returning a tree of the same
    structure. ``rest`` are trees with (at least) the structure of ``tree``
    whose matching leaves are passed as extra arguments."""
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
    """Like :func:`tree_map`, but ``fn(path, leaf, *rest_leaves)`` also gets
    the leaf's path."""
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


def tree_flatten(tree, prefix="", is_leaf=None):
    """The leaves of ``tree`` as a list of ``(path, leaf)`` pairs, in order.

    >>> tree_flatten([[[0]]])
    [('0.0.0', 0)]
    >>> tree_flatten({"a": 1, "b": [2, 3]})
    [('a', 1), ('b.0', 2), ('b.1', 3)]
    """
    flat = []
    if is_leaf is None or not is_leaf(tree):
        if isinstance(tree, (list, tuple)):
            for i, child in enumerate(tree):
                flat.extend(tree_flatten(child, f"{prefix}.{i}", is_leaf))
            return flat
        if isinstance(tree, dict):
            for k, child in tree.items():
                flat.extend(tree_flatten(child, f"{prefix}.{k}", is_leaf))
            return flat
    return [(prefix[1:], tree)]


def tree_unflatten(tree):
    """Rebuild a tree from ``(path, leaf)`` pairs: path components that are
    integers make lists, others dicts (tuples come back as lists).

    >>> tree_unflatten([("a", 1), ("b.0", 2), ("b.1", 3)])
    {'a': 1, 'b': [2, 3]}
    """
    if len(tree) == 1 and tree[0][0] == "":
        return tree[0][1]
    try:
        int(tree[0][0].split(".", maxsplit=1)[0])
        is_list = True
    except ValueError:
        is_list = False

    children = defaultdict(list)
    for key, value in tree:
        current, *rest = key.split(".", maxsplit=1)
        children[current].append((rest[0] if rest else "", value))

    if is_list:
        out = []
        for i, k in sorted((int(k), k) for k in children):
            # Missing indices are filled with empty dicts, as in MLX.
            out.extend({} for _ in range(i - len(out)))
            out.append(tree_unflatten(children[k]))
        return out
    return {k: tree_unflatten(v) for k, v in children.items()}


def tree_visit(fn, tree, is_leaf=None):
    """Call ``fn`` on every leaf of ``tree`` (in flatten order) for its side
    effects; returns None."""
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
    """Fold ``fn(accumulator, leaf)`` over the leaves of ``tree``. Without
    an ``initializer`` the first leaf starts the accumulation.

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
