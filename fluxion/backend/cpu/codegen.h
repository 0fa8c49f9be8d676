// CPU code generation for compile's fused elementwise kernels: C++ source
// for a tape of elementwise nodes, built by the system compiler into a
// shared library that is cached on disk and loaded with dlopen.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fluxion/compile_ir.h"

namespace fluxion::cpu {

// The source of a kernel computing `tape`'s outputs in one loop (every
// node's primitive names an elementwise functor: fuse_ir made the tape
// so); inputs whose traced size is 1 are read as scalars by the
// contiguous entry point. Empty when the tape holds a dtype kernels do not
// compute.
std::string kernel_source(const detail::Ir& tape);

// Contiguous: out[o][i] for each output o and i in [begin, end), every
// input either of the outputs' size and row-contiguous, or (the scalars
// above) one element.
using ContiguousKernel = void (*)(void* const* in, void* const* out,
                                  int64_t begin, int64_t end);
// Strided: rows [row_begin, row_end) of row-contiguous outputs of `shape`
// (`ndim` >= 1); input k's element strides are strides[k * ndim + d].
using StridedKernel = void (*)(void* const* in, void* const* out,
                               const int64_t* shape, const int64_t* strides,
                               int ndim, int64_t row_begin, int64_t row_end);

// Reduction tapes (reduce_kernel_source). Rows: rows [row_begin, row_end)
// of the row shape S (`shape`, `ndim` >= 1, the last axis reduced), input
// k's element strides against S in strides[k * ndim + d]; each output is
// row-contiguous, of shape S (per element) or of one value per row.
// Returns nonzero when a gathered index was out of range (the row's
// values are then not the eager ones: the caller runs the nodes one by
// one, which raises the eager error).
using RowsKernel = int (*)(void* const* in, void* const* out,
                           const int64_t* shape, const int64_t* strides,
                           int ndim, int64_t row_begin, int64_t row_end);
// Total (a tape with one reduction, over every axis, that only per-row
// nodes consume): total(in, slot, begin, end) folds the flat elements
// [begin, end) of row-contiguous inputs (or one-element ones) into *slot
// (the accumulator, held as a double); finish(in, slots, n, out) combines
// n slots as a tree, computes the nodes after the reduction and stores the
// result.
using TotalKernel = void (*)(void* const* in, double* slot, int64_t begin,
                             int64_t end);
using FinishKernel = void (*)(void* const* in, const double* slots,
                              int64_t n, void* out);
// Columns (a tape whose reductions are over the leading axes of S):
// columns [col_begin, col_end) of the [N, C] view of S (N the product of
// the reduced axes), every row; inputs row-contiguous of S, contiguous
// per-column values, or one element; the output row-contiguous, of S or
// of C values (each output).
using ColumnsKernel = void (*)(void* const* in, void* const* out, int64_t N,
                               int64_t C, int64_t col_begin, int64_t col_end);
// A column tape with one reduction and a per-column result may also split
// its rows: part(in, slice, C, r0, r1, col_begin, col_end) folds rows
// [r0, r1) into slice[c] (the accumulator as a double), finish(in, slices,
// n, C, out, col_begin, col_end) combines n slices of C values as a tree
// and computes the nodes after the reduction.
using ColumnsPartKernel = void (*)(void* const* in, double* slice, int64_t C,
                                   int64_t r0, int64_t r1, int64_t col_begin,
                                   int64_t col_end);
using ColumnsFinishKernel = void (*)(void* const* in, const double* slices,
                                     int64_t n, int64_t C, void* const* out,
                                     int64_t col_begin, int64_t col_end);
// The most columns a ColumnsKernel folds side by side (its accumulators,
// on the stack); run_columns gives each thread one run of columns.
constexpr int64_t kColumnBlock = 4096;

struct Kernel {
  ContiguousKernel contiguous = nullptr;
  StridedKernel strided = nullptr;
  RowsKernel rows = nullptr;
  TotalKernel total = nullptr;
  FinishKernel finish = nullptr;
  ColumnsKernel cols = nullptr;
  ColumnsPartKernel cols_part = nullptr;
  ColumnsFinishKernel cols_finish = nullptr;
};

// Whether `tape` holds a Reduce node (fuse_reductions made it).
bool has_reduction(const detail::Ir& tape);

// The source of a kernel for a tape with reductions: entry point fx_rows,
// for a total fx_total and fx_finish, for columns fx_cols (and, for one
// reduction with a per-column result, fx_cols_part and fx_cols_finish).
// Empty when a node has no functor or a dtype is not computed. The kernel
// takes every size from its arguments, not from the tape's shapes (a
// shapeless compile replays it at other shapes).
std::string reduce_kernel_source(const detail::Ir& tape);

// Evaluates a reduction tape with its kernel over rows `row` (S in this
// call: Compiled::row_shape) (backend/cpu/compiled_reduce.cpp); false
// when these inputs need the node-by-node fallback: a layout the kernel
// does not read (a total over strided inputs, a column input not
// row-contiguous; found before anything is written), or a gathered index
// out of range (the fallback raises the eager error; what the kernel
// wrote is dropped).
bool run_reduction(const detail::Ir& tape, const Kernel& kernel,
                   const Shape& row, const std::vector<array>& inputs,
                   std::vector<array>& outs);

// The kernel for `source`, compiled once per process (or found in the disk
// cache). Returns null when no compiler works: callers then fall back to
// evaluating the nodes one by one. Environment: FLUXION_CXX (compiler),
// FLUXION_CACHE_DIR (default ~/.cache/fluxion).
const Kernel* load_kernel(const std::string& source);

}  // namespace fluxion::cpu
