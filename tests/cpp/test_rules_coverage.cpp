// Coverage of the op table (op_cases.h; its drivers are in
// test_op_table.cpp): every primitive of the registry
// (fluxion/primitive_list.h) must appear in some case, a new primitive
// without a case fails `EveryPrimitiveIsCovered`; the registry's kernel
// columns; every node's output_shapes matches the built shapes; every
// primitive round-trips through export.
#include <iostream>
#include <set>

#include "fluxion/backend_interface.h"
#include "fluxion/compile.h"
#include "fluxion/eager.h"
#include "fluxion/export.h"
#include "fluxion/primitive_registry.h"
#include "op_cases.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

// Primitive names of the registry (fluxion/primitive_list.h). Every class
// is in it: the GPU kernels of backend/no_gpu are generated from the list,
// so a class missing from it fails to link.
std::set<std::string> registered_primitives() {
  std::set<std::string> names;
  for (auto& p : primitive_registry()) {
    names.insert(p.name);
  }
  // MLX's Metal kernel node cannot run on this build (no Metal): it has no
  // values, derivatives or vmap to check; test_metal_kernel.py covers it.
  names.erase("CustomKernel");
  // The distributed primitives exist only over a group of several
  // processes (over one, the ops add no node): tests/mpi runs them under
  // mpirun, values, gradients and vmap included.
  for (auto n : {"AllReduce", "AllGather", "ReduceScatter", "Send", "Recv"}) {
    names.erase(n);
  }
  return names;
}

// The nodes of case `c`'s graph (arrays with a primitive), each once,
// every node before its inputs. Collected before anything is evaluated:
// evaluation detaches the graph.
std::vector<array> graph_nodes(const OpCase& c) {
  std::vector<array> stack = c.f(case_inputs(c)), nodes;
  std::set<uintptr_t> visited;
  while (!stack.empty()) {
    array a = stack.back();
    stack.pop_back();
    if (!visited.insert(a.id()).second || !a.has_primitive()) {
      continue;
    }
    for (auto& in : a.inputs()) {
      stack.push_back(in);
    }
    nodes.push_back(a);
  }
  return nodes;
}

}  // namespace

TEST(RulesCoverage, EveryPrimitiveIsCovered) {
  // Graphs of computed arrays, kept lazy (fluxion/eager.h).
  fluxion::detail::EagerOff lazy_graphs;
  std::set<std::string> reached;
  for (auto& c : op_table()) {
    for (auto& a : graph_nodes(c)) {
      reached.insert(a.primitive().name());
    }
  }
  // Names as printed may carry parameters (Reduce prints Sum, Max...).
  for (auto n : {"Sum", "Prod", "Max", "Min", "All", "Any"}) {
    if (reached.count(n)) {
      reached.insert("Reduce");
    }
  }
  for (auto n : {"ArgMax", "ArgMin"}) {
    if (reached.count(n)) {
      reached.insert("ArgReduce");
    }
  }
  if (reached.count("NaNEqual")) {
    reached.insert("Equal");
  }
  auto registered = registered_primitives();
  std::vector<std::string> missing, unregistered;
  for (auto& name : registered) {
    if (!reached.count(name)) {
      missing.push_back(name);
    }
  }
  // Compiled appears only when a case is compiled.
  for (auto& name : reached) {
    if (!registered.count(name) && name != "Sum" && name != "Prod" &&
        name != "Max" && name != "Min" && name != "All" && name != "Any" &&
        name != "ArgMax" && name != "ArgMin" && name != "NaNEqual") {
      unregistered.push_back(name);
    }
  }
  EXPECT_TRUE(missing.empty()) << "primitives without an op-spec case: "
                               << ::testing::PrintToString(missing);
  EXPECT_TRUE(unregistered.empty())
      << "primitives missing from fluxion/primitive_list.h: "
      << ::testing::PrintToString(unregistered);
}

// Which primitives lack a kernel on each backend (the registry's columns;
// every one on a build without GPU backend). Printed for the record; the
// CPU has them all.
TEST(RulesCoverage, KernelsPerBackend) {
  auto cpu_missing = kernels_missing(Device::cpu);
  auto gpu_missing = kernels_missing(Device::gpu);
  std::cout << "[kernels] " << primitive_registry().size()
            << " primitives; without a cpu kernel: " << cpu_missing.size()
            << "; without a gpu kernel: " << gpu_missing.size() << "\n";
  for (auto& n : gpu_missing) {
    std::cout << "[kernels] no gpu kernel: " << n << "\n";
  }
  EXPECT_TRUE(cpu_missing.empty()) << ::testing::PrintToString(cpu_missing);
  if (!gpu_backend().built()) {
    EXPECT_EQ(gpu_missing.size(), primitive_registry().size());
  }
}

// Every primitive without a GPU kernel raises the clear error naming it
// from eval_gpu (the definitions generated from the registry), for every
// node the op table builds: without a GPU backend all of them ("Fluxion
// was built without a GPU backend"), with one those of the registry's
// GPU column 0 ("... on the gpu yet."). Runs without a GPU.
TEST(RulesCoverage, MissingGpuKernelsRaise) {
  // Graphs of computed arrays, kept lazy (fluxion/eager.h).
  fluxion::detail::EagerOff lazy_graphs;
  const bool built = gpu_backend().built();
  std::set<std::string> checked;
  for (auto& c : op_table()) {
    for (auto& a : graph_nodes(c)) {
      std::string n = a.primitive().name();
      if (!checked.insert(n).second) {
        continue;
      }
      if (built) {
        const PrimitiveInfo* info = find_primitive(n);
        if (info == nullptr || info->gpu) {
          continue;  // has a kernel (or is printed with its parameters)
        }
      }
      auto outs = a.outputs();
      try {
        a.primitive().eval_gpu(a.inputs(), outs);
        ADD_FAILURE() << n << ": eval_gpu returned";
      } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()),
                  "[eval] Cannot run " + n +
                      (built ? " on the gpu yet."
                             : " on the gpu: Fluxion was built without a "
                               "GPU backend."));
      }
    }
  }
  EXPECT_GE(checked.size(), primitive_registry().size() - 1);
}

// Every node's `output_shapes` (used by shapeless compile) must agree with
// the shapes the op built.
TEST(RulesCoverage, OutputShapesMatch) {
  for (auto& c : op_table()) {
    SCOPED_TRACE(c.name);
    for (auto& a : graph_nodes(c)) {
      auto shapes = a.primitive().output_shapes(a.inputs());
      auto outs = a.outputs();
      ASSERT_EQ(shapes.size(), outs.size()) << a.primitive().name();
      for (size_t i = 0; i < outs.size(); ++i) {
        EXPECT_EQ(shapes[i], outs[i].shape()) << a.primitive().name();
      }
    }
  }
}

// export_function: every primitive of the table has an exported form (name
// and parameters) that rebuilds an equivalent primitive computing the same
// values. Load (reads a file) and CustomTransforms (host callables) have
// none; Compiled is exported as the primitives it fuses.
TEST(RulesCoverage, ExportRoundTrip) {
  std::set<std::string> checked;
  for (auto& c : op_table()) {
    SCOPED_TRACE(c.name);
    // Record every node first: evaluating detaches the graph.
    struct Node {
      std::shared_ptr<Primitive> prim;
      std::vector<array> inputs, outputs;
    };
    std::vector<Node> nodes;
    for (auto& a : graph_nodes(c)) {
      nodes.push_back({a.primitive_ptr(), a.inputs(), a.outputs()});
    }
    for (auto& node : nodes) {
      const Primitive& prim = *node.prim;
      std::string n = prim.name();
      if (n == "Load" || n == "CustomTransforms" || n == "Compiled") {
        EXPECT_THROW(export_primitive(prim), std::invalid_argument) << n;
        continue;
      }
      auto [name, args] = export_primitive(prim);
      auto p = import_primitive(name, args, prim.stream());
      EXPECT_STREQ(p->name(), prim.name());
      EXPECT_TRUE(p->is_equivalent(prim)) << name;
      EXPECT_TRUE(prim.is_equivalent(*p)) << name;
      EXPECT_EQ(export_primitive(*p).second.size(), args.size()) << name;
      std::vector<Shape> shapes;
      std::vector<Dtype> dtypes;
      for (auto& o : node.outputs) {
        shapes.push_back(o.shape());
        dtypes.push_back(o.dtype());
      }
      auto rebuilt = array::make_arrays(shapes, dtypes, p, node.inputs);
      for (size_t i = 0; i < rebuilt.size(); ++i) {
        EXPECT_TRUE(
            array_equal(rebuilt[i], node.outputs[i], true).item<bool>())
            << name << " output " << i;
      }
      checked.insert(name);
    }
  }
  // Every name an exported file may hold was round-tripped, except those
  // no op case builds: CustomKernel (test_cuda_kernel_source.cpp and the
  // Python kernel tests round-trip it) and NaNEqual (array_equal's node;
  // ExportRegistry.SpecialNames round-trips it).
  for (auto& n : exported_primitive_names()) {
    if (n != "CustomKernel" && n != "NaNEqual") {
      EXPECT_TRUE(checked.count(n)) << n;
    }
  }
}
