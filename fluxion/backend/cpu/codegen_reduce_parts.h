// The pieces shared by the reduction generators: rows and totals
// (codegen_reduce.cpp, which defines these) and columns
// (codegen_columns.cpp).
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "fluxion/backend/cpu/codegen_parts.h"
#include "fluxion/compile_ir.h"
#include "fluxion/ops/reduce.h"

namespace fluxion::cpu::gen {

// The fold every pass uses (generated source): fx_fold over f(j), as the
// eager kernel folds a row.
extern const char* const kFold;

// Strings joined by appending: GCC 12's -Wrestrict misfires on chains of
// `"x" + s + "y"` (GCC bug 105329; see tagged()).
template <typename... S>
std::string cat(const S&... parts) {
  std::string out;
  (out.append(parts), ...);
  return out;
}

// A node's expression: shape-only nodes (a per-row value squeezed or
// expanded: fuse_reductions admits no other) pass their input through.
std::string expr(const detail::IrNode& n, const detail::Ir& tape);

bool is_gather(const detail::IrNode& n);

struct ReduceInfo {
  std::string op, init, acc;
};

// A reduction's fold operator, initial value and accumulator type.
ReduceInfo reduce_info(const Reduce& r, Dtype in, Dtype out);

size_t size_of(const Shape& s);

// "T* po<i> = (T*)out[i];" for each output.
std::string output_pointers(const detail::Ir& tape);

// What the generator knows of a tape.
struct Plan {
  const detail::Ir& tape;
  Shape row;                // S
  bool total = false;       // the reduction is over all axes
  std::vector<bool> jdep;   // per value: depends on j
  std::vector<int> producer;
  std::vector<int> input_index;  // per value: k for tape inputs, else -1

  std::string name(int v) const { return tagged("v", v); }

  // Each node's producer, and whether it depends on j (as any input does;
  // a reduction's or a gather's output does not), once the inputs' jdep
  // is set. False when a node has no expression.
  bool classify_nodes() {
    for (size_t i = 0; i < tape.nodes.size(); ++i) {
      auto& n = tape.nodes[i];
      int o = n.outputs[0];
      producer[o] = static_cast<int>(i);
      if (dynamic_cast<const Reduce*>(n.prim.get()) || is_gather(n)) continue;
      if (expr(n, tape).empty()) return false;
      for (int v : n.inputs) jdep[o] = jdep[o] || jdep[v];
    }
    return true;
  }

  // Where a pass kept a value for later passes (a row buffer's
  // "b<value>[j]", or the output it was stored to); empty: recomputed.
  std::vector<std::string> buffer_at;

  // The per-element values `vs` need (themselves included), stopping at
  // buffered ones.
  std::vector<bool> needs(const std::vector<int>& vs) const {
    std::vector<bool> need(tape.values.size(), false);
    std::vector<int> stack = vs;
    while (!stack.empty()) {
      int u = stack.back();
      stack.pop_back();
      if (!jdep[u] || need[u]) continue;
      need[u] = true;
      if (producer[u] >= 0 && buffer_at[u].empty()) {
        for (int w : tape.nodes[producer[u]].inputs) stack.push_back(w);
      }
    }
    return need;
  }

  // Statements defining the per-element values `vs` need, in tape order;
  // `elem(k)` is input k's element expression.
  template <typename Elem>
  std::string closure(const std::vector<int>& vs, Elem elem) const {
    std::vector<bool> need = needs(vs);
    std::ostringstream s;
    for (size_t k = 0; k < tape.inputs.size(); ++k) {
      int u = tape.inputs[k];
      if (need[u]) {
        s << "      const " << compute_type(tape.values[u].dtype) << " "
          << name(u) << " = " << load(elem(k), tape.values[u].dtype) << ";\n";
      }
    }
    for (auto& n : tape.nodes) {
      int u = n.outputs[0];
      if (need[u] && input_index[u] < 0) {
        s << "      const " << compute_type(tape.values[u].dtype) << " "
          << name(u) << " = "
          << (buffer_at[u].empty() ? expr(n, tape) : buffer_at[u])
          << ";\n";
      }
    }
    return s.str();
  }
};

// The source of a column tape's kernel (fx_cols, and fx_cols_part and
// fx_cols_finish for one reduction with a per-column result), its
// reductions over the leading axes 0..m-1; "" when a node has no
// expression or an input's shape is not one the kernel reads.
std::string columns_source(const detail::Ir& tape, Plan& p, size_t m);

}  // namespace fluxion::cpu::gen
