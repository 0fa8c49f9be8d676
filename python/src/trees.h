// Pytrees: nested lists, tuples and dicts whose leaves are arrays (or other
// objects). The transformations flatten their arguments to the arrays the
// C++ transforms take and rebuild Python structures around their results.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "python/src/convert.h"

namespace fxpy {

// A tuple with `items`, of `like`'s type (NamedTuples and other tuple
// subclasses keep their type through the transformations).
py::object rebuild_tuple(py::handle like, py::tuple items);

// Calls `visit` on every leaf (anything not a list, tuple or dict).
void tree_visit(py::handle tree, const std::function<void(py::handle)>& visit);

// Walks several trees in step, driven by the first: where another tree has
// a leaf instead of the matching container, that leaf is broadcast (a
// prefix tree, as vmap's axes are). Containers of the same kind must agree
// in size.
void tree_visit(
    const std::vector<py::object>& trees,
    const std::function<void(const std::vector<py::object>&)>& visit);

// A new tree with every leaf replaced by `f(leaf)`.
py::object tree_map(py::handle tree,
                    const std::function<py::object(py::handle)>& f);

// Replaces the array leaves by `f(leaf)`: lists and dicts are updated in
// place (so the caller's containers see the change), tuples rebuilt.
py::object tree_visit_update(py::handle tree,
                             const std::function<py::object(py::handle)>& f);

// The array leaves in order; with `strict`, any other leaf raises.
std::vector<fx::array> tree_flatten(py::handle tree, bool strict = true);

// `tree` with its array leaves replaced, in order, by values[index...].
py::object tree_unflatten(py::handle tree, const std::vector<fx::array>& values,
                          int index = 0);

// In-place version of tree_unflatten for the mutable containers.
void tree_fill(py::handle tree, const std::vector<fx::array>& values);

// Puts back dst[i] wherever the tree holds src[i] (compared by identity).
void tree_replace(py::handle tree, const std::vector<fx::array>& src,
                  const std::vector<fx::array>& dst);

// The arrays and the tree with a placeholder in their place.
std::pair<std::vector<fx::array>, py::object> tree_flatten_with_structure(
    py::handle tree, bool strict = true);
py::object tree_unflatten_from_structure(py::handle structure,
                                         const std::vector<fx::array>& values,
                                         int index = 0);

}  // namespace fxpy
