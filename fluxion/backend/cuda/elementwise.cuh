// Elementwise kernels over the shared functors (backend/common/*_ops.h):
// one template per arity, with the CPU's layout rules (elementwise.h):
// contiguous inputs keep their layout over data_size, a broadcast scalar
// side is read once, anything else takes the strided kernel over collapsed
// dimensions into a row-contiguous output. Inputs are computed in
// compute_t (float for half types), as on the CPU.
#pragma once

#include "fluxion/backend/common/binary_ops.h"
#include "fluxion/backend/common/ternary_ops.h"
#include "fluxion/backend/common/unary_ops.h"
#include "fluxion/backend/cuda/kernels.cuh"

namespace fluxion::cu {

// Over data_size elements; `packed` (the host checked both pointers'
// alignment) moves 16 bytes per access, the remainder element by element.
template <typename In, typename Out, typename Op>
__global__ void unary_flat(const In* x, Out* y, int64_t n, bool packed) {
  constexpr int V = pack_width<In, Out>();
  int64_t done = 0;
  if (packed) {
    using PI = Pack<In, V>;
    using PO = Pack<Out, V>;
    const int64_t nv = n / V;
    FLUXION_GRID_LOOP(i, nv) {
      PI a = reinterpret_cast<const PI*>(x)[i];
      PO r;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        r.v[k] = convert<Out>(Op{}(convert<compute_t<In>>(a.v[k])));
      }
      reinterpret_cast<PO*>(y)[i] = r;
    }
    done = nv * V;
  }
  for (int64_t i = done + global_thread(); i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    y[i] = convert<Out>(Op{}(convert<compute_t<In>>(x[i])));
  }
}

template <typename In, typename Out, typename Op>
__global__ void unary_strided(const In* x, Out* y, int64_t n, Layout l) {
  FLUXION_GRID_LOOP(i, n) {
    y[i] = convert<Out>(Op{}(convert<compute_t<In>>(x[offset_of(l, 0, i)])));
  }
}

template <typename In, typename Out, typename Op>
void unary(const array& in, array& out, const char* name) {
  cudaStream_t s = current_stream();
  if (in.flags().contiguous) {
    alloc_like(in, out, true);
    int64_t n = in.data_size();
    if (n > 0) {
      constexpr int V = pack_width<In, Out>();
      const In* x = ptr<const In>(in);
      Out* y = ptr<Out>(out);
      const bool packed = pack_aligned<In, V>(x) && pack_aligned<Out, V>(y);
      unary_flat<In, Out, Op>
          <<<blocks_for(packed ? n / V + 1 : n, 2), kThreads, 0, s>>>(
              x, y, n, packed);
    }
  } else {
    alloc(out);
    int64_t n = out.size();
    if (n > 0) {
      Layout l = collapse(in.shape(), {in.strides()}, name);
      unary_strided<In, Out, Op><<<blocks_for(n, 4), kThreads, 0, s>>>(
          ptr<const In>(in), ptr<Out>(out), n, l);
    }
  }
  check_launch(name);
}

// Binary: Mode a FlatMode (0 both flat, 1 a scalar, 2 b scalar);
// `packed` as unary_flat.
template <typename In, typename Out, typename Op, int Mode>
__global__ void binary_flat(const In* a, const In* b, Out* y, int64_t n,
                            bool packed) {
  using C = compute_t<In>;
  constexpr int V = pack_width<In, Out>();
  int64_t done = 0;
  if (packed) {
    using PI = Pack<In, V>;
    using PO = Pack<Out, V>;
    const int64_t nv = n / V;
    const C sa = convert<C>(a[0]);
    const C sb = convert<C>(b[0]);
    FLUXION_GRID_LOOP(i, nv) {
      PI pa, pb;
      if constexpr (Mode != 1) {
        pa = reinterpret_cast<const PI*>(a)[i];
      }
      if constexpr (Mode != 2) {
        pb = reinterpret_cast<const PI*>(b)[i];
      }
      PO r;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        C x = Mode == 1 ? sa : convert<C>(pa.v[k]);
        C z = Mode == 2 ? sb : convert<C>(pb.v[k]);
        r.v[k] = convert<Out>(Op{}(x, z));
      }
      reinterpret_cast<PO*>(y)[i] = r;
    }
    done = nv * V;
  }
  for (int64_t i = done + global_thread(); i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    C x = convert<C>(a[Mode == 1 ? 0 : i]);
    C z = convert<C>(b[Mode == 2 ? 0 : i]);
    y[i] = convert<Out>(Op{}(x, z));
  }
}

template <typename In, typename Out, typename Op>
__global__ void binary_strided(const In* a, const In* b, Out* y, int64_t n,
                               Layout l) {
  using C = compute_t<In>;
  FLUXION_GRID_LOOP(i, n) {
    int64_t oa = 0, ob = 0, r = i;
    for (int d = l.ndim - 1; d >= 0; --d) {
      int64_t q = r % l.shape[d];
      r /= l.shape[d];
      oa += q * l.strides[0][d];
      ob += q * l.strides[1][d];
    }
    y[i] = convert<Out>(Op{}(convert<C>(a[oa]), convert<C>(b[ob])));
  }
}

// The flat layouts a binary op takes (kFlatBoth: both operands over the
// same data_size; kFlatScalarA / B: that one is a single element read
// once) and the operand the output is laid out as and may take the buffer
// of (either one when both are full-size); false: the strided kernel.
enum FlatMode : int { kFlatBoth, kFlatScalarA, kFlatScalarB };
inline bool flat_layout(const array& a, const array& b, FlatMode& mode,
                        const array*& like) {
  if (a.flags().contiguous && b.flags().contiguous &&
      a.strides() == b.strides() && a.data_size() == b.data_size()) {
    mode = kFlatBoth;
    like = !donatable(a) && donatable(b) ? &b : &a;
  } else if (a.data_size() == 1 && b.flags().contiguous) {
    mode = kFlatScalarA;
    like = &b;
  } else if (b.data_size() == 1 && a.flags().contiguous) {
    mode = kFlatScalarB;
    like = &a;
  } else {
    return false;
  }
  return true;
}

template <typename In, typename Out, typename Op>
void binary(const array& a, const array& b, array& out, const char* name) {
  cudaStream_t s = current_stream();
  const In* pa = ptr<const In>(a);
  const In* pb = ptr<const In>(b);
  auto flat = [&](auto mode, const array& like) {
    alloc_like(like, out, true);
    constexpr int M = decltype(mode)::value;
    constexpr int V = pack_width<In, Out>();
    int64_t n = like.data_size();
    if (n > 0) {
      Out* y = ptr<Out>(out);
      const bool packed = (M == 1 || pack_aligned<In, V>(pa)) &&
                          (M == 2 || pack_aligned<In, V>(pb)) &&
                          pack_aligned<Out, V>(y);
      binary_flat<In, Out, Op, M>
          <<<blocks_for(packed ? n / V + 1 : n, 2), kThreads, 0, s>>>(
              pa, pb, y, n, packed);
    }
  };
  FlatMode mode;
  const array* like = nullptr;
  if (!flat_layout(a, b, mode, like)) {
    alloc(out);
    int64_t n = out.size();
    if (n > 0) {
      Layout l = collapse(out.shape(), {a.strides(), b.strides()}, name);
      binary_strided<In, Out, Op><<<blocks_for(n, 4), kThreads, 0, s>>>(
          pa, pb, ptr<Out>(out), n, l);
    }
  } else if (mode == kFlatBoth) {
    flat(std::integral_constant<int, kFlatBoth>{}, *like);
  } else if (mode == kFlatScalarA) {
    flat(std::integral_constant<int, kFlatScalarA>{}, *like);
  } else {
    flat(std::integral_constant<int, kFlatScalarB>{}, *like);
  }
  check_launch(name);
}

}  // namespace fluxion::cu
