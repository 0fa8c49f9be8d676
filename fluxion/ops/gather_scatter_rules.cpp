// Transformation rules of Gather and Scatter, written with public ops so
// that they compose (grad of grad, vmap of grad). Index inputs are
// integers: their cotangents are integer zeros, their tangents ignored.
//
// vmap adds the batch as one more indexed axis: the operand gets its mapped
// axis in front (a stride-0 broadcast when unmapped), an index
// 0, 1, .., b-1 selects along it, and the other indices gain the batch as
// their leading dimension.
//
// Ties of scatter_max / scatter_min: the cotangent of an output element is
// shared equally among the arguments equal to it (a's element and every
// update reaching it), as for the max and min reductions.
#include <numeric>

#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/gather_scatter.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"

namespace fluxion {

namespace {

using Arrays = std::vector<array>;
using Batched = std::pair<std::vector<array>, std::vector<int>>;

Arrays index_inputs(const Arrays& in, size_t k) {
  return Arrays(in.begin() + 1, in.begin() + 1 + k);
}

// The update slice shape U of updates shaped B + U.
Shape slice_of(const array& updates, int nb) {
  return Shape(updates.shape().begin() + nb, updates.shape().end());
}

array scatter_kind(Scatter::ReduceType r, const array& a, const Arrays& idx,
                   const array& u, const std::vector<int>& axes, Stream s) {
  switch (r) {
    case Scatter::Sum:
      return scatter_add(a, idx, u, axes, s);
    case Scatter::Prod:
      return scatter_prod(a, idx, u, axes, s);
    case Scatter::Max:
      return scatter_max(a, idx, u, axes, s);
    case Scatter::Min:
      return scatter_min(a, idx, u, axes, s);
    default:
      return scatter(a, idx, u, axes, s);
  }
}

// Batched index arrays: the batch index first, then every index array with
// the batch as its leading dimension; `nb` receives the unbatched rank.
Arrays batch_indices(const Arrays& inputs, const std::vector<int>& axes,
                     size_t k, int b, int& nb, Stream s) {
  Arrays idx;
  Shape bu;
  for (size_t i = 1; i <= k; ++i) {
    array x = inputs[i];
    if (axes[i] >= 0) {
      x = rules::to_front(x, axes[i], b, s);
      bu = broadcast_shapes(bu, Shape(x.shape().begin() + 1, x.shape().end()),
                            "vmap");
    } else {
      bu = broadcast_shapes(bu, x.shape(), "vmap");
    }
    idx.push_back(x);
  }
  nb = static_cast<int>(bu.size());
  Shape full = rules::prepend(b, bu);
  for (size_t i = 0; i < k; ++i) {
    idx[i] = axes[i + 1] >= 0
                 ? broadcast_to(idx[i], full, s)
                 : rules::to_front(broadcast_to(idx[i], bu, s), -1, b, s);
  }
  Dtype t = k > 0 ? inputs[1].dtype() : int32;
  Shape col(nb + 1, 1);
  col[0] = b;
  idx.insert(idx.begin(), reshape(astype(arange(0, b, s), t, s), col, s));
  return idx;
}

std::vector<int> batch_axes(const std::vector<int>& axes) {
  std::vector<int> out{0};
  for (int a : axes) {
    out.push_back(a + 1);
  }
  return out;
}

// For each update of scatter_prod: the product of everything else reaching
// its output element (a's value and the other updates), without dividing by
// a zero update: zero updates are counted apart.
array prod_others(const array& a, const Arrays& idx, const array& u,
                  const std::vector<int>& axes, Stream s) {
  Shape U = slice_of(u, idx.empty() ? 0 : idx[0].ndim());
  array zero = equal(u, array(0, u.dtype()), s);
  array nz = where(zero, array(1, u.dtype()), u, s);
  array pnz = gather(scatter_prod(a, idx, nz, axes, s), idx, axes, U, s);
  array cnt = gather(scatter_add(zeros(a.shape(), int32, s), idx,
                                 astype(zero, int32, s), axes, s),
                     idx, axes, U, s);
  array z = zeros_like(u, s);
  return where(zero, where(equal(cnt, array(1, int32), s), pnz, z, s),
               where(equal(cnt, array(0, int32), s), divide(pnz, nz, s), z, s),
               s);
}

struct Ties {
  array eq_a, eq_u, count;
};

// Where a and the updates equal the output of scatter_max/min, and how many
// arguments share each output element.
Ties ties(const array& a, const Arrays& idx, const array& u, const array& out,
          const std::vector<int>& axes, Stream s) {
  Shape U = slice_of(u, idx.empty() ? 0 : idx[0].ndim());
  array eq_a = astype(equal(a, out, s), a.dtype(), s);
  array eq_u = astype(equal(u, gather(out, idx, axes, U, s), s), a.dtype(), s);
  array count = add(eq_a, scatter_add(zeros_like(a, s), idx, eq_u, axes, s), s);
  return {eq_a, eq_u, count};
}

}  // namespace

// --- Gather: inputs (a, indices...) ---

std::vector<array> Gather::jvp(const Arrays& primals, const Arrays& tangents,
                               const std::vector<int>& argnums) {
  auto s = stream();
  Arrays idx = index_inputs(primals, axes_.size());
  rules::check_no_index_derivative("gather", argnums, 1,
                                   static_cast<int>(axes_.size()));
  return {gather(tangents[0], idx, axes_, slice_sizes_, s)};
}

// Each output element came from one element of a: cotangents go back
// there, and repeated indices (or overlapping slices) accumulate.
std::vector<array> Gather::vjp(const Arrays& primals, const Arrays& cts,
                               const std::vector<int>& argnums, const Arrays&) {
  auto s = stream();
  Arrays idx = index_inputs(primals, axes_.size());
  rules::check_no_index_derivative("gather", argnums, 1,
                                   static_cast<int>(axes_.size()));
  Arrays out;
  for (int arg : argnums) {
    out.push_back(
        arg == 0 ? scatter_add(zeros_like(primals[0], s), idx, cts[0], axes_, s)
                 : zeros_like(primals[arg], s));
  }
  return out;
}

Batched Gather::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  auto s = stream();
  int b = rules::batch_size(inputs, axes);
  int nb = 0;
  Arrays idx = batch_indices(inputs, axes, axes_.size(), b, nb, s);
  array a = rules::to_front(inputs[0], axes[0], b, s);
  array g =
      gather(a, idx, batch_axes(axes_), rules::prepend(1, slice_sizes_), s);
  return {{squeeze(g, nb + 1, s)}, {0}};
}

// --- Scatter: inputs (a, indices..., updates) ---

std::vector<array> Scatter::jvp(const Arrays& primals, const Arrays& tangents,
                                const std::vector<int>& argnums) {
  auto s = stream();
  size_t k = axes_.size();
  Arrays idx = index_inputs(primals, k);
  rules::check_no_index_derivative(op_name(), argnums, 1, static_cast<int>(k));
  const array& a = primals[0];
  const array& u = primals[k + 1];
  array ta = rules::tangent_or_zeros(primals, tangents, argnums, 0, s);
  array tu = rules::tangent_or_zeros(primals, tangents, argnums, k + 1, s);
  switch (reduce_) {
    case None:
    case Sum:
      return {scatter_kind(reduce_, ta, idx, tu, axes_, s)};
    case Prod:
      return {add(scatter_prod(ta, idx, u, axes_, s),
                  scatter_add(zeros_like(a, s), idx,
                              multiply(tu, prod_others(a, idx, u, axes_, s), s),
                              axes_, s),
                  s)};
    default: {
      array out = scatter_kind(reduce_, a, idx, u, axes_, s);
      Ties t = ties(a, idx, u, out, axes_, s);
      array num = add(
          multiply(ta, t.eq_a, s),
          scatter_add(zeros_like(a, s), idx, multiply(tu, t.eq_u, s), axes_, s),
          s);
      return {divide(num, t.count, s)};
    }
  }
}

// Overwriting: a's elements survive where nothing was written, and each
// output element's cotangent goes to its last writer only (found by
// scattering the updates' positions). Adding: both pass straight through.
std::vector<array> Scatter::vjp(const Arrays& primals, const Arrays& cts,
                                const std::vector<int>& argnums,
                                const Arrays& outputs) {
  auto s = stream();
  size_t k = axes_.size();
  Arrays idx = index_inputs(primals, k);
  const array& a = primals[0];
  const array& u = primals[k + 1];
  const array& ct = cts[0];
  Shape U = slice_of(u, k > 0 ? idx[0].ndim() : 0);
  rules::check_no_index_derivative(op_name(), argnums, 1, static_cast<int>(k));
  Arrays out;
  for (int arg : argnums) {
    bool da = arg == 0;
    switch (reduce_) {
      case None: {
        if (da) {
          out.push_back(scatter(ct, idx, zeros_like(u, s), axes_, s));
          break;
        }
        Dtype it = u.size() > (1LL << 30) ? int64 : int32;
        array ids = reshape(arange(0.0, static_cast<double>(u.size()), it, s),
                            u.shape(), s);
        array w = scatter(full(a.shape(), -1, it, s), idx, ids, axes_, s);
        array last = equal(gather(w, idx, axes_, U, s), ids, s);
        out.push_back(
            where(last, gather(ct, idx, axes_, U, s), zeros_like(u, s), s));
        break;
      }
      case Sum:
        out.push_back(da ? ct : gather(ct, idx, axes_, U, s));
        break;
      case Prod:
        out.push_back(da ? scatter_prod(ct, idx, u, axes_, s)
                         : multiply(gather(ct, idx, axes_, U, s),
                                    prod_others(a, idx, u, axes_, s), s));
        break;
      default: {
        Ties t = ties(a, idx, u, outputs[0], axes_, s);
        array share = divide(ct, t.count, s);
        out.push_back(
            da ? multiply(share, t.eq_a, s)
               : multiply(gather(share, idx, axes_, U, s), t.eq_u, s));
      }
    }
  }
  return out;
}

Batched Scatter::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  auto s = stream();
  size_t k = axes_.size();
  int b = rules::batch_size(inputs, axes);
  int nb = 0;
  Arrays idx = batch_indices(inputs, axes, k, b, nb, s);
  array a = rules::to_front(inputs[0], axes[0], b, s);
  array u = rules::to_front(inputs[k + 1], axes[k + 1], b, s);
  u = expand_dims(u, nb + 1, s);
  return {{scatter_kind(reduce_, a, idx, u, batch_axes(axes_), s)}, {0}};
}

}  // namespace fluxion
