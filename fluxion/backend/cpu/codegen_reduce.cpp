// Source generation for fused reductions over rows and totals (codegen.h:
// reduce_kernel_source; columns: codegen_columns.cpp; the groups:
// compile_reduce.cpp). Every tape value either depends on the
// position j along the row (per element) or not (per row: reductions, the
// nodes computed from them, inputs broadcast along the row). fx_rows takes
// each row in turn: per-row values are computed once, in tape order; each
// reduction is one pass over j folding a lambda that recomputes the
// per-element nodes it needs (or reads them from a row buffer an earlier
// pass filled); a row-shaped output is a last pass writing them. No
// intermediate of S's shape is allocated (softmax: a max pass, an exp-sum
// pass keeping exp in a buffer of one row, a write pass).
//
// Accumulation follows the eager kernel (backend/cpu/reduce.cpp) for
// row-contiguous rows: 16 lanes combined as a tree, runs over 2048 split
// in halves (pairwise), the result op(init, fold), in float for the half
// types and float32, in double for float64. A fused row therefore sums in
// the eager order whenever the eager kernel walks that row innermost (a
// row-contiguous input); for strided inputs the eager kernel may walk
// another order, and results agree to rounding. The max/min folds differ
// from the eager vectorized one only in which NaN payload or which zero
// sign comes out. A total splits the flat elements into the same chunks
// as the eager kernel (one per thread, 2^16 elements at least) and
// combines the chunks' partials as the same tree.
#include <algorithm>
#include <sstream>

#include "fluxion/backend/common/kernel_source.h"
#include "fluxion/backend/cpu/codegen.h"
#include "fluxion/backend/cpu/codegen_parts.h"
#include "fluxion/backend/cpu/codegen_reduce_parts.h"
#include "fluxion/ops/indexing.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"

namespace fluxion::cpu {

namespace gen {

// The fold shared by every pass: fold_block and fold of reduce.cpp over
// f(j) for j in [j0, j0 + n).
const char* const kFold = R"(
struct fx_add {
  template <typename A> A operator()(A a, A b) const { return a + b; }
};
struct fx_mul {
  template <typename A> A operator()(A a, A b) const { return a * b; }
};
template <typename A, typename Op, typename F>
static inline A fx_fold_block(Op op, A init, const F& f, long long j0,
                              long long n) {
  long long i = 0;
  A acc = init;
  if (n >= 32) {
    // The 16 lanes as 32-byte vectors (GCC's vector extension; the
    // functors' operators apply lane by lane): an array of lanes let GCC
    // vectorize across i instead, with shuffles, 3x slower than the eager
    // fold; one vector of all 16 is wider than AVX2's registers, and GCC
    // then split max/min's select back into scalar compares and branches
    // (a fused max ran 9x slower than eager's). Lane k still folds the
    // elements i + k, so the order is eager's.
    typedef A V __attribute__((vector_size(32)));
    constexpr int kPer = 32 / sizeof(A), kVecs = 16 / kPer;
    V lanes[kVecs];
    for (int v = 0; v < kVecs; ++v)
      for (int k = 0; k < kPer; ++k) lanes[v][k] = init;
    for (; i + 16 <= n; i += 16) {
      for (int v = 0; v < kVecs; ++v) {
        V t;
        for (int k = 0; k < kPer; ++k) t[k] = f(j0 + i + v * kPer + k);
        lanes[v] = op(lanes[v], t);
      }
    }
    A l[16];
    __builtin_memcpy(l, lanes, sizeof(l));
    for (int w = 8; w >= 1; w /= 2) {
      for (int k = 0; k < w; ++k) l[k] = op(l[k], l[k + w]);
    }
    acc = l[0];
  }
  for (; i < n; ++i) acc = op(acc, f(j0 + i));
  return acc;
}
template <typename A, typename Op, typename F>
static A fx_fold(Op op, A init, const F& f, long long j0, long long n) {
  if (n <= 2048) return fx_fold_block<A>(op, init, f, j0, n);
  long long h = (n / 2 + 15) / 16 * 16;
  A left = fx_fold<A>(op, init, f, j0, h);
  return op(left, fx_fold<A>(op, init, f, j0 + h, n - h));
}
)";

// A node's expression: shape-only nodes (a per-row value squeezed or
// expanded: fuse_reductions admits no other) pass their input through.
std::string expr(const detail::IrNode& n, const detail::Ir& tape) {
  auto* p = n.prim.get();
  if (dynamic_cast<const Squeeze*>(p) || dynamic_cast<const ExpandDims*>(p) ||
      dynamic_cast<const Reshape*>(p)) {
    return tagged("v", n.inputs[0]);
  }
  return node_expr(n, tape);
}

bool is_gather(const detail::IrNode& n) {
  return dynamic_cast<const GatherAxis*>(n.prim.get()) != nullptr;
}

ReduceInfo reduce_info(const Reduce& r, Dtype in, Dtype out) {
  ReduceInfo i;
  i.acc = in == float64 || out == float64 ? "double" : "float";
  switch (r.type()) {
    case Reduce::Sum:
      i.op = "fx_add{}";
      i.init = cat("(", i.acc, ")0");
      break;
    case Reduce::Prod:
      i.op = "fx_mul{}";
      i.init = cat("(", i.acc, ")1");
      break;
    case Reduce::Max:
      i.op = "fluxion::detail::Maximum{}";
      i.init = cat("(", i.acc, ")(-__builtin_huge_val())");
      break;
    case Reduce::Min:
      i.op = "fluxion::detail::Minimum{}";
      i.init = cat("(", i.acc, ")(__builtin_huge_val())");
      break;
    default:
      i.op.clear();
  }
  return i;
}

size_t size_of(const Shape& s) {
  size_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// "T* po<i> = (T*)out[i];" for each output.
std::string output_pointers(const detail::Ir& tape) {
  std::string s;
  for (size_t i = 0; i < tape.outputs.size(); ++i) {
    const char* st = storage_type(tape.values[tape.outputs[i]].dtype);
    s += cat("  ", st, "* ", tagged("po", i), " = (", st, "*)out[",
             std::to_string(i), "];\n");
  }
  return s;
}

}  // namespace gen

using namespace gen;

namespace {

// An index of a gather along a row of n elements: negative ones wrap once
// (eager's take_along_axis); -1 when it is still out of range.
const char* const kIndex = R"(
template <typename I>
static inline long long fx_index(I raw, long long n) {
  if ((I)-1 > (I)0) {  // unsigned: no wrapping
    return (unsigned long long)raw < (unsigned long long)n ? (long long)raw
                                                            : -1;
  }
  long long v = (long long)raw;
  if (v < 0) v += n;
  return v >= 0 && v < n ? v : -1;
}
)";

// Row buffers share the running thread's stack: at most this much.
constexpr int64_t kStackBuffers = int64_t{256} << 10;

// fx_rows's row buffers b<value> (`to_buffer`), R elements each, as one
// block of the row's length, known only at run time (the call's rows: a
// shapeless compile replays one kernel at every shape): on the running
// thread's stack, in cache, while it fits kStackBuffers; else on the heap
// (fx_heap, freed before fx_rows returns; if none can be had, fx_rows
// reports the rows as not done and the nodes run one by one). A long row
// is still better buffered than recomputed: softmax over 64 rows of
// 100000 floats took 26.3 ms recomputing exp in its write pass, 7.2 ms
// with the buffer on the heap (eager 10.0 ms). `heap`: whether fx_heap
// is declared (some value is buffered).
std::string row_buffers(const detail::Ir& tape,
                        const std::vector<bool>& to_buffer, bool* heap) {
  std::ostringstream s;
  *heap =
      std::find(to_buffer.begin(), to_buffer.end(), true) != to_buffer.end();
  if (!*heap) {
    return "";
  }
  // Doubles first, so that every buffer is aligned for its type.
  std::vector<int> order;
  for (bool wide : {true, false}) {
    for (size_t v = 0; v < to_buffer.size(); ++v) {
      if (to_buffer[v] && (tape.values[v].dtype == float64) == wide) {
        order.push_back(static_cast<int>(v));
      }
    }
  }
  int64_t per_element = 0;
  for (int v : order) per_element += tape.values[v].dtype == float64 ? 8 : 4;
  s << "  const long long fx_len = R > 0 ? R : 1;\n"
    << "  const long long fx_bytes = fx_len * " << per_element << ";\n"
    << "  char* fx_heap = fx_bytes > " << kStackBuffers
    << " ? (char*)__builtin_malloc(fx_bytes) : (char*)0;\n"
    << "  if (fx_bytes > " << kStackBuffers << " && !fx_heap) return 1;\n"
    << "  char* fx_mem = fx_heap ? fx_heap : (char*)__builtin_alloca("
       "fx_bytes);\n";
  int64_t at = 0;
  for (int v : order) {
    auto ct = compute_type(tape.values[v].dtype);
    s << "  " << ct << "* " << tagged("b", v) << " = (" << ct
      << "*)(fx_mem + fx_len * " << at << ");\n";
    at += tape.values[v].dtype == float64 ? 8 : 4;
  }
  return s.str();
}

}  // namespace

bool has_reduction(const detail::Ir& tape) {
  for (auto& n : tape.nodes) {
    if (dynamic_cast<const Reduce*>(n.prim.get())) return true;
  }
  return false;
}

std::string reduce_kernel_source(const detail::Ir& tape) {
  for (auto& v : tape.values) {
    if (!storage_type(v.dtype)) return "";
  }
  Plan p{tape, {}, false, {}, {}, {}, {}};
  int reductions = 0;
  const detail::IrNode* last_reduce = nullptr;
  for (auto& n : tape.nodes) {
    if (auto* r = dynamic_cast<const Reduce*>(n.prim.get())) {
      size_t nd = tape.values[n.inputs[0]].shape.size();
      if (r->axes().size() < nd && r->axes().back() != int(nd) - 1) {
        return columns_source(tape, p, r->axes().size());
      }
      p.row = tape.values[n.inputs[0]].shape;
      p.total = r->axes().size() == p.row.size() && p.row.size() > 1;
      ++reductions;
      last_reduce = &n;
    }
  }
  if (!reductions || p.row.empty()) return "";
  const int64_t R = p.row.back();
  size_t nv = tape.values.size();
  p.jdep.assign(nv, false);
  p.producer.assign(nv, -1);
  p.input_index.assign(nv, -1);
  for (size_t k = 0; k < tape.inputs.size(); ++k) {
    int v = tape.inputs[k];
    const Shape& s = tape.values[v].shape;
    p.input_index[v] = static_cast<int>(k);
    p.jdep[v] = p.total ? size_of(s) > 1 : (!s.empty() && s.back() == R);
  }
  if (!p.classify_nodes()) return "";
  // Outputs of S's shape are written by a last pass over the row, the
  // others (one value per row) once the row's values are known.
  std::vector<int> whole, whole_index, per_row, per_row_index;
  bool gathers = false;
  for (size_t i = 0; i < tape.outputs.size(); ++i) {
    int v = tape.outputs[i];
    bool s_shaped = tape.values[v].shape == p.row;
    (s_shaped ? whole : per_row).push_back(v);
    (s_shaped ? whole_index : per_row_index).push_back(static_cast<int>(i));
  }
  for (auto& n : tape.nodes) gathers = gathers || is_gather(n);

  std::ostringstream src;
  src << "// Generated by Fluxion's compile: a fused reduction kernel.\n"
         "#define FLUXION_GENERATED_KERNEL 1\n"
      << detail::kernel_functor_source() << kBase << kFold << kIndex;
  size_t nin = tape.inputs.size();
  auto ptrs = [&]() {
    std::ostringstream s;
    for (size_t k = 0; k < nin; ++k) {
      const char* st = storage_type(tape.values[tape.inputs[k]].dtype);
      s << "  const " << st << "* p" << k << " = (const " << st << "*)in["
        << k << "];\n";
    }
    return s.str();
  };
  // Per-row statements up to (and, with `upto_end`, after) the reductions:
  // `scalar(k)` reads a per-row input, `elem(k)` an element of one, and
  // `span` is the j range of a pass.
  // Row buffers (fx_rows only): a pass's per-element value that a later
  // pass needs again is kept for the row rather than recomputed (softmax's
  // exp: one exp per element, not two; row_buffers says where).
  std::vector<bool> to_buffer(nv, false);
  std::vector<std::vector<int>> targets;  // what each pass computes
  for (auto& n : tape.nodes) {
    if (dynamic_cast<const Reduce*>(n.prim.get())) {
      targets.push_back({n.inputs[0]});
    }
  }
  if (!whole.empty()) targets.push_back(whole);
  p.buffer_at.assign(nv, "");
  auto is_whole = [&](int v) {
    return std::find(whole.begin(), whole.end(), v) != whole.end();
  };
  if (!p.total) {
    for (size_t i = 0; i + 1 < targets.size(); ++i) {
      int u = targets[i][0];  // a reduction's input
      // (An output is stored by its pass, and read back from there.)
      if (!p.jdep[u] || p.input_index[u] >= 0 || is_whole(u)) continue;
      for (size_t later = i + 1; later < targets.size(); ++later) {
        if (p.needs(targets[later])[u]) to_buffer[u] = true;
      }
    }
  }
  std::vector<std::pair<int, std::string>> stored;
  auto row_body = [&](auto scalar, auto elem, const std::string& span,
                      std::string* fold_result) {
    std::ostringstream s;
    for (size_t k = 0; k < nin; ++k) {
      int v = tape.inputs[k];
      if (!p.jdep[v]) {
        s << "    const " << compute_type(tape.values[v].dtype) << " "
          << p.name(v) << " = " << load(scalar(k), tape.values[v].dtype)
          << ";\n";
      }
    }
    for (auto& n : tape.nodes) {
      int o = n.outputs[0];
      Dtype ot = tape.values[o].dtype;
      if (auto* r = dynamic_cast<const Reduce*>(n.prim.get())) {
        int u = n.inputs[0];
        ReduceInfo info = reduce_info(*r, tape.values[u].dtype, ot);
        if (info.op.empty()) return std::string();
        // Row-shaped outputs this pass computes first are stored by it
        // (not by a last pass computing them again), then read back.
        std::string stores;
        std::vector<bool> need = p.needs({u});
        for (size_t i = 0; i < whole.size() && !fold_result; ++i) {
          int w = whole[i];
          if (!need[w] || !p.buffer_at[w].empty()) continue;
          std::string at = cat(tagged("po", whole_index[i]), "[r * R + j]");
          stores += cat("      ", at, " = ",
                        store(p.name(w), tape.values[w].dtype), ";\n");
          stored.push_back({w, load(at, tape.values[w].dtype)});
        }
        s << "    " << compute_type(ot) << " " << p.name(o) << ";\n    {\n"
          << "      auto f = [&](long long j) -> " << info.acc << " {\n"
          << p.closure({u}, elem) << stores
          << (to_buffer[u] && !fold_result
                  ? cat("      ", tagged("b", u), "[j] = ", p.name(u), ";\n")
                  : std::string())
          << "      return (" << info.acc << ")(" << p.name(u)
          << ");\n      };\n"
          << "      " << info.acc << " acc = " << info.op << "(" << info.init
          << ", fx_fold<" << info.acc << ">(" << info.op << ", " << info.init
          << ", f, " << span << "));\n";
        if (fold_result && &n == last_reduce) {
          *fold_result = "acc";
          s << "      *slot = (double)acc;\n    }\n";
          return s.str();  // a total's partial: nothing after it
        }
        s << "      " << p.name(o) << " = "
          << round_half(cat("(", compute_type(ot), ")(acc)"), ot)
          << ";\n    }\n";
        if (to_buffer[u] && !fold_result) {
          p.buffer_at[u] = cat(tagged("b", u), "[j]");
        }
        for (auto& [w, at] : stored) p.buffer_at[w] = at;
        stored.clear();
      } else if (is_gather(n)) {
        // The row's element at the index (wrapped once, as eager's
        // gather); an index out of range is reported, never read.
        int src_v = n.inputs[0];
        s << "    " << compute_type(ot) << " " << p.name(o) << " = ("
          << compute_type(ot) << ")0;\n    {\n"
          << "      const long long j = fx_index(" << p.name(n.inputs[1])
          << ", R);\n"
          << "      if (j < 0) {\n        bad = 1;\n      } else {\n"
          << p.closure({src_v}, elem) << "      " << p.name(o) << " = "
          << p.name(src_v) << ";\n      }\n    }\n";
      } else if (!p.jdep[o] && p.input_index[o] < 0) {
        s << "    const " << compute_type(ot) << " " << p.name(o) << " = "
          << expr(n, tape) << ";\n";
      }
    }
    return s.str();
  };
  if (!p.total) {
    // Rows: offsets of the row's start per input, as fx_strided computes.
    src << "extern \"C\" int fx_rows(void* const* in, void* const* out, "
           "const long long* shape, const long long* strides, int ndim, long "
           "long row_begin, long long row_end) {\n"
        << ptrs() << output_pointers(tape)
        << "  const long long R = shape[ndim - 1];\n  int bad = 0;\n";
    for (size_t k = 0; k < nin; ++k) {
      src << "  const long long t" << k << " = strides[" << k
          << " * ndim + ndim - 1];\n";
    }
    bool heap = false;
    src << row_buffers(tape, to_buffer, &heap);
    // Two copies of the row loop: rows contiguous in every per-element
    // input (stride 1: loads the compiler vectorizes), and any strides.
    auto rows_loop = [&](bool unit) {
      std::ostringstream l;
      p.buffer_at.assign(nv, "");
      l << "  for (long long r = row_begin; r < row_end; ++r) {\n"
        << "    long long off[" << nin + 1 << "] = {0};\n"
        << "    long long rem = r;\n"
        << "    for (int d = ndim - 2; d >= 0; --d) {\n"
        << "      long long c = rem % shape[d];\n      rem /= shape[d];\n"
        << "      for (int k = 0; k < " << nin
        << "; ++k) off[k] += c * strides[k * ndim + d];\n    }\n";
      auto scalar = [](size_t k) {
        auto ks = std::to_string(k);
        return cat("p", ks, "[off[", ks, "]]");
      };
      auto elem = [unit](size_t k) {
        auto ks = std::to_string(k);
        return unit ? cat("p", ks, "[off[", ks, "] + j]")
                    : cat("p", ks, "[off[", ks, "] + j * t", ks, "]");
      };
      std::string body = row_body(scalar, elem, "0, R", nullptr);
      if (body.empty()) return std::string();
      l << body;
      for (size_t i = 0; i < per_row.size(); ++i) {
        l << "    " << tagged("po", per_row_index[i]) << "[r] = "
          << store(p.name(per_row[i]), tape.values[per_row[i]].dtype)
          << ";\n";
      }
      // The row-shaped outputs no pass stored: a last pass.
      std::vector<int> last, last_index;
      for (size_t i = 0; i < whole.size(); ++i) {
        if (p.buffer_at[whole[i]].empty()) {
          last.push_back(whole[i]);
          last_index.push_back(whole_index[i]);
        }
      }
      if (!last.empty()) {
        // (Fresh output buffers: no iteration reads what another writes.)
        l << "#pragma GCC ivdep\n"
             "    for (long long j = 0; j < R; ++j) {\n"
          << p.closure(last, elem);
        for (size_t i = 0; i < last.size(); ++i) {
          l << "      " << tagged("po", last_index[i]) << "[r * R + j] = "
            << store(p.name(last[i]), tape.values[last[i]].dtype)
            << ";\n";
        }
        l << "    }\n";
      }
      l << "  }\n";
      return l.str();
    };
    std::string unit_loop = rows_loop(true), any_loop = rows_loop(false);
    if (unit_loop.empty() || any_loop.empty()) return "";
    src << "  const bool unit = true";
    for (size_t k = 0; k < nin; ++k) {
      if (p.jdep[tape.inputs[k]]) src << " && t" << k << " == 1";
    }
    src << ";\n  if (unit) {\n" << unit_loop << "  } else {\n" << any_loop
        << "  }\n"
        << (heap ? "  if (fx_heap) __builtin_free(fx_heap);\n" : "")
        << "  return bad;\n}\n";
  }
  p.buffer_at.assign(nv, "");
  // A total: one reduction whose result only per-row nodes consume (a
  // 1-D mean's squeeze and divide), over row-contiguous inputs, flat
  // index j. fx_finish combines the partials, then computes those nodes.
  // (One output, no gather: fuse_reductions gives a total neither.)
  const int result = tape.outputs[0];
  const Dtype out_t = tape.values[result].dtype;
  bool total_ok = reductions == 1 && tape.outputs.size() == 1 && !gathers &&
                  !p.jdep[result] && tape.values[result].shape != p.row;
  for (auto& n : tape.nodes) {
    if (&n > last_reduce && p.jdep[n.outputs[0]]) total_ok = false;
  }
  if (total_ok) {
    auto* r = static_cast<const Reduce*>(last_reduce->prim.get());
    int red = last_reduce->outputs[0];
    Dtype red_t = tape.values[red].dtype;
    ReduceInfo info = reduce_info(
        *r, tape.values[last_reduce->inputs[0]].dtype, red_t);
    src << "extern \"C\" void fx_total(void* const* in, double* slot, long "
           "long begin, long long end) {\n"
        << ptrs() << "  {\n";
    auto scalar = [](size_t k) { return cat(tagged("p", k), "[0]"); };
    auto elem = [](size_t k) { return cat(tagged("p", k), "[j]"); };
    std::string fold;
    std::string body = row_body(scalar, elem, "begin, end - begin", &fold);
    if (body.empty()) return "";
    src << body << "  }\n}\n";
    src << "extern \"C\" void fx_finish(void* const* in, const double* "
           "slots, long long n, void* out) {\n"
        << ptrs() << "  " << storage_type(out_t) << "* po = ("
        << storage_type(out_t) << "*)out;\n"
        << "  " << info.acc << " a[64];\n"
        << "  if (n > 64) n = 64;\n"  // the eval passes at most 64 chunks
        << "  for (long long t = 0; t < n; ++t) a[t] = (" << info.acc
        << ")slots[t];\n"
        << "  for (long long w = 1; w < n; w *= 2)\n"
        << "    for (long long t = 0; t + w < n; t += 2 * w) a[t] = "
        << info.op << "(a[t], a[t + w]);\n";
    for (size_t k = 0; k < nin; ++k) {
      int v = tape.inputs[k];
      if (!p.jdep[v]) {
        src << "  const " << compute_type(tape.values[v].dtype) << " "
            << p.name(v) << " = "
            << load(scalar(k), tape.values[v].dtype) << ";\n";
      }
    }
    for (auto& n : tape.nodes) {
      int o = n.outputs[0];
      Dtype ot = tape.values[o].dtype;
      if (o == red) {
        src << "  const " << compute_type(ot) << " " << p.name(o) << " = "
            << round_half(cat("(", compute_type(ot), ")(a[0])"), ot)
            << ";\n";
      } else if (!p.jdep[o] && p.input_index[o] < 0) {
        src << "  const " << compute_type(ot) << " " << p.name(o) << " = "
            << expr(n, tape) << ";\n";
      }
    }
    src << "  po[0] = " << store(p.name(result), out_t) << ";\n}\n";
  }
  return src.str();
}

}  // namespace fluxion::cpu
