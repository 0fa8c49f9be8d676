#include "fluxion/ops/custom.h"

#include <algorithm>

#include "fluxion/ops/creation.h"
#include "fluxion/primitive_args.h"

namespace fluxion {

std::vector<array> depends(const std::vector<array>& inputs,
                           const std::vector<array>& dependencies) {
  std::vector<array> all = inputs;
  all.insert(all.end(), dependencies.begin(), dependencies.end());
  Stream s = inputs.empty() || !inputs[0].has_primitive()
                 ? to_stream({})
                 : inputs[0].primitive().stream();
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  for (auto& in : inputs) {
    shapes.push_back(in.shape());
    dtypes.push_back(in.dtype());
  }
  return array::make_arrays(std::move(shapes), dtypes,
                            std::make_shared<Depends>(s, static_cast<int>(inputs.size())),
                            all);
}

// Gradients flow to the passed-through inputs only.
std::vector<array> Depends::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums,
                                const std::vector<array>& outputs) {
  std::vector<array> vjps;
  for (int a : argnums) {
    if (a < static_cast<int>(cotangents.size())) {
      vjps.push_back(cotangents[a]);
    } else {
      vjps.push_back(zeros_like(primals[a]));
    }
  }
  return vjps;
}

// The pass-through inputs are the first `outputs` ones; the rest only order
// evaluation and carry no derivative.
std::vector<array> Depends::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>& argnums) {
  size_t n = num_passed_;
  std::vector<array> out;
  for (size_t i = 0; i < n; ++i) {
    auto it = std::find(argnums.begin(), argnums.end(), static_cast<int>(i));
    out.push_back(it != argnums.end() ? tangents[it - argnums.begin()]
                                      : zeros_like(primals[i]));
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> Depends::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  size_t n = num_passed_;
  std::vector<array> pass(inputs.begin(), inputs.begin() + n);
  std::vector<array> deps(inputs.begin() + n, inputs.end());
  return {depends(pass, deps),
          std::vector<int>(axes.begin(), axes.begin() + n)};
}

std::vector<Shape> Depends::output_shapes(const std::vector<array>& inputs) {
  std::vector<Shape> shapes;
  for (int i = 0; i < num_passed_; ++i) {
    shapes.push_back(inputs[i].shape());
  }
  return shapes;
}

std::vector<PrimitiveArg> Depends::state() const {
  return export_state(int64_t{num_passed_});
}

std::shared_ptr<Primitive> Depends::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Depends");
  return std::make_shared<Depends>(s, a.i32(0));
}

std::vector<Shape> CustomTransforms::output_shapes(
    const std::vector<array>& inputs) {
  std::vector<Shape> shapes;
  for (size_t i = inputs.size() - num_outputs_; i < inputs.size(); ++i) {
    shapes.push_back(inputs[i].shape());
  }
  return shapes;
}

std::vector<array> CustomTransforms::vjp(const std::vector<array>& primals,
                                         const std::vector<array>& cotangents,
                                         const std::vector<int>& argnums,
                                         const std::vector<array>& outputs) {
  // The primals of the user function exclude the forwarded outputs.
  std::vector<array> inputs(primals.begin(), primals.end() - num_outputs_);
  auto all_vjps = vjp_fun_(inputs, cotangents, outputs);
  std::vector<array> vjps;
  for (int a : argnums) {
    if (a < static_cast<int>(all_vjps.size())) {
      vjps.push_back(all_vjps[a]);
    } else {
      // Cotangents of the forwarded outputs: they are stop-gradient'ed.
      vjps.push_back(zeros_like(primals[a]));
    }
  }
  return vjps;
}

std::vector<array> CustomTransforms::jvp(const std::vector<array>& primals,
                                         const std::vector<array>& tangents,
                                         const std::vector<int>& argnums) {
  std::vector<array> inputs(primals.begin(), primals.end() - num_outputs_);
  std::vector<array> t;
  std::vector<int> a;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] < static_cast<int>(inputs.size())) {
      t.push_back(tangents[i]);
      a.push_back(argnums[i]);
    }
  }
  return jvp_fun_(inputs, t, a);
}

std::pair<std::vector<array>, std::vector<int>> CustomTransforms::vmap(
    const std::vector<array>& inputs_, const std::vector<int>& axes_) {
  std::vector<array> inputs(inputs_.begin(), inputs_.end() - num_outputs_);
  std::vector<int> axes(axes_.begin(), axes_.end() - num_outputs_);
  return vmap_fun_(inputs, axes);
}

}  // namespace fluxion
