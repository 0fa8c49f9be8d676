#include "fluxion/ops/linalg.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <sstream>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/primitive_args.h"

namespace fluxion {

namespace {

void check_inexact(Dtype t, const char* op) {
  if (!is_inexact(t)) {
    throw std::invalid_argument(
        std::string("[") + op +
        "] Only inexact (floating point and complex) types are supported; "
        "got " +
        dtype_name(t) + ".");
  }
}

// The operands of a batched product, ready for a Matmul or AddMM node:
// (..., M, K) and (..., K, N) with equal batch shapes.
struct Operands {
  array a, b;
  Shape out_shape;           // (..., M, N)
  std::vector<int> squeeze;  // axes of out_shape that 1-D inputs added
  Dtype dtype;
};

// NumPy matmul rules: a 1-D `a` becomes (1, K) and a 1-D `b` (K, 1), the
// added axes being removed from the result; batch dims broadcast.
Operands prepare(const array& a_in, const array& b_in, Dtype dtype,
                 const char* op, Stream st) {
  if (a_in.ndim() == 0 || b_in.ndim() == 0) {
    throw std::invalid_argument(
        std::string("[") + op +
        "] Inputs must have at least one dimension; got shapes " +
        shape_str(a_in.shape()) + " and " + shape_str(b_in.shape()) + ".");
  }
  check_inexact(dtype, op);
  int ka = a_in.shape(-1);
  int kb = b_in.ndim() == 1 ? b_in.shape(0) : b_in.shape(-2);
  if (ka != kb) {
    std::ostringstream msg;
    msg << "[" << op << "] Last dimension of first input with shape "
        << shape_str(a_in.shape())
        << " must match second to last dimension of second input with shape "
        << shape_str(b_in.shape()) << ".";
    throw std::invalid_argument(msg.str());
  }
  array a = astype(a_in, dtype, st);
  array b = astype(b_in, dtype, st);
  if (a.ndim() == 1) {
    a = expand_dims(a, 0, st);
  }
  if (b.ndim() == 1) {
    b = expand_dims(b, 1, st);
  }
  Shape batch_a(a.shape().begin(), a.shape().end() - 2);
  Shape batch_b(b.shape().begin(), b.shape().end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(batch_a, batch_b, op);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(
        std::string("[") + op + "] Batch dimensions of inputs with shapes " +
        shape_str(a_in.shape()) + " and " + shape_str(b_in.shape()) +
        " cannot be broadcast.");
  }
  int m = a.shape(-2), k = a.shape(-1), n = b.shape(-1);
  Shape sa = batch, sb = batch, out = batch;
  sa.insert(sa.end(), {m, k});
  sb.insert(sb.end(), {k, n});
  out.insert(out.end(), {m, n});
  std::vector<int> squeeze;
  int nd = static_cast<int>(out.size());
  if (a_in.ndim() == 1) {
    squeeze.push_back(nd - 2);
  }
  if (b_in.ndim() == 1) {
    squeeze.push_back(nd - 1);
  }
  // Broadcast batch dims are views with stride 0: the kernel reads them in
  // place.
  // Under a shapeless compile each is broadcast against the other's batch
  // dims, recomputed on every replay (shape.h, BroadcastAxes).
  return {detail::broadcast_against(a, {b}, sa, 2, st),
          detail::broadcast_against(b, {a}, sb, 2, st), std::move(out),
          std::move(squeeze), dtype};
}

array finish(const array& out, const Operands& ops, Stream st) {
  return ops.squeeze.empty() ? out : squeeze(out, ops.squeeze, st);
}

}  // namespace

array matmul(const array& a, const array& b, StreamOrDevice s) {
  auto st = to_stream(s);
  auto ops = prepare(a, b, promote_types(a.dtype(), b.dtype()), "matmul", st);
  auto out = array(ops.out_shape, ops.dtype, std::make_shared<Matmul>(st),
                   {ops.a, ops.b});
  return finish(out, ops, st);
}

array addmm(const array& c, const array& a, const array& b, float alpha,
            float beta, StreamOrDevice s) {
  auto st = to_stream(s);
  auto ops = prepare(a, b, result_type({a, b, c}), "addmm", st);
  // c broadcasts to the result as the user sees it (without the unit dims
  // that 1-D inputs added), then gets those dims back as a view.
  Shape shape;
  for (int i = 0; i < static_cast<int>(ops.out_shape.size()); ++i) {
    if (std::find(ops.squeeze.begin(), ops.squeeze.end(), i) ==
        ops.squeeze.end()) {
      shape.push_back(ops.out_shape[i]);
    }
  }
  bool ok = c.ndim() <= static_cast<int>(shape.size());
  for (int i = 1; ok && i <= c.ndim(); ++i) {
    int d = c.shape(-i);
    ok = d == 1 || d == shape[shape.size() - i];
  }
  if (!ok) {
    throw std::invalid_argument(
        "[addmm] Input c with shape " + shape_str(c.shape()) +
        " cannot be broadcast to the shape " + shape_str(shape) +
        " of the product of inputs with shapes " + shape_str(a.shape()) +
        " and " + shape_str(b.shape()) + ".");
  }
  auto cc = expand_dims(broadcast_to(astype(c, ops.dtype, st), shape, st),
                        ops.squeeze, st);
  auto out =
      array(ops.out_shape, ops.dtype, std::make_shared<AddMM>(st, alpha, beta),
            {ops.a, ops.b, std::move(cc)});
  return finish(out, ops, st);
}

bool AddMM::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& r = static_cast<const AddMM&>(o);
  return r.alpha_ == alpha_ && r.beta_ == beta_;
}

std::vector<PrimitiveArg> AddMM::state() const {
  return export_state(double{alpha_}, double{beta_});
}

std::shared_ptr<Primitive> AddMM::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "AddMM");
  return std::make_shared<AddMM>(s, a.f32(0), a.f32(1));
}

namespace {

Shape matmul_shape(const std::vector<array>& in) {
  Shape out = in[0].shape();
  out.back() = in[1].shape().back();
  return out;
}

}  // namespace

std::vector<Shape> Matmul::output_shapes(const std::vector<array>& in) {
  return {matmul_shape(in)};
}

std::vector<Shape> AddMM::output_shapes(const std::vector<array>& in) {
  return {matmul_shape(in)};
}

// --- transformation rules ---
//
// The primitives see operands of equal batch shapes: the matmul and addmm
// ops broadcast batch dims (and add the unit dims of 1-D operands) with
// view ops before building the node. So the cotangents computed here
// already have the primals' shapes, and the sums over broadcast batch dims
// (and the squeezes of unit dims) happen in the vjps of those view nodes.
//
// Complex operands: the rules are the plain (holomorphic) derivatives of
// a @ b, without conjugation, as in MLX and JAX: the vjp with respect to a
// is ct @ b^T and the jvp is ta @ b + a @ tb. A gradient of a real loss in
// the conjugate (Wirtinger) sense is conj of what vjp returns.
//
// Every rule uses public ops only, so its results can be differentiated and
// vmapped again (grad of grad, per-example gradients).

namespace {

array mT(const array& x, Stream s) { return swapaxes(x, -1, -2, s); }

array scaled(const array& x, float f, Stream s) {
  return f == 1.0f ? x : multiply(x, array(f, x.dtype()), s);
}

// The mapped axis first, or the input unchanged when it is not mapped.
array mapped_first(const array& x, int axis, Stream s) {
  return axis <= 0 ? x : moveaxis(x, axis, 0, s);
}

// d(alpha * a @ b) for the tangents of a and/or b (argnums 0 and 1), added
// to `acc` scaled by `acc_scale` when there is one: the sum of products
// runs through addmm so each term costs one fused node.
std::optional<array> product_tangent(const std::vector<array>& primals,
                                     const std::vector<array>& tangents,
                                     const std::vector<int>& argnums,
                                     float alpha, std::optional<array> acc,
                                     float acc_scale, Stream s) {
  const array& a = primals[0];
  const array& b = primals[1];
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] > 1) {
      continue;
    }
    // Tangents may arrive in another dtype; the output's is the primals'.
    auto t = astype(tangents[i], a.dtype(), s);
    const array& x = argnums[i] == 0 ? t : a;
    const array& y = argnums[i] == 0 ? b : t;
    if (acc) {
      acc = addmm(*acc, x, y, alpha, acc_scale, s);
    } else {
      acc = scaled(matmul(x, y, s), alpha, s);
    }
    acc_scale = 1.0f;
  }
  if (acc && acc_scale != 1.0f) {
    acc = scaled(*acc, acc_scale, s);
  }
  return acc;
}

// vjp of alpha * a @ b with respect to a (arg 0) or b (arg 1).
array product_cotangent(const std::vector<array>& primals, const array& ct,
                        int arg, float alpha, Stream s) {
  auto g = arg == 0 ? matmul(ct, mT(primals[1], s), s)
                    : matmul(mT(primals[0], s), ct, s);
  return scaled(g, alpha, s);
}

}  // namespace

std::vector<array> Matmul::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums,
                               const std::vector<array>&) {
  std::vector<array> vjps;
  for (int a : argnums) {
    vjps.push_back(
        product_cotangent(primals, cotangents[0], a, 1.0f, stream()));
  }
  return vjps;
}

std::vector<array> Matmul::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  auto t = product_tangent(primals, tangents, argnums, 1.0f, std::nullopt,
                           1.0f, stream());
  return std::vector<array>{
      t ? *t
        : zeros(output_shapes(primals)[0], primals[0].dtype(), stream())};
}

// The mapped axes go first and become a leading batch dim. An unmapped
// operand has the same batch dims minus that one, so the matmul op's
// right-aligned broadcasting pairs them up and repeats it along the map axis
// as a stride-0 view, without a copy.
std::pair<std::vector<array>, std::vector<int>> Matmul::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  auto a = mapped_first(inputs[0], axes[0], s);
  auto b = mapped_first(inputs[1], axes[1], s);
  return std::make_pair(std::vector<array>{matmul(a, b, s)},
                        std::vector<int>{0});
}

std::vector<array> AddMM::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents,
                              const std::vector<int>& argnums,
                              const std::vector<array>&) {
  std::vector<array> vjps;
  for (int a : argnums) {
    vjps.push_back(a == 2 ? scaled(cotangents[0], beta_, stream())
                          : product_cotangent(primals, cotangents[0], a,
                                              alpha_, stream()));
  }
  return vjps;
}

std::vector<array> AddMM::jvp(const std::vector<array>& primals,
                              const std::vector<array>& tangents,
                              const std::vector<int>& argnums) {
  auto s = stream();
  std::optional<array> tc;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 2) {
      tc = astype(tangents[i], primals[2].dtype(), s);
    }
  }
  auto t = product_tangent(primals, tangents, argnums, alpha_, tc, beta_, s);
  return std::vector<array>{
      t ? *t : zeros(output_shapes(primals)[0], primals[0].dtype(), s)};
}

std::pair<std::vector<array>, std::vector<int>> AddMM::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  auto a = mapped_first(inputs[0], axes[0], s);
  auto b = mapped_first(inputs[1], axes[1], s);
  auto c = mapped_first(inputs[2], axes[2], s);
  if (axes[0] < 0 && axes[1] < 0) {
    // Only c is mapped: one product, added to every c. (addmm needs c to
    // broadcast to the product's shape, which here lacks the map axis.)
    auto p = scaled(matmul(a, b, s), alpha_, s);
    return std::make_pair(std::vector<array>{add(p, scaled(c, beta_, s), s)},
                          std::vector<int>{0});
  }
  return std::make_pair(std::vector<array>{addmm(c, a, b, alpha_, beta_, s)},
                        std::vector<int>{0});
}

// --- composites ---

array outer(const array& a, const array& b, StreamOrDevice s) {
  auto st = to_stream(s);
  return multiply(reshape(a, {static_cast<int32_t>(a.size()), 1}, st),
                  flatten(b, 0, -1, st), st);
}

namespace {

int64_t product(const array& x, const std::vector<int>& axes) {
  int64_t n = 1;
  for (int ax : axes) {
    n *= x.shape(ax);
  }
  return n;
}

bool is_iota(const std::vector<int>& first, const std::vector<int>& second) {
  int i = 0;
  for (int ax : first) {
    if (ax != i++) {
      return false;
    }
  }
  for (int ax : second) {
    if (ax != i++) {
      return false;
    }
  }
  return true;
}

// `x` as a (prod(rows), prod(cols)) matrix whose rows run over the axes
// `rows` and columns over `cols`. When the axes are already grouped the
// result is a view (reshape, or reshape and transpose, which matmul reads
// in place); only other orders need a copy.
array as_matrix(const array& x, const std::vector<int>& rows,
                const std::vector<int>& cols, Stream st) {
  auto r = static_cast<int32_t>(product(x, rows));
  auto c = static_cast<int32_t>(product(x, cols));
  if (is_iota(rows, cols)) {
    return reshape(x, {r, c}, st);
  }
  if (is_iota(cols, rows)) {
    return transpose(reshape(x, {c, r}, st), st);
  }
  std::vector<int> perm = rows;
  perm.insert(perm.end(), cols.begin(), cols.end());
  return reshape(transpose(x, perm, st), {r, c}, st);
}

std::vector<int> checked_axes(const std::vector<int>& axes, const array& x,
                              const char* which, const char* op) {
  std::vector<int> out;
  for (int ax : axes) {
    int a = normalize_axis(ax, x.ndim(), op);
    if (std::find(out.begin(), out.end(), a) != out.end()) {
      throw std::invalid_argument(std::string("[") + op + "] Repeated axis " +
                                  std::to_string(ax) + " in " + which + " " +
                                  vec_str(axes) + ".");
    }
    out.push_back(a);
  }
  return out;
}

array tensordot_impl(const array& a, const array& b,
                     const std::vector<int>& axes_a,
                     const std::vector<int>& axes_b, const char* op,
                     StreamOrDevice s) {
  if (axes_a.size() != axes_b.size()) {
    throw std::invalid_argument(std::string("[") + op + "] The axes of a " +
                                vec_str(axes_a) + " and the axes of b " +
                                vec_str(axes_b) +
                                " must have the same length.");
  }
  auto ca = checked_axes(axes_a, a, "axes_a", op);
  auto cb = checked_axes(axes_b, b, "axes_b", op);
  for (size_t i = 0; i < ca.size(); ++i) {
    if (a.shape(ca[i]) != b.shape(cb[i])) {
      std::ostringstream msg;
      msg << "[" << op << "] Contracted axes must have equal sizes; axis "
          << axes_a[i] << " of a with shape " << shape_str(a.shape())
          << " has size " << a.shape(ca[i]) << " but axis " << axes_b[i]
          << " of b with shape " << shape_str(b.shape()) << " has size "
          << b.shape(cb[i]) << ".";
      throw std::invalid_argument(msg.str());
    }
  }
  check_inexact(promote_types(a.dtype(), b.dtype()), op);
  auto free_axes = [](const array& x, const std::vector<int>& contracted) {
    std::vector<int> f;
    for (int i = 0; i < x.ndim(); ++i) {
      if (std::find(contracted.begin(), contracted.end(), i) ==
          contracted.end()) {
        f.push_back(i);
      }
    }
    return f;
  };
  auto fa = free_axes(a, ca);
  auto fb = free_axes(b, cb);
  auto st = to_stream(s);
  auto out = matmul(as_matrix(a, fa, ca, st), as_matrix(b, cb, fb, st), st);
  Shape shape;
  for (int ax : fa) {
    shape.push_back(a.shape(ax));
  }
  for (int ax : fb) {
    shape.push_back(b.shape(ax));
  }
  return reshape(out, std::move(shape), st);
}

}  // namespace

array tensordot(const array& a, const array& b, const std::vector<int>& axes_a,
                const std::vector<int>& axes_b, StreamOrDevice s) {
  return tensordot_impl(a, b, axes_a, axes_b, "tensordot", s);
}

array tensordot(const array& a, const array& b, int axes, StreamOrDevice s) {
  if (axes < 0 || axes > a.ndim() || axes > b.ndim()) {
    std::ostringstream msg;
    msg << "[tensordot] The number of axes must be in [0, min(a.ndim, "
        << "b.ndim)]; got " << axes << " for inputs with shapes "
        << shape_str(a.shape()) << " and " << shape_str(b.shape()) << ".";
    throw std::invalid_argument(msg.str());
  }
  std::vector<int> axes_a(axes), axes_b(axes);
  std::iota(axes_a.begin(), axes_a.end(), a.ndim() - axes);
  std::iota(axes_b.begin(), axes_b.end(), 0);
  return tensordot_impl(a, b, axes_a, axes_b, "tensordot", s);
}

array inner(const array& a, const array& b, StreamOrDevice s) {
  if (a.ndim() == 0 || b.ndim() == 0) {
    return multiply(a, b, s);
  }
  if (a.shape(-1) != b.shape(-1)) {
    throw std::invalid_argument(
        "[inner] Last dimension of first input with shape " +
        shape_str(a.shape()) +
        " must match last dimension of second input with shape " +
        shape_str(b.shape()) + ".");
  }
  return tensordot_impl(a, b, {-1}, {-1}, "inner", s);
}

}  // namespace fluxion
