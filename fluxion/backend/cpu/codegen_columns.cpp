// Source generation for fused column reductions (codegen.h:
// reduce_kernel_source hands a tape whose reductions are over leading axes
// here; the groups: compile_reduce.cpp).
#include <algorithm>
#include <sstream>

#include "fluxion/backend/common/kernel_source.h"
#include "fluxion/backend/cpu/codegen.h"
#include "fluxion/backend/cpu/codegen_reduce_parts.h"

namespace fluxion::cpu::gen {

// A column tape (its reductions over the leading axes 0..m-1 of S):
// fx_cols takes its columns of the [N, C] view of S in blocks of up to
// FX_W (N the product of the reduced axes, C of the others); per-column
// values are arrays over the block, computed once; each reduction is one
// pass over the N rows folding the block's columns side by side (e = r * C
// + c: contiguous, so the lanes vectorize), in the eager kernel's order
// for a contiguous input on one thread (acc = op(acc, x) row after row,
// from the init); an S-shaped output is a last pass. Inputs are S-shaped
// and row-contiguous (per element), of Sr or Sr's squeezed form and
// contiguous (per column), or one element (run_reduction checks the
// layouts; fuse_reductions admits no other shape).
std::string columns_source(const detail::Ir& tape, Plan& p, size_t m) {
  const detail::IrNode* first = nullptr;
  int reductions = 0;
  for (auto& n : tape.nodes) {
    if (dynamic_cast<const Reduce*>(n.prim.get())) {
      first = first ? first : &n;
      ++reductions;
    }
  }
  const Shape& S = tape.values[first->inputs[0]].shape;
  size_t nv = tape.values.size();
  size_t nin = tape.inputs.size();
  p.jdep.assign(nv, false);
  p.producer.assign(nv, -1);
  p.input_index.assign(nv, -1);
  p.buffer_at.assign(nv, "");
  enum InputKind { kScalar, kPerColumn, kPerElement };
  std::vector<InputKind> kind(nin, kScalar);
  Shape cols(S.begin() + m, S.end());
  for (size_t k = 0; k < nin; ++k) {
    int v = tape.inputs[k];
    const Shape& s = tape.values[v].shape;
    p.input_index[v] = static_cast<int>(k);
    if (s == S) {
      kind[k] = kPerElement;
    } else if (size_of(s) == 1) {
      kind[k] = kScalar;
    } else {
      Shape trimmed = s;
      while (trimmed.size() > cols.size() && trimmed.front() == 1) {
        trimmed.erase(trimmed.begin());
      }
      if (trimmed != cols) return "";
      kind[k] = kPerColumn;
    }
    p.jdep[v] = kind[k] == kPerElement;
  }
  if (!p.classify_nodes()) return "";
  // Outputs of S's shape are written by a last pass over the rows (by
  // shape, not jdep: a per-column value broadcast back is written whole);
  // the others, one value per column, from their column arrays.
  std::vector<int> whole, whole_index, by_column, by_column_index;
  for (size_t i = 0; i < tape.outputs.size(); ++i) {
    int v = tape.outputs[i];
    bool s_shaped = tape.values[v].shape == S;
    (s_shaped ? whole : by_column).push_back(v);
    (s_shaped ? whole_index : by_column_index).push_back(static_cast<int>(i));
  }
  auto ct = [&](int v) { return compute_type(tape.values[v].dtype); };
  auto col = [&](int v) { return tagged("cv", v); };
  // Inside a column loop: the per-column values so far as scalars (the
  // closures name them v<id>).
  std::vector<int> defined;
  auto aliases = [&](const char* indent) {
    std::string a;
    for (int v : defined) {
      a += cat(indent, "const ", ct(v), " ", tagged("v", v), " = ", col(v),
               "[c];\n");
    }
    return a;
  };
  auto elem = [&](size_t k) {
    auto ks = std::to_string(k);
    return kind[k] == kPerElement ? cat("p", ks, "[e]")
                                  : cat("p", ks, "[0]");
  };
  // A pass over rows [R0, R1) running `body` for each column of the
  // block: a full block's count is a constant (the lanes vectorize whole
  // and the accumulators may stay in registers), a ragged last block's w.
  auto rows_pass = [](const std::string& body) {
    auto loop = [&](const char* n) {
      return cat("      for (long long r = R0; r < R1; ++r) {\n",
                 "        for (int c = 0; c < ", n, "; ++c) {\n",
                 "          const long long e = r * C + c0 + c;\n", body,
                 "        }\n      }\n");
    };
    return cat("      if (w == FX_W) {\n", loop("FX_W"), "      } else {\n",
               loop("w"), "      }\n");
  };
  // The block: as wide as the per-column arrays (a value's, an
  // accumulator's) allow within 256 KB of the running thread's stack, so
  // that a row's part is one long run (few blocks of a wide row, each
  // read whole: 64-column blocks of 4 KB rows cost a TLB miss a row).
  int64_t per_column = 8;  // an accumulator
  for (size_t v = 0; v < nv; ++v) {
    if (!p.jdep[v]) per_column += tape.values[v].dtype == float64 ? 8 : 4;
  }
  const int64_t block =
      std::clamp<int64_t>((int64_t{256} << 10) / per_column / 16 * 16, 16,
                          kColumnBlock);
  // One reduction whose result is per column may split its rows: fx_cols_part
  // folds rows [R0, R1) into a slice of partials (as doubles: a float
  // accumulator converts exactly both ways), fx_cols_finish combines the
  // slices as a tree and computes the nodes after the reduction.
  const bool splits = reductions == 1 && whole.empty();
  enum Mode { kFull, kPart, kFinish };
  auto function = [&](Mode mode) -> std::string {
    std::ostringstream src;
    defined.clear();
    if (mode == kFull) {
      src << "extern \"C\" void fx_cols(void* const* in, void* const* out, "
             "long long N, long long C, long long col_begin, long long "
             "col_end) {\n"
             "  const long long R0 = 0, R1 = N;\n";
    } else if (mode == kPart) {
      src << "extern \"C\" void fx_cols_part(void* const* in, double* part, "
             "long long C, long long R0, long long R1, long long col_begin, "
             "long long col_end) {\n";
    } else {
      src << "extern \"C\" void fx_cols_finish(void* const* in, const double* "
             "parts, long long nparts, long long C, void* const* out, long "
             "long col_begin, long long col_end) {\n";
    }
    for (size_t k = 0; k < nin; ++k) {
      const char* st = storage_type(tape.values[tape.inputs[k]].dtype);
      src << "  const " << st << "* p" << k << " = (const " << st << "*)in["
          << k << "];\n";
    }
    if (mode != kPart) {
      src << output_pointers(tape);
    }
    src << "  for (long long c0 = col_begin; c0 < col_end; c0 += FX_W) {\n"
        << "    const int w = (int)(col_end - c0 < FX_W ? col_end - c0 : "
           "FX_W);\n";
    for (size_t k = 0; k < nin; ++k) {
      int v = tape.inputs[k];
      if (kind[k] == kPerElement) continue;
      auto ks = std::to_string(k);
      src << "    " << ct(v) << " " << col(v) << "[FX_W];\n"
          << "    for (int c = 0; c < w; ++c) " << col(v) << "[c] = "
          << load(kind[k] == kPerColumn ? cat("p", ks, "[c0 + c]")
                                        : cat("p", ks, "[0]"),
                  tape.values[v].dtype)
          << ";\n";
      defined.push_back(v);
    }
    for (auto& n : tape.nodes) {
      int o = n.outputs[0];
      Dtype ot = tape.values[o].dtype;
      if (auto* r = dynamic_cast<const Reduce*>(n.prim.get())) {
        int u = n.inputs[0];
        ReduceInfo info = reduce_info(*r, tape.values[u].dtype, ot);
        if (info.op.empty()) return "";
        src << "    " << ct(o) << " " << col(o) << "[FX_W];\n    {\n";
        if (mode == kFinish) {
          // The partials of each column combined as a tree (the eager
          // kernel's combine of its row chunks).
          src << "      for (int c = 0; c < w; ++c) {\n"
              << "        " << info.acc << " a[64];\n"
              << "        const long long n = nparts < 64 ? nparts : 64;\n"
              << "        for (long long t = 0; t < n; ++t) a[t] = ("
              << info.acc << ")parts[t * C + c0 + c];\n"
              << "        for (long long s = 1; s < n; s *= 2)\n"
              << "          for (long long t = 0; t + s < n; t += 2 * s) "
                 "a[t] = "
              << info.op << "(a[t], a[t + s]);\n"
              << "        " << col(o) << "[c] = "
              << round_half(cat("(", ct(o), ")(a[0])"), ot) << ";\n"
              << "      }\n    }\n";
          defined.push_back(o);
          continue;
        }
        src << "      " << info.acc << " acc[FX_W];\n"
            << "      for (int c = 0; c < FX_W; ++c) acc[c] = " << info.init
            << ";\n"
            << rows_pass(cat(aliases("          "), p.closure({u}, elem),
                             "          acc[c] = ", info.op, "(acc[c], (",
                             info.acc, ")(", tagged("v", u), "));\n"));
        if (mode == kPart) {
          src << "      for (int c = 0; c < w; ++c) part[c0 + c] = "
                 "(double)acc[c];\n    }\n  }\n}\n";
          return src.str();
        }
        src << "      for (int c = 0; c < w; ++c) " << col(o) << "[c] = "
            << round_half(cat("(", ct(o), ")(acc[c])"), ot) << ";\n    }\n";
        defined.push_back(o);
      } else if (!p.jdep[o] && p.input_index[o] < 0) {
        src << "    " << ct(o) << " " << col(o) << "[FX_W];\n"
            << "    for (int c = 0; c < w; ++c) {\n" << aliases("      ")
            << "      " << col(o) << "[c] = " << expr(n, tape)
            << ";\n    }\n";
        defined.push_back(o);
      }
    }
    if (!whole.empty()) {
      std::string stores;
      for (size_t i = 0; i < whole.size(); ++i) {
        stores += cat("          ", tagged("po", whole_index[i]), "[e] = ",
                      store(tagged("v", whole[i]),
                            tape.values[whole[i]].dtype),
                      ";\n");
      }
      src << rows_pass(
          cat(aliases("          "), p.closure(whole, elem), stores));
    }
    for (size_t i = 0; i < by_column.size(); ++i) {
      int v = by_column[i];
      src << "    for (int c = 0; c < w; ++c) "
          << tagged("po", by_column_index[i]) << "[c0 + c] = "
          << store(cat(col(v), "[c]"), tape.values[v].dtype) << ";\n";
    }
    src << "  }\n}\n";
    return src.str();
  };
  std::string full = function(kFull);
  if (full.empty()) return "";
  std::ostringstream src;
  src << "// Generated by Fluxion's compile: a fused column reduction.\n"
         "#define FLUXION_GENERATED_KERNEL 1\n"
      << detail::kernel_functor_source() << kBase << kFold
      << "#define FX_W " << block << "\n"
      << full;
  if (splits) {
    src << function(kPart) << function(kFinish);
  }
  return src.str();
}

}  // namespace fluxion::cpu::gen
