#include "python/src/trees.h"

#include <stdexcept>

namespace fxpy {

namespace {

// Marks where an array was in a structure; compared by identity.
py::handle placeholder() {
  static PyObject* p = [] {
    auto o = py::module_::import("builtins").attr("object")();
    return o.release().ptr();
  }();
  return p;
}

}  // namespace

py::object rebuild_tuple(py::handle like, py::tuple items) {
  if (PyTuple_CheckExact(like.ptr())) {
    return items;
  }
  // A tuple subclass keeps its type: NamedTuples take their fields as
  // positional arguments, other subclasses an iterable (as tuple does).
  py::handle type = py::type::handle_of(like);
  if (py::hasattr(type, "_fields") && py::hasattr(type, "_make")) {
    return type.attr("_make")(items);
  }
  return type(items);
}

void tree_visit(py::handle tree, const std::function<void(py::handle)>& visit) {
  if (PyList_Check(tree.ptr()) || PyTuple_Check(tree.ptr())) {
    for (auto item : tree) {
      tree_visit(item, visit);
    }
  } else if (PyDict_Check(tree.ptr())) {
    for (auto item : py::reinterpret_borrow<py::dict>(tree)) {
      tree_visit(item.second, visit);
    }
  } else {
    visit(tree);
  }
}

void tree_visit(
    const std::vector<py::object>& trees,
    const std::function<void(const std::vector<py::object>&)>& visit) {
  const py::object& t0 = trees[0];
  auto children = [&](auto&& child_of, bool (*same)(PyObject*), size_t size,
                      const char* kind) {
    for (size_t i = 0; i < size; ++i) {
      std::vector<py::object> items;
      items.reserve(trees.size());
      for (size_t k = 0; k < trees.size(); ++k) {
        if (k == 0 || same(trees[k].ptr())) {
          if (k > 0 && py::len(trees[k]) != size) {
            throw std::invalid_argument(
                std::string("[tree_visit] Can't visit ") + kind +
                " of different sizes.");
          }
          items.push_back(child_of(trees[k], i));
        } else {
          items.push_back(trees[k]);
        }
      }
      tree_visit(items, visit);
    }
  };
  auto seq_child = [](const py::object& t, size_t i) -> py::object {
    return t[py::int_(i)];
  };
  if (PyList_Check(t0.ptr())) {
    children(
        seq_child, [](PyObject* o) -> bool { return PyList_Check(o); },
        py::len(t0), "lists");
  } else if (PyTuple_Check(t0.ptr())) {
    children(
        seq_child, [](PyObject* o) -> bool { return PyTuple_Check(o); },
        py::len(t0), "tuples");
  } else if (PyDict_Check(t0.ptr())) {
    py::list keys = py::reinterpret_borrow<py::dict>(t0).attr("keys")();
    auto key_child = [&keys](const py::object& t, size_t i) -> py::object {
      py::object key = keys[i];
      if (!py::reinterpret_borrow<py::dict>(t).contains(key)) {
        throw std::invalid_argument(
            "[tree_visit] Can't visit dicts with different keys (missing " +
            py::repr(key).cast<std::string>() + ").");
      }
      return t[key];
    };
    children(
        key_child, [](PyObject* o) -> bool { return PyDict_Check(o); },
        py::len(keys), "dicts");
  } else {
    visit(trees);
  }
}

py::object tree_map(py::handle tree,
                    const std::function<py::object(py::handle)>& f) {
  if (PyList_Check(tree.ptr())) {
    py::list out;
    for (auto item : tree) {
      out.append(tree_map(item, f));
    }
    return out;
  }
  if (PyTuple_Check(tree.ptr())) {
    py::tuple t = py::reinterpret_borrow<py::tuple>(tree);
    py::tuple out(t.size());
    for (size_t i = 0; i < t.size(); ++i) {
      out[i] = tree_map(t[i], f);
    }
    return rebuild_tuple(tree, std::move(out));
  }
  if (PyDict_Check(tree.ptr())) {
    py::dict out;
    for (auto item : py::reinterpret_borrow<py::dict>(tree)) {
      out[item.first] = tree_map(item.second, f);
    }
    return out;
  }
  return f(tree);
}

py::object tree_visit_update(py::handle tree,
                             const std::function<py::object(py::handle)>& f) {
  if (PyList_Check(tree.ptr())) {
    py::list l = py::reinterpret_borrow<py::list>(tree);
    for (size_t i = 0; i < l.size(); ++i) {
      l[i] = tree_visit_update(l[i], f);
    }
    return l;
  }
  if (PyTuple_Check(tree.ptr())) {
    py::tuple t = py::reinterpret_borrow<py::tuple>(tree);
    py::tuple out(t.size());
    for (size_t i = 0; i < t.size(); ++i) {
      out[i] = tree_visit_update(t[i], f);
    }
    return rebuild_tuple(tree, std::move(out));
  }
  if (PyDict_Check(tree.ptr())) {
    py::dict d = py::reinterpret_borrow<py::dict>(tree);
    for (auto item : d) {
      d[item.first] = tree_visit_update(item.second, f);
    }
    return d;
  }
  if (array_ptr(tree)) {
    return f(tree);
  }
  return py::reinterpret_borrow<py::object>(tree);
}

std::vector<fx::array> tree_flatten(py::handle tree, bool strict) {
  std::vector<fx::array> out;
  tree_visit(tree, [&](py::handle leaf) {
    if (auto* a = array_ptr(leaf)) {
      out.push_back(*a);
    } else if (strict) {
      throw std::invalid_argument(
          "[tree_flatten] The argument should contain only arrays");
    }
  });
  return out;
}

py::object tree_unflatten(py::handle tree, const std::vector<fx::array>& values,
                          int index) {
  return tree_map(tree, [&](py::handle leaf) -> py::object {
    if (array_ptr(leaf)) {
      return py::cast(values.at(index++));
    }
    return py::reinterpret_borrow<py::object>(leaf);
  });
}

void tree_fill(py::handle tree, const std::vector<fx::array>& values) {
  size_t index = 0;
  tree_visit_update(tree, [&](py::handle) -> py::object {
    return py::cast(values.at(index++));
  });
}

void tree_replace(py::handle tree, const std::vector<fx::array>& src,
                  const std::vector<fx::array>& dst) {
  tree_visit_update(tree, [&](py::handle leaf) -> py::object {
    auto* a = array_ptr(leaf);
    for (size_t i = 0; i < src.size(); ++i) {
      if (a->id() == src[i].id()) {
        return py::cast(dst[i]);
      }
    }
    return py::reinterpret_borrow<py::object>(leaf);
  });
}

std::pair<std::vector<fx::array>, py::object> tree_flatten_with_structure(
    py::handle tree, bool strict) {
  std::vector<fx::array> arrays;
  auto structure = tree_map(tree, [&](py::handle leaf) -> py::object {
    if (auto* a = array_ptr(leaf)) {
      arrays.push_back(*a);
      return py::reinterpret_borrow<py::object>(placeholder());
    }
    if (strict) {
      throw std::invalid_argument(
          "[tree_flatten] The argument should contain only arrays");
    }
    return py::reinterpret_borrow<py::object>(leaf);
  });
  return {std::move(arrays), std::move(structure)};
}

py::object tree_unflatten_from_structure(py::handle structure,
                                         const std::vector<fx::array>& values,
                                         int index) {
  return tree_map(structure, [&](py::handle leaf) -> py::object {
    if (leaf.ptr() == placeholder().ptr()) {
      return py::cast(values.at(index++));
    }
    return py::reinterpret_borrow<py::object>(leaf);
  });
}

}  // namespace fxpy
