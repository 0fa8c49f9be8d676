// eval / async_eval over pytrees, and the function transformations (grad, value_and_grad, vjp, jvp, vmap, custom_function,
// checkpoint, compile, and Fluxion's jacrev, jacfwd, hessian) over pytrees.
//
// The transformed functions are functools.partial objects around a C++
// function that captures no Python object: the user's callable is a
// partial argument, which the garbage collector can see, so a callable
// that refers to its own transformed version is still collected.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "python/src/convert.h"
#include "python/src/gil_release.h"
#include "python/src/transform_utils.h"
#include "python/src/trees.h"

namespace {

using fxpy::arrays_of;
using fxpy::rest;
using fxpy::type_name_str;
using fxpy::wrap;

using IntOrVec = std::variant<int, std::vector<int>>;
using StrOrSet = std::variant<std::string, std::vector<std::string>>;

// A Python object owned by C++ code that may outlive the call that made it
// (graph nodes hold transformation rules, and a graph may be released on a
// worker thread): the last owner lets it go under the GIL.
using PyRef = std::shared_ptr<py::object>;
PyRef hold(py::object o) {
  return PyRef(new py::object(std::move(o)), [](py::object* p) {
    fxpy::release_under_gil([p] { delete p; });
  });
}

std::pair<std::vector<int>, std::vector<std::string>> validate_argnums_argnames(
    const std::optional<IntOrVec>& argnums, const StrOrSet& argnames) {
  std::vector<std::string> names;
  if (auto* s = std::get_if<std::string>(&argnames)) {
    names = {*s};
  } else {
    for (auto& s : std::get<std::vector<std::string>>(argnames)) {
      if (std::find(names.begin(), names.end(), s) == names.end()) {
        names.push_back(s);
      }
    }
  }
  if (!argnums) {
    return {names.empty() ? std::vector<int>{0} : std::vector<int>{}, names};
  }
  if (auto* i = std::get_if<int>(&*argnums)) {
    return {{*i}, names};
  }
  return {std::get<std::vector<int>>(*argnums), names};
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// value_and_grad's call: args[0] is the function, the rest its arguments.
py::object value_and_grad_call(const std::vector<int>& argnums,
                               const std::vector<std::string>& argnames,
                               const std::string& tag, bool scalar_only,
                               const py::args& all_args,
                               const py::kwargs& kwargs) {
  py::object fun = all_args[0];
  py::tuple args = rest(all_args, 1);
  if (!argnums.empty() && argnums.back() >= static_cast<int>(args.size())) {
    std::ostringstream msg;
    msg << tag << " Can't compute the gradient of argument index "
        << argnums.back() << " because the function is called with only "
        << args.size() << " positional arguments.";
    throw std::invalid_argument(msg.str());
  }
  for (auto& key : argnames) {
    if (!kwargs.contains(key)) {
      std::ostringstream msg;
      msg << tag << " Can't compute the gradient of keyword argument '" << key
          << "' because the function is called with the "
          << "following keyword arguments {";
      for (auto item : kwargs) {
        msg << py::str(item.first).cast<std::string>() << ",";
      }
      msg << "}";
      throw std::invalid_argument(msg.str());
    }
  }

  // Every array of the arguments is an input of the traced function (so
  // that arrays shared between arguments stay one node); only those of the
  // differentiated arguments get gradients.
  std::vector<fx::array> arrays;
  std::vector<py::object> array_objects;
  auto collect = [&](py::handle tree, bool strict) {
    fxpy::tree_visit(tree, [&](py::handle obj) {
      if (auto* a = fxpy::array_ptr(obj)) {
        arrays.push_back(*a);
        array_objects.push_back(py::reinterpret_borrow<py::object>(obj));
      } else if (strict) {
        throw std::invalid_argument(
            "[tree_flatten] The argument should contain only arrays");
      }
    });
  };
  std::vector<int> counts(1, 0);
  std::vector<int> gradient_indices;
  auto mark = [&](size_t pre_size) {
    size_t n = arrays.size() - pre_size;
    for (size_t k = 0; k < n; ++k) {
      gradient_indices.push_back(static_cast<int>(pre_size + k));
    }
    counts.push_back(static_cast<int>(n));
  };
  for (size_t i = 0, j = 0; i < args.size(); ++i) {
    bool needs_grad = j < argnums.size() && argnums[j] == static_cast<int>(i);
    size_t pre = arrays.size();
    collect(args[i], needs_grad);
    if (needs_grad) {
      mark(pre);
      j++;
    }
  }
  for (auto item : kwargs) {
    bool needs_grad = contains(argnames, py::str(item.first));
    size_t pre = arrays.size();
    collect(item.second, needs_grad);
    if (needs_grad) {
      mark(pre);
    }
  }
  std::partial_sum(counts.begin(), counts.end(), counts.begin());
  // The gradients take the structure the differentiated arguments have
  // now: `fun` may add entries to its argument dicts and lists (the
  // additions stay there, but get no gradient).
  std::vector<py::object> grad_structures;
  for (int i : argnums) {
    grad_structures.push_back(
        fxpy::tree_flatten_with_structure(args[i], false).second);
  }
  for (auto item : kwargs) {
    if (contains(argnames, py::str(item.first))) {
      grad_structures.push_back(
          fxpy::tree_flatten_with_structure(item.second, false).second);
    }
  }

  py::object py_value_out;
  auto traced = [&](const std::vector<fx::array>& a) {
    py::list tree;
    tree.append(args);
    tree.append(kwargs);
    fxpy::tree_fill(tree, a);
    py::tuple targs = tree[0];
    py::dict tkwargs = tree[1];
    // Whatever happens in `fun`, the caller's containers get their arrays
    // back wherever they still hold the traced ones (matched by identity:
    // `fun` may have added, removed or reordered entries; what it stored
    // there stays).
    std::unordered_map<uintptr_t, size_t> traced_index;
    for (size_t i = 0; i < a.size(); ++i) {
      traced_index.emplace(a[i].id(), i);
    }
    auto restore = [&] {
      fxpy::tree_visit_update(tree, [&](py::handle node) -> py::object {
        auto it = traced_index.find(fxpy::array_ptr(node)->id());
        if (it != traced_index.end()) {
          return array_objects[it->second];
        }
        return py::reinterpret_borrow<py::object>(node);
      });
    };
    try {
      py_value_out = fun(*targs, **tkwargs);
    } catch (...) {
      restore();
      throw;
    }
    restore();
    if (!fxpy::array_ptr(py_value_out)) {
      if (scalar_only) {
        std::ostringstream msg;
        msg << tag << " The return value of the function "
            << "whose gradient we want to compute should be a "
            << "scalar array; but " << type_name_str(py_value_out)
            << " was returned.";
        throw std::invalid_argument(msg.str());
      }
      if (!py::isinstance<py::tuple>(py_value_out)) {
        std::ostringstream msg;
        msg << tag << " The return value of the function "
            << "whose gradient we want to compute should be either a "
            << "scalar array or a tuple with the first value being a "
            << "scalar array (Union[array, tuple[array, Any, ...]]); but "
            << type_name_str(py_value_out) << " was returned.";
        throw std::invalid_argument(msg.str());
      }
      py::tuple ret = py_value_out;
      if (ret.size() == 0) {
        std::ostringstream msg;
        msg << tag << " The return value of the function "
            << "whose gradient we want to compute should be either a "
            << "scalar array or a non-empty tuple. The first value should be "
            << "a scalar array and the rest can be anything. Instead, "
            << "we got an empty tuple.";
        throw std::invalid_argument(msg.str());
      }
      if (!fxpy::array_ptr(ret[0])) {
        std::ostringstream msg;
        msg << tag << " The return value of the function "
            << "whose gradient we want to compute should be either a "
            << "scalar array or a tuple with the first value being a "
            << "scalar array (Union[array, tuple[array, Any, ...]]); but it "
            << "was a tuple with the first value being of type "
            << type_name_str(ret[0]) << " .";
        throw std::invalid_argument(msg.str());
      }
    }
    return fxpy::tree_flatten(py_value_out, false);
  };
  // Named objects, not structured bindings: the lambda below uses them
  // (clang < 16 cannot capture bindings).
  auto value_and_gradients =
      fx::value_and_grad(traced, gradient_indices)(arrays);
  const auto& value = value_and_gradients.first;
  const auto& gradients = value_and_gradients.second;

  auto grads_of = [&](size_t i) {
    return fxpy::tree_unflatten_from_structure(grad_structures[i], gradients,
                                               counts[i]);
  };
  py::object positional;
  if (argnums.size() == 1) {
    positional = grads_of(0);
  } else if (argnums.size() > 1) {
    py::tuple g(argnums.size());
    for (size_t i = 0; i < argnums.size(); ++i) {
      g[i] = grads_of(i);
    }
    positional = std::move(g);
  } else {
    positional = py::none();
  }
  py::object grads;
  if (argnames.empty()) {
    grads = positional;
  } else {
    py::dict kw;
    size_t i = 0;
    for (auto item : kwargs) {
      if (contains(argnames, py::str(item.first))) {
        kw[item.first] = grads_of(argnums.size() + i++);
      }
    }
    grads = py::make_tuple(positional, kw);
  }
  py::object ret = fxpy::tree_unflatten(py_value_out, value);
  if (scalar_only) {
    return grads;
  }
  return py::make_tuple(ret, grads);
}

py::object make_value_and_grad(const py::function& fun,
                               const std::optional<IntOrVec>& argnums_in,
                               const StrOrSet& argnames_in,
                               const std::string& tag, bool scalar_only) {
  auto [argnums, argnames] = validate_argnums_argnames(argnums_in, argnames_in);
  if (argnums.empty() && argnames.empty()) {
    throw std::invalid_argument(tag + " Gradient wrt no argument requested");
  }
  std::sort(argnums.begin(), argnums.end());
  if (!argnums.empty() && argnums[0] < 0) {
    std::ostringstream msg;
    msg << tag << " Can't compute the gradient of negative argument index "
        << argnums[0];
    throw std::invalid_argument(msg.str());
  }
  for (size_t i = 1; i < argnums.size(); ++i) {
    if (argnums[i] == argnums[i - 1]) {
      std::ostringstream msg;
      msg << tag << " Duplicate argument index " << argnums[i]
          << " is not allowed.";
      throw std::invalid_argument(msg.str());
    }
  }
  py::cpp_function impl(
      [argnums = argnums, argnames = argnames, tag, scalar_only](
          const py::args& args, const py::kwargs& kwargs) {
        return value_and_grad_call(argnums, argnames, tag, scalar_only, args,
                                   kwargs);
      });
  return wrap(impl, fun);
}

// `fun(*primals)` as a C++ function of arrays: an array or a list of
// arrays comes back.
fx::Fn array_fn(const py::function& fun) {
  return [&fun](const std::vector<fx::array>& primals) {
    py::tuple args(primals.size());
    for (size_t i = 0; i < primals.size(); ++i) {
      args[i] = py::cast(primals[i]);
    }
    py::object out = fun(*args);
    if (auto* a = fxpy::array_ptr(out)) {
      return std::vector<fx::array>{*a};
    }
    return out.cast<std::vector<fx::array>>();
  };
}

// One axis per array of `tree`, from the prefix tree `axes` (-1: unmapped).
std::vector<int> axes_to_flat_tree(const py::object& tree,
                                   const py::object& axes, bool output_axes) {
  std::vector<int> flat_axes;
  bool encountered_tuple = false;
  auto check_axis = [&](int axis, const fx::array& x) {
    int limit = static_cast<int>(x.ndim()) + (output_axes ? 1 : 0);
    if (axis < 0) {
      axis += limit;
    }
    if (axis < 0 || axis >= limit) {
      std::ostringstream msg;
      msg << "[vmap] Invalid" << (output_axes ? " output " : " ")
          << "vectorization axis " << axis << " for array with shape "
          << fx::shape_str(x.shape());
      throw std::invalid_argument(msg.str());
    }
    return axis;
  };
  fxpy::tree_visit({tree, axes}, [&](const std::vector<py::object>& in) {
    auto* x = fxpy::array_ptr(in[0]);
    if (!x) {
      throw std::invalid_argument(
          "[vmap] The arguments should contain only arrays");
    }
    if (in[1].is_none()) {
      flat_axes.push_back(-1);
    } else if (PyLong_Check(in[1].ptr()) && !PyBool_Check(in[1].ptr())) {
      flat_axes.push_back(check_axis(in[1].cast<int>(), *x));
    } else if (py::isinstance<py::tuple>(in[1])) {
      encountered_tuple = true;
      py::tuple l = in[1];
      if (l.size() == 1 && PyLong_Check(l[0].ptr())) {
        flat_axes.push_back(check_axis(l[0].cast<int>(), *x));
      } else if (l.size() == 1 && l[0].is_none()) {
        flat_axes.push_back(-1);
      } else {
        throw std::invalid_argument("[vmap] axis must be int or None.");
      }
    } else {
      throw std::invalid_argument("[vmap] axis must be int or None.");
    }
  });
  if (encountered_tuple && !fxpy::array_ptr(tree)) {
    throw std::invalid_argument("[vmap] axis must be int or None.");
  }
  return flat_axes;
}

py::object vmap_call(const py::args& all_args) {
  py::object fun = all_args[0];
  py::object in_axes = all_args[1];
  py::object out_axes = all_args[2];
  py::tuple args = rest(all_args, 3);
  auto inputs = fxpy::tree_flatten(args, true);
  auto flat_in_axes = axes_to_flat_tree(
      args.size() == 1 ? py::object(args[0]) : py::object(args), in_axes,
      false);
  py::object py_outputs;
  auto vmap_fn = [&](const std::vector<fx::array>& a) {
    py::tuple targs = fxpy::tree_unflatten(args, a);
    py_outputs = fun(*targs);
    return fxpy::tree_flatten(py_outputs, true);
  };
  auto [trace_inputs, trace_outputs] =
      fx::detail::vmap_trace(vmap_fn, inputs, flat_in_axes);
  auto flat_out_axes = axes_to_flat_tree(py_outputs, out_axes, true);
  auto outputs = fx::detail::vmap_replace(inputs, trace_inputs, trace_outputs,
                                          flat_in_axes, flat_out_axes);
  return fxpy::tree_unflatten(py_outputs, outputs);
}

// --- custom_function ---

// Calls a Python function on arrays laid out as a structure of
// (args, kwargs); the outputs' structure is recorded for the rules.
struct InnerFunction {
  PyRef fun, input_structure;
  std::shared_ptr<PyRef> output_structure;
  std::vector<fx::array> operator()(const std::vector<fx::array>& inputs) {
    py::gil_scoped_acquire gil;
    py::tuple in =
        fxpy::tree_unflatten_from_structure(*input_structure, inputs);
    auto [outputs, structure] = fxpy::tree_flatten_with_structure(
        (*fun)(*py::tuple(in[0]), **py::dict(in[1])), false);
    *output_structure = hold(std::move(structure));
    return outputs;
  }
};

struct InnerVjp {
  PyRef vjp, input_structure;
  std::shared_ptr<PyRef> output_structure;
  std::vector<fx::array> operator()(const std::vector<fx::array>& primals,
                                    const std::vector<fx::array>& cotangents,
                                    const std::vector<fx::array>& outputs) {
    py::gil_scoped_acquire gil;
    py::tuple in =
        fxpy::tree_unflatten_from_structure(*input_structure, primals);
    py::tuple args = in[0];
    py::dict kwargs = in[1];
    auto cts =
        fxpy::tree_unflatten_from_structure(**output_structure, cotangents);
    auto outs =
        fxpy::tree_unflatten_from_structure(**output_structure, outputs);
    py::object r = args.size() == 1 ? (*vjp)(args[0], cts, outs, **kwargs)
                                    : (*vjp)(args, cts, outs, **kwargs);
    return fxpy::tree_flatten(r, false);
  }
};

struct InnerJvp {
  PyRef jvp, input_structure;
  std::vector<fx::array> operator()(const std::vector<fx::array>& primals,
                                    const std::vector<fx::array>& tangents,
                                    const std::vector<int>& argnums) {
    py::gil_scoped_acquire gil;
    py::tuple in =
        fxpy::tree_unflatten_from_structure(*input_structure, primals);
    py::tuple args = in[0];
    if (py::len(in[1]) > 0) {
      throw std::invalid_argument(
          "[custom jvp] Function should only accept positional arguments");
    }
    std::vector<bool> have(primals.size(), false);
    for (int a : argnums) {
      have[a] = true;
    }
    size_t ai = 0, ti = 0;
    py::tuple t = fxpy::tree_map(args, [&](py::handle e) -> py::object {
      if (fxpy::array_ptr(e) && have[ai++]) {
        return py::cast(tangents[ti++]);
      }
      return py::none();
    });
    py::object r = args.size() == 1 ? (*jvp)(args[0], t[0]) : (*jvp)(args, t);
    return fxpy::tree_flatten(r, false);
  }
};

struct InnerVmap {
  PyRef vmap, input_structure;
  std::pair<std::vector<fx::array>, std::vector<int>> operator()(
      const std::vector<fx::array>& inputs, const std::vector<int>& axes) {
    py::gil_scoped_acquire gil;
    py::tuple in =
        fxpy::tree_unflatten_from_structure(*input_structure, inputs);
    py::tuple args = in[0];
    if (py::len(in[1]) > 0) {
      throw std::invalid_argument(
          "[custom vmap] Function should only accept positional arguments");
    }
    size_t ai = 0;
    py::tuple new_axes = fxpy::tree_map(args, [&](py::handle e) -> py::object {
      if (!fxpy::array_ptr(e)) {
        return py::none();
      }
      int axis = axes[ai++];
      return axis >= 0 ? py::object(py::int_(axis)) : py::object(py::none());
    });
    py::object result = args.size() == 1 ? (*vmap)(args[0], new_axes[0])
                                         : (*vmap)(args, new_axes);
    if (!py::isinstance<py::tuple>(result) || py::len(result) != 2) {
      throw std::invalid_argument(
          "[custom vmap] Vmap function should return a tuple with 2 items.");
    }
    py::tuple rt = result;
    std::vector<fx::array> outputs;
    std::vector<int> out_axes;
    fxpy::tree_visit({rt[0], rt[1]}, [&](const std::vector<py::object>& o) {
      if (auto* a = fxpy::array_ptr(o[0])) {
        outputs.push_back(*a);
        out_axes.push_back(o[1].is_none() ? -1 : o[1].cast<int>());
      }
    });
    return {outputs, out_axes};
  }
};

// The state of a custom_function; the garbage collector sees its
// callables through the type's tp_traverse.
struct PyCustomFunction {
  py::object fun, vjp, jvp, vmap;

  py::object call(const py::args& args, const py::kwargs& kwargs) {
    if (vjp.is_none() && jvp.is_none() && vmap.is_none()) {
      return fun(*args, **kwargs);
    }
    auto [input_arrays, structure] =
        fxpy::tree_flatten_with_structure(py::make_tuple(args, kwargs), false);
    PyRef input_structure = hold(std::move(structure));
    auto output_structure = std::make_shared<PyRef>();
    std::optional<fx::VjpFn> v;
    std::optional<fx::JvpFn> j;
    std::optional<fx::VmapFn> m;
    if (!vjp.is_none()) {
      v = InnerVjp{hold(vjp), input_structure, output_structure};
    }
    if (!jvp.is_none()) {
      j = InnerJvp{hold(jvp), input_structure};
    }
    if (!vmap.is_none()) {
      m = InnerVmap{hold(vmap), input_structure};
    }
    auto f = fx::custom_function(
        InnerFunction{hold(fun), input_structure, output_structure}, v, j, m);
    auto outputs = f(input_arrays);
    return fxpy::tree_unflatten_from_structure(**output_structure, outputs);
  }
};

int custom_function_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  auto* inst = reinterpret_cast<py::detail::instance*>(self);
  auto vh = inst->get_value_and_holder();
  if (!vh.holder_constructed()) {
    return 0;
  }
  auto* p = vh.value_ptr<PyCustomFunction>();
  Py_VISIT(p->fun.ptr());
  Py_VISIT(p->vjp.ptr());
  Py_VISIT(p->jvp.ptr());
  Py_VISIT(p->vmap.ptr());
  return 0;
}

int custom_function_clear(PyObject* self) {
  auto* inst = reinterpret_cast<py::detail::instance*>(self);
  auto vh = inst->get_value_and_holder();
  if (!vh.holder_constructed()) {
    return 0;
  }
  auto* p = vh.value_ptr<PyCustomFunction>();
  p->fun = py::none();
  p->vjp = py::none();
  p->jvp = py::none();
  p->vmap = py::none();
  return 0;
}

// --- checkpoint ---

py::object checkpoint_call(const py::args& all_args, const py::kwargs& kwargs) {
  py::object fun = all_args[0];
  py::tuple args = rest(all_args, 1);
  auto [inputs, structure] =
      fxpy::tree_flatten_with_structure(py::make_tuple(args, kwargs), false);
  auto output_structure = std::make_shared<PyRef>();
  // The graph keeps the function for the recomputation in the backward
  // pass; the output structure is only needed here.
  fx::Fn inner = [fun = hold(fun), in = hold(std::move(structure)),
                  out = std::weak_ptr<PyRef>(output_structure)](
                     const std::vector<fx::array>& a) {
    py::gil_scoped_acquire gil;
    py::tuple t = fxpy::tree_unflatten_from_structure(*in, a);
    auto [outputs, s] = fxpy::tree_flatten_with_structure(
        (*fun)(*py::tuple(t[0]), **py::dict(t[1])), false);
    if (auto o = out.lock()) {
      *o = hold(std::move(s));
    }
    return outputs;
  };
  auto outputs = fx::checkpoint(inner)(inputs);
  return fxpy::tree_unflatten_from_structure(**output_structure, outputs);
}

// --- Jacobians (Fluxion extras) ---

std::vector<int> jac_argnums(const IntOrVec& argnums, size_t n,
                             const char* tag) {
  std::vector<int> v;
  if (auto* i = std::get_if<int>(&argnums)) {
    v = {*i};
  } else {
    v = std::get<std::vector<int>>(argnums);
  }
  if (v.empty()) {
    throw std::invalid_argument(std::string(tag) +
                                " Gradient wrt no argument requested");
  }
  for (int& a : v) {
    int orig = a;
    if (a < 0) {
      a += static_cast<int>(n);
    }
    if (a < 0 || a >= static_cast<int>(n)) {
      std::ostringstream msg;
      msg << tag << " Invalid argument number " << orig
          << " for a function called with " << n << " arguments.";
      throw std::invalid_argument(msg.str());
    }
  }
  return v;
}

// all_args: fun, argnums, then the arrays.
template <fx::Fn (*Transform)(const fx::Fn&, const std::vector<int>&)>
py::object jacobian_call(const char* tag, const py::args& all_args) {
  py::function fun = all_args[0];
  py::object argnums_obj = all_args[1];
  py::tuple args = rest(all_args, 2);
  std::vector<fx::array> primals;
  for (auto a : args) {
    auto* p = fxpy::array_ptr(a);
    if (!p) {
      std::ostringstream msg;
      msg << tag << " Arguments must be arrays; got " << type_name_str(a)
          << ".";
      throw std::invalid_argument(msg.str());
    }
    primals.push_back(*p);
  }
  auto argnums = jac_argnums(argnums_obj.cast<IntOrVec>(), primals.size(), tag);
  auto out = Transform(array_fn(fun), argnums)(primals);
  if (PyLong_Check(argnums_obj.ptr())) {
    return py::cast(out[0]);
  }
  return py::tuple(py::cast(out));
}

fx::Fn hessian_fn(const fx::Fn& f, const std::vector<int>& argnums) {
  return fx::hessian(f, argnums);
}
fx::Fn jacrev_fn(const fx::Fn& f, const std::vector<int>& argnums) {
  return fx::jacrev(f, argnums);
}
fx::Fn jacfwd_fn(const fx::Fn& f, const std::vector<int>& argnums) {
  return fx::jacfwd(f, argnums);
}

}  // namespace

void init_transforms(py::module_& m) {
  m.def(
      "eval",
      [](const py::args& args) {
        auto arrays = arrays_of(args);
        py::gil_scoped_release nogil;
        fx::eval(std::move(arrays));
      },
      R"doc(Evaluate arrays: compute them and wait until they are ready.

Arrays are lazy: ops build a graph, and ``eval`` runs it. Printing an array,
``item()``, ``tolist()`` and conversion to NumPy evaluate implicitly.

Args:
    *args (array or tree of arrays): Arrays, or lists, tuples and dicts of
        them; other leaves are ignored.

Example:
    >>> a = mx.ones((2,)) + 1   # not computed yet
    >>> mx.eval(a)              # computed now
)doc");
  m.def(
      "async_eval",
      [](const py::args& args) {
        auto arrays = arrays_of(args);
        py::gil_scoped_release nogil;
        fx::async_eval(std::move(arrays));
      },
      R"doc(Schedule the evaluation of arrays and return at once.

Reading a result (``item()``, ``tolist()``) or a later :func:`eval` waits
for it.

Args:
    *args (array or tree of arrays): Arrays, or lists, tuples and dicts of
        them; other leaves are ignored.
)doc");

  m.def(
      "jvp",
      [](const py::function& fun, const std::vector<fx::array>& primals,
         const std::vector<fx::array>& tangents) {
        return fx::jvp(array_fn(fun), primals, tangents);
      },
      "fun"_a, "primals"_a, "tangents"_a,
      R"doc(Jacobian-vector product: forward-mode derivative of ``fun``.

Args:
    fun (Callable): A function of arrays returning an array or a list of
        arrays.
    primals (list(array)): The arguments at which to differentiate.
    tangents (list(array)): One tangent per primal, of its shape.

Returns:
    tuple(list(array), list(array)): The outputs ``fun(*primals)`` and
    their tangents.

Example:
    >>> out, t = mx.jvp(lambda x: x * x, [mx.array(3.0)], [mx.array(1.0)])
    >>> t[0].item()
    6.0
)doc");
  m.def(
      "vjp",
      [](const py::function& fun, const std::vector<fx::array>& primals,
         const std::vector<fx::array>& cotangents) {
        return fx::vjp(array_fn(fun), primals, cotangents);
      },
      "fun"_a, "primals"_a, "cotangents"_a,
      R"doc(Vector-Jacobian product: reverse-mode derivative of ``fun``.

Args:
    fun (Callable): A function of arrays returning an array or a list of
        arrays.
    primals (list(array)): The arguments at which to differentiate.
    cotangents (list(array)): One cotangent per output, of its shape.

Returns:
    tuple(list(array), list(array)): The outputs ``fun(*primals)`` and one
    cotangent per primal. Complex arrays follow MLX's (PyTorch's)
    convention: a holomorphic ``f`` gives ``ct * conj(f'(z))``.
)doc");
  m.def(
      "value_and_grad",
      [](const py::function& fun, const std::optional<IntOrVec>& argnums,
         const StrOrSet& argnames) {
        return make_value_and_grad(fun, argnums, argnames, "[value_and_grad]",
                                   false);
      },
      "fun"_a, "argnums"_a = py::none(),
      "argnames"_a = std::vector<std::string>{},
      R"doc(Make a function that returns ``fun``'s value and its gradients.

``fun`` returns a scalar array, or a tuple whose first item is the scalar
loss and whose other items are auxiliary outputs (returned, not
differentiated). Arguments may be trees of arrays; the gradients have their
structure.

Args:
    fun (Callable): The function to differentiate.
    argnums (int or list(int), optional): The positional arguments to
        differentiate with respect to; 0 when neither this nor
        ``argnames`` is given.
    argnames (str or list(str), optional): Keyword arguments to
        differentiate with respect to.

Returns:
    Callable: A function taking ``fun``'s arguments and returning
    ``(value, grads)``: ``grads`` is one argument's tree, a tuple of them
    for several ``argnums``, or ``(positional, {name: tree})`` with
    ``argnames``.

Example:
    >>> f = mx.value_and_grad(lambda x: (x * x).sum())
    >>> value, g = f(mx.array([1.0, 2.0]))
    >>> g.tolist()
    [2.0, 4.0]
)doc");
  m.def(
      "grad",
      [](const py::function& fun, const std::optional<IntOrVec>& argnums,
         const StrOrSet& argnames) {
        return make_value_and_grad(fun, argnums, argnames, "[grad]", true);
      },
      "fun"_a, "argnums"_a = py::none(),
      "argnames"_a = std::vector<std::string>{},
      R"doc(Make a function that returns the gradients of the scalar ``fun``.

Args:
    fun (Callable): The function to differentiate; it returns a scalar
        array.
    argnums (int or list(int), optional): The positional arguments to
        differentiate with respect to; 0 when neither this nor
        ``argnames`` is given.
    argnames (str or list(str), optional): Keyword arguments to
        differentiate with respect to.

Returns:
    Callable: A function taking ``fun``'s arguments and returning the
    gradients, structured as in :func:`value_and_grad`. For a complex
    argument ``z = x + iy`` of a real ``fun``: ``df/dx + i df/dy`` (MLX's
    and PyTorch's convention; JAX's is the conjugate).

Example:
    >>> mx.grad(lambda x: x ** 3)(mx.array(2.0)).item()
    12.0
)doc");
  m.def(
      "vmap",
      [](const py::function& fun, const py::object& in_axes,
         const py::object& out_axes) {
        return wrap(py::cpp_function(&vmap_call), fun, in_axes, out_axes);
      },
      "fun"_a, "in_axes"_a = 0, "out_axes"_a = 0,
      R"doc(Vectorize a function over an axis of its arguments.

Args:
    fun (Callable): A function of (trees of) arrays.
    in_axes (int, None or tree, optional): The mapped axis of each
        argument: an int, ``None`` (not mapped), or a prefix tree of the
        arguments. Default 0.
    out_axes (int, None or tree, optional): Where each output's mapped
        axis goes, likewise. Default 0.

Returns:
    Callable: The vectorized function.

Example:
    >>> dot = lambda a, b: (a * b).sum()
    >>> mx.vmap(dot)(mx.ones((4, 3)), mx.ones((4, 3))).shape
    (4,)
)doc");

  py::class_<PyCustomFunction>(
      m, "custom_function",
      py::custom_type_setup([](PyHeapTypeObject* heap_type) {
        auto* type = &heap_type->ht_type;
        type->tp_flags |= Py_TPFLAGS_HAVE_GC;
        type->tp_traverse = custom_function_traverse;
        type->tp_clear = custom_function_clear;
      }),
      "Decorator giving a function custom vjp, jvp or vmap rules "
      "(``@f.vjp``, ``@f.jvp``, ``@f.vmap``); the rules not given are "
      "derived from the function.")
      .def(py::init([](py::function f) {
             return PyCustomFunction{f, py::none(), py::none(), py::none()};
           }),
           "f"_a)
      .def("__call__", &PyCustomFunction::call)
      .def(
          "vjp",
          [](py::object self, py::function f) {
            self.cast<PyCustomFunction&>().vjp = f;
            return self;
          },
          "f"_a,
          R"doc(Set the vjp rule of the function.

Args:
    f (Callable): ``f(primals, cotangents, outputs)`` returns a cotangent
        per primal (``primals`` is the sole argument when there is one,
        else a tuple), in :func:`vjp`'s convention for complex arrays.

Returns:
    custom_function: The function itself (so it works as a decorator).
)doc")
      .def(
          "jvp",
          [](py::object self, py::function f) {
            self.cast<PyCustomFunction&>().jvp = f;
            return self;
          },
          "f"_a,
          R"doc(Set the jvp rule of the function.

Args:
    f (Callable): ``f(primals, tangents)`` returns the output tangents;
        tangents of arguments not differentiated are ``None``.

Returns:
    custom_function: The function itself (so it works as a decorator).
)doc")
      .def(
          "vmap",
          [](py::object self, py::function f) {
            self.cast<PyCustomFunction&>().vmap = f;
            return self;
          },
          "f"_a,
          R"doc(Set the vmap rule of the function.

Args:
    f (Callable): ``f(inputs, axes)`` returns ``(outputs, out_axes)``;
        unmapped inputs have axis ``None``.

Returns:
    custom_function: The function itself (so it works as a decorator).
)doc");

  m.def(
      "checkpoint",
      [](const py::function& fun) {
        return wrap(py::cpp_function(&checkpoint_call), fun);
      },
      "fun"_a,
      R"doc(Make ``fun`` recompute its intermediate values in the backward pass.

Gradients through the result need less memory for more computation.

Args:
    fun (Callable): A function of arrays.

Returns:
    Callable: A function equal to ``fun``.
)doc");

  m.def(
      "jacrev",
      [](const py::function& fun, const IntOrVec& argnums) {
        return wrap(py::cpp_function([](const py::args& a) {
                      return jacobian_call<jacrev_fn>("[jacrev]", a);
                    }),
                    fun, py::cast(argnums));
      },
      "fun"_a, "argnums"_a = 0,
      R"doc(The Jacobian of a function by reverse mode (a Fluxion extension).

Args:
    fun (Callable): A function of arrays; its first output is
        differentiated.
    argnums (int or list(int), optional): The argument(s) to
        differentiate with respect to. Default 0.

Returns:
    Callable: A function returning ``jac`` with shape
    ``out.shape + arg.shape`` (a tuple of them for a list of argnums).
    For complex arrays: the holomorphic Jacobian ``df/dz`` (not conjugated
    as :func:`vjp` is), equal to :func:`jacfwd`'s for a holomorphic
    ``fun``.
)doc");
  m.def(
      "jacfwd",
      [](const py::function& fun, const IntOrVec& argnums) {
        return wrap(py::cpp_function([](const py::args& a) {
                      return jacobian_call<jacfwd_fn>("[jacfwd]", a);
                    }),
                    fun, py::cast(argnums));
      },
      "fun"_a, "argnums"_a = 0,
      R"doc(The Jacobian of a function by forward mode (a Fluxion extension).

Args:
    fun (Callable): A function of arrays; its first output is
        differentiated.
    argnums (int or list(int), optional): The argument(s) to
        differentiate with respect to. Default 0.

Returns:
    Callable: A function returning the Jacobian, laid out as
    :func:`jacrev`'s.
)doc");
  m.def(
      "hessian",
      [](const py::function& fun, const IntOrVec& argnums) {
        return wrap(py::cpp_function([](const py::args& a) {
                      return jacobian_call<hessian_fn>("[hessian]", a);
                    }),
                    fun, py::cast(argnums));
      },
      "fun"_a, "argnums"_a = 0,
      R"doc(The Hessian of a scalar function, forward over reverse (a Fluxion extension).

Args:
    fun (Callable): A function of arrays returning a scalar.
    argnums (int or list(int), optional): The argument(s) to
        differentiate with respect to. Default 0.

Returns:
    Callable: A function returning ``h`` with shape
    ``arg.shape + arg.shape``.
)doc");
}
