// The GPU FFT's steps (backend/common/fft_program.h), checked without a GPU:
// each program runs here through an emulation of what its steps mean on the
// GPU, and its output is compared with the CPU kernel's on the same input.
//
// The emulated cuFFT follows cuFFT's documented advanced data layout, not
// the planner: element (x, y, z) of batch b of a rank-3 plan's input is at
// b * idist + ((x * inembed[1] + y) * inembed[2] + z) * istride (rank 2: (x
// * inembed[1] + y) * istride; rank 1: x * istride), the output likewise
// with onembed/ostride/odist, in elements of each side's type; R2C writes
// and C2R reads n[rank-1] / 2 + 1 entries along the last dim; C2C forward
// is unnormalized with exp(-2 pi i jk / n), inverse with the + sign. It
// fails the test on any index outside its buffer, an embed smaller than
// the dims it holds, two writes to one element in one execution, real data
// at an odd element offset (cuFFT wants it aligned as complex), an
// in-place transform whose layouts differ, or a length-1 dim. It is
// pessimistic where cuFFT promises nothing: C2R leaves its input
// overwritten (NaN here), its output adds the imaginary parts of
// frequency 0 and n / 2 (which the real plan of the CPU ignores and a
// packed algorithm may not), scratch and output buffers start as NaN, and
// a donated output holds the input while the input buffer is gone (NaN).
#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <sstream>

#include "fluxion/backend/common/fft_program.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/fft.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;
namespace fp = fluxion::fft_program;

namespace {

using cd = std::complex<double>;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

struct Buf {
  bool complex;
  std::vector<cd> v;  // real buffers use the real parts
};

std::string ctx_str(const std::string& what, const fp::Step& s) {
  return what + " [" + s.plan.str() + ", loops " + std::to_string(s.loops) +
         "]";
}

int64_t lin(const int64_t* idx, const int64_t* embed, int rank) {
  int64_t off = idx[0];
  for (int k = 1; k < rank; ++k) {
    off = off * embed[k] + idx[k];
  }
  return off;
}

// Unnormalized 1-D DFTs along dim `d` of a row-major block of `dims`.
void dft_along(std::vector<cd>& a, const std::vector<int64_t>& dims, int d,
               double sign) {
  int64_t n = dims[d], inner = 1, outer = 1;
  for (size_t k = d + 1; k < dims.size(); ++k) inner *= dims[k];
  for (int k = 0; k < d; ++k) outer *= dims[k];
  std::vector<cd> w(n);
  for (int64_t k = 0; k < n; ++k) {
    double ang = sign * 2 * std::numbers::pi * double(k) / double(n);
    w[k] = cd(std::cos(ang), std::sin(ang));
  }
  std::vector<cd> line(n);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t t = 0; t < n; ++t) line[t] = a[(o * n + t) * inner + i];
      for (int64_t f = 0; f < n; ++f) {
        cd s = 0;
        for (int64_t t = 0; t < n; ++t) s += line[t] * w[(f * t) % n];
        a[(o * n + f) * inner + i] = s;
      }
    }
}

// One cuFFT execution from `in` at element `in_off` to `out` at `out_off`.
void exec(const fp::Step& s, Buf& in, int64_t in_off, Buf& out,
          int64_t out_off) {
  const fp::PlanShape& p = s.plan;
  const std::string where = ctx_str("transform", s);
  ASSERT_TRUE(p.rank >= 1 && p.rank <= 3) << where;
  ASSERT_GE(p.batch, 1) << where;
  const bool r2c = p.kind == fp::Kind::R2C, c2r = p.kind == fp::Kind::C2R;
  ASSERT_EQ(in.complex, !r2c) << where << ": input buffer type";
  ASSERT_EQ(out.complex, !c2r) << where << ": output buffer type";
  // The dims stored on each side.
  int64_t idims[3], odims[3];
  for (int k = 0; k < p.rank; ++k) {
    ASSERT_GE(p.n[k], 2) << where << ": a length-1 dim";
    idims[k] = odims[k] = p.n[k];
  }
  const int l = p.rank - 1;
  if (r2c) odims[l] = p.n[l] / 2 + 1;
  if (c2r) idims[l] = p.n[l] / 2 + 1;
  for (int k = 1; k < p.rank; ++k) {
    ASSERT_GE(p.inembed[k], idims[k]) << where << ": inembed";
    ASSERT_GE(p.onembed[k], odims[k]) << where << ": onembed";
  }
  ASSERT_TRUE(p.istride >= 1 && p.ostride >= 1 && p.idist >= 0 && p.odist >= 0)
      << where;
  if (r2c) {
    ASSERT_EQ(in_off % 2, 0) << where << ": unaligned real input";
  }
  if (c2r) {
    ASSERT_EQ(out_off % 2, 0) << where << ": unaligned real output";
  }
  if (&in == &out) {
    ASSERT_EQ(p.kind, fp::Kind::C2C) << where << ": in-place real transform";
    ASSERT_EQ(in_off, out_off) << where << ": overlapping, not in place";
    ASSERT_TRUE(p.istride == p.ostride && p.idist == p.odist) << where;
    for (int k = 1; k < p.rank; ++k) {
      ASSERT_EQ(p.inembed[k], p.onembed[k]) << where;
    }
  }
  int64_t isize = 1, osize = 1, full = 1;
  for (int k = 0; k < p.rank; ++k) {
    isize *= idims[k];
    osize *= odims[k];
    full *= p.n[k];
  }
  // Element e (row-major over `dims`) of one transform, placed in the
  // stored dims `embed` (in units of the stride).
  auto position = [&](int64_t e, const auto& dims, const auto& embed) {
    int64_t idx[3] = {0, 0, 0};
    for (int k = l; k >= 0; --k) {
      idx[k] = e % dims[k];
      e /= dims[k];
    }
    return lin(idx, embed, p.rank);
  };
  // Gather every batch's input first (an in-place execution reads all of
  // its input before its output lands, as far as the caller can tell).
  std::vector<std::vector<cd>> ins(p.batch);
  std::vector<int64_t> read;
  for (int64_t b = 0; b < p.batch; ++b) {
    ins[b].resize(isize);
    for (int64_t e = 0; e < isize; ++e) {
      const int64_t at = in_off + b * p.idist +
                         position(e, idims, p.inembed) * p.istride;
      ASSERT_TRUE(at >= 0 && at < int64_t(in.v.size()))
          << where << ": input index " << at << " of " << in.v.size();
      ins[b][e] = in.complex ? in.v[at] : cd(in.v[at].real(), 0);
      read.push_back(at);
    }
  }
  std::vector<char> written(out.v.size(), 0);
  std::vector<std::pair<int64_t, cd>> writes;
  for (int64_t b = 0; b < p.batch; ++b) {
    std::vector<cd> res(osize);
    std::vector<int64_t> dims(p.n, p.n + p.rank);
    if (p.kind == fp::Kind::C2C || r2c) {
      std::vector<cd> a = ins[b];  // full dims for both
      for (int k = 0; k < p.rank; ++k) {
        dft_along(a, dims, k, s.inverse && !r2c ? 1.0 : -1.0);
      }
      if (r2c) {
        // Keep the first n/2 + 1 entries along the last dim.
        int64_t n = p.n[l], m = n / 2 + 1, rows = full / n;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t k = 0; k < m; ++k) res[r * m + k] = a[r * n + k];
      } else {
        res = a;
      }
    } else {
      ASSERT_EQ(p.rank, 1) << where << ": multi-dimensional C2R";
      int64_t n = p.n[0], m = n / 2 + 1;
      const auto& x = ins[b];
      std::vector<cd> a(n);
      for (int64_t k = 0; k < n; ++k) {
        a[k] = k < m ? x[k] : std::conj(x[n - k]);
      }
      dft_along(a, {n}, 0, 1.0);
      double poison = x[0].imag() + (n % 2 == 0 ? x[m - 1].imag() : 0.0);
      for (int64_t j = 0; j < n; ++j) res[j] = cd(a[j].real() + poison, 0);
    }
    for (int64_t e = 0; e < osize; ++e) {
      const int64_t at = out_off + b * p.odist +
                         position(e, odims, p.onembed) * p.ostride;
      ASSERT_TRUE(at >= 0 && at < int64_t(out.v.size()))
          << where << ": output index " << at << " of " << out.v.size();
      ASSERT_FALSE(written[at])
          << where << ": element " << at << " written twice";
      written[at] = 1;
      writes.emplace_back(at, res[e]);
    }
  }
  if (c2r) {
    for (int64_t at : read) in.v[at] = cd(kNan, kNan);  // overwritten
  }
  for (auto& [at, v] : writes) out.v[at] = v;
}

void run_program(const fp::Program& prog, std::vector<Buf>& bufs) {
  for (const auto& s : prog.steps) {
    ASSERT_TRUE(s.src >= 0 && s.src < int(bufs.size()));
    ASSERT_TRUE(s.dst >= 0 && s.dst < int(bufs.size()));
    Buf& src = bufs[s.src];
    Buf& dst = bufs[s.dst];
    switch (s.op) {
      case fp::Step::Op::Copy: {
        ASSERT_EQ(s.shape.size(), s.src_strides.size());
        ASSERT_EQ(s.shape.size(), s.dst_strides.size());
        int64_t total = shape_size(s.shape);
        std::vector<std::pair<int64_t, cd>> w;
        for (int64_t e = 0; e < total; ++e) {
          int64_t r = e, a = 0, b = 0;
          for (int d = int(s.shape.size()) - 1; d >= 0; --d) {
            int64_t i = r % s.shape[d];
            r /= s.shape[d];
            a += i * s.src_strides[d];
            b += i * s.dst_strides[d];
          }
          ASSERT_TRUE(a >= 0 && a < int64_t(src.v.size())) << "copy source";
          ASSERT_TRUE(b >= 0 && b < int64_t(dst.v.size())) << "copy dest";
          cd v = src.v[a];
          if (!src.complex) v = cd(v.real(), 0);
          if (!dst.complex) v = cd(v.real(), 0);
          w.emplace_back(b, v);
        }
        for (auto& [b, v] : w) dst.v[b] = v;
        break;
      }
      case fp::Step::Op::Transform:
        ASSERT_GE(s.loops, 1);
        for (int64_t l = 0; l < s.loops; ++l) {
          exec(s, src, l * s.in_step, dst, l * s.out_step);
          if (::testing::Test::HasFatalFailure()) return;
        }
        break;
      case fp::Step::Op::Scale:
        ASSERT_TRUE(dst.complex);
        ASSERT_LE(s.elems, int64_t(dst.v.size()));
        for (int64_t i = 0; i < s.elems; ++i) dst.v[i] *= s.factor;
        break;
      case fp::Step::Op::PrepareC2R: {
        ASSERT_TRUE(src.complex && dst.complex);
        ASSERT_LE(s.elems, int64_t(src.v.size()));
        ASSERT_LE(s.elems, int64_t(dst.v.size()));
        for (int64_t i = 0; i < s.elems; ++i) {
          int64_t k = (i / s.inner) % s.m;
          cd v = src.v[i];
          bool self = k == 0 || (s.nyquist && k == s.m - 1);
          dst.v[i] = cd(v.real() * s.factor, self ? 0.0 : v.imag() * s.factor);
        }
        break;
      }
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
}

struct Case {
  Shape in_shape;
  std::vector<int> axes;  // normalized
  bool inverse;
  bool real;
  int n = 0;  // real transforms: the real length along axes.back()
};

std::string describe(const Case& c, const fp::Options& o) {
  std::ostringstream os;
  os << (c.real ? (c.inverse ? "irfftn" : "rfftn")
                : (c.inverse ? "ifftn" : "fftn"))
     << " of " << shape_str(c.in_shape) << " axes (";
  for (int a : c.axes) os << a << ",";
  os << ")";
  if (c.real) os << " n=" << c.n;
  os << " [max_rank " << o.max_rank << ", max_loops " << o.max_loops
     << ", loop_elements " << o.loop_elements
     << (o.in_place ? ", in place" : "") << "]";
  return os.str();
}

std::vector<cd> host_values(const array& x) {
  std::vector<cd> v;
  if (x.dtype() == complex64) {
    auto re = to_vector<double>(real(x, Device::cpu));
    auto im = to_vector<double>(imag(x, Device::cpu));
    for (size_t i = 0; i < re.size(); ++i) v.emplace_back(re[i], im[i]);
  } else {
    for (double r : to_vector<double>(x)) v.emplace_back(r, 0);
  }
  return v;
}

void check(const Case& c, const fp::Options& o, uint32_t seed = 7) {
  const std::string what = describe(c, o);
  SCOPED_TRACE(what);
  Shape out_shape = c.in_shape;
  if (c.real) {
    out_shape[c.axes.back()] = c.inverse ? c.n : c.n / 2 + 1;
  }
  const bool in_complex = !(c.real && !c.inverse);
  const bool out_complex = !(c.real && c.inverse);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  const int64_t count = shape_size(c.in_shape);
  std::vector<float> re(count), im(count);
  for (auto& v : re) v = u(gen);
  for (auto& v : im) v = u(gen);
  array x = array(re.begin(), c.in_shape, float32);
  if (in_complex) {
    x = add(astype(x, complex64),
            multiply(astype(array(im.begin(), c.in_shape, float32), complex64),
                     array(complex64_t(0, 1))));
  }
  x.eval();
  // The CPU kernel of the same primitive.
  array ref(out_shape, out_complex ? complex64 : float32,
            std::make_shared<FFT>(default_stream(Device::cpu), c.axes,
                                  c.inverse, c.real, c.n),
            {x});
  auto want = host_values(ref);
  auto input = host_values(x);

  auto prog =
      fp::plan(c.in_shape, out_shape, c.axes, c.inverse, c.real, c.n, o);
  ASSERT_GE(prog.buffers.size(), 2u);
  std::vector<Buf> bufs;
  for (auto& b : prog.buffers) {
    bufs.push_back(
        {b.complex, std::vector<cd>(shape_size(b.shape), cd(kNan, kNan))});
  }
  ASSERT_EQ(bufs[0].complex, in_complex);
  ASSERT_EQ(bufs[1].complex, out_complex);
  ASSERT_EQ(bufs[0].v.size(), input.size());
  ASSERT_EQ(bufs[1].v.size(), want.size());
  if (o.in_place) {
    bufs[1].v = input;  // the output took the input's buffer
  } else {
    bufs[0].v = input;
  }
  run_program(prog, bufs);
  if (::testing::Test::HasFatalFailure()) return;
  double scale = 1;
  for (auto& w : want) scale = std::max(scale, std::abs(w));
  const double tol = 1e-4 * scale;
  int bad = 0;
  for (size_t i = 0; i < want.size() && bad < 5; ++i) {
    cd g = bufs[1].v[i];
    bool ok = std::isfinite(g.real()) && std::isfinite(g.imag()) &&
              std::abs(g - want[i]) <= tol;
    if (!ok) {
      ADD_FAILURE() << "output " << i << ": got " << g << ", want " << want[i];
      ++bad;
    }
  }
  if (!o.in_place) {
    // The caller's input is never written (C2R overwrites only scratch).
    for (size_t i = 0; i < input.size(); ++i) {
      if (bufs[0].v[i] != input[i]) {
        ADD_FAILURE() << "input element " << i << " was overwritten";
        break;
      }
    }
  }
}

// The option sets every case runs under: the defaults, every batch with
// two strides transposed, every such batch looped (where alignment lets
// it), rank-1 and rank-2 plans only.
std::vector<fp::Options> option_sets() {
  std::vector<fp::Options> v(5);
  v[1].max_loops = 0;
  v[1].loop_elements = int64_t(1) << 62;
  v[2].max_loops = int64_t(1) << 40;
  v[3].max_rank = 1;
  v[4].max_rank = 2;
  return v;
}

void check_all_options(const Case& c) {
  for (const auto& o : option_sets()) {
    check(c, o);
    if (!c.real) {
      auto ip = o;
      ip.in_place = true;
      check(c, ip);
    }
  }
}

// Every nonempty subset of {0, ..., nd - 1}, in increasing and decreasing
// order.
std::vector<std::vector<int>> axis_sets(int nd) {
  std::vector<std::vector<int>> out;
  for (int mask = 1; mask < (1 << nd); ++mask) {
    std::vector<int> a;
    for (int d = 0; d < nd; ++d)
      if (mask >> d & 1) a.push_back(d);
    out.push_back(a);
    if (a.size() > 1) {
      out.emplace_back(a.rbegin(), a.rend());
    }
  }
  return out;
}

}  // namespace

TEST(FftProgram, OneDimensionalLengths) {
  for (int n : {1, 2, 7, 16, 97, 1000, 4096}) {
    for (bool inv : {false, true}) {
      check({{n}, {0}, inv, false}, {});
      check({{3, n}, {1}, inv, false}, {});
      check({{n, 3}, {0}, inv, false}, {});
    }
    check({{n}, {0}, false, true, n}, {});
    check({{n / 2 + 1}, {0}, true, true, n}, {});
    check({{2, n}, {1}, false, true, n}, {});
    check({{2, n / 2 + 1}, {1}, true, true, n}, {});
  }
}

TEST(FftProgram, ThreeDimensionalEveryAxisSet) {
  const Shape s{3, 5, 7};
  for (const auto& axes : axis_sets(3)) {
    for (bool inv : {false, true}) {
      check_all_options({s, axes, inv, false});
      for (int n : {s[axes.back()], 6, 9}) {
        Shape in = s;
        in[axes.back()] = inv ? n / 2 + 1 : n;
        check_all_options({in, axes, inv, true, n});
      }
    }
  }
}

TEST(FftProgram, TwoStridedBatchesLoopedOrTransposed) {
  // The axis in the middle: outer and inner both > 1, even and odd real
  // steps (4 * 5 * 3: an R2C loop would step 15 floats, so it transposes).
  for (const Shape& s :
       {Shape{4, 5, 6}, Shape{4, 5, 3}, Shape{2, 9, 2, 3}, Shape{20, 6, 20}}) {
    for (int ax = 1; ax + 1 < int(s.size()); ++ax) {
      for (bool inv : {false, true}) {
        check_all_options({s, {ax}, inv, false});
        for (int n : {s[ax], 5, 8}) {
          Shape in = s;
          in[ax] = inv ? n / 2 + 1 : n;
          check_all_options({in, {ax}, inv, true, n});
        }
      }
    }
  }
}

TEST(FftProgram, MoreThanThreeAxesAndUnitDims) {
  const Shape s4{4, 3, 5, 2};
  for (const auto& axes : axis_sets(4)) {
    check({s4, axes, false, false}, {});
    check({s4, axes, true, false}, {});
    check({s4, axes, false, true, s4[axes.back()]}, {});
  }
  check_all_options({{2, 3, 2, 3, 2}, {0, 1, 2, 3, 4}, false, false});
  check_all_options({{2, 3, 2, 3, 2}, {0, 1, 2, 3, 4}, true, false});
  check_all_options({{2, 3, 2, 3, 2}, {0, 1, 2, 3, 4}, false, true, 2});
  check_all_options({{2, 3, 2, 3, 3}, {4, 0, 1, 2, 3}, true, true, 5});
  // Size-1 dims, transformed or not, and all-1 shapes.
  for (const auto& axes : axis_sets(4)) {
    const Shape u{1, 5, 1, 4};
    check({u, axes, false, false}, {});
    check({u, axes, true, false}, {});
    if (u[axes.back()] > 1) {
      check({u, axes, false, true, u[axes.back()]}, {});
      Shape in = u;
      in[axes.back()] = u[axes.back()] / 2 + 1;
      check({in, axes, true, true, u[axes.back()]}, {});
    }
  }
  check_all_options({{1}, {0}, false, false});
  check_all_options({{1, 1}, {0, 1}, true, false});
  check_all_options({{3, 1}, {1}, false, true, 1});  // rfft of length 1
  check_all_options({{3, 1}, {1}, true, true, 1});   // irfft to length 1
  check_all_options({{1, 4}, {1, 0}, true, true, 1});
}

TEST(FftProgram, EmptyArraysHaveNoSteps) {
  auto p = fp::plan({0, 4}, {0, 4}, {1}, false, false, 0);
  EXPECT_TRUE(p.steps.empty());
  auto r = fp::plan({3, 0, 8}, {3, 0, 5}, {2}, false, true, 8);
  EXPECT_TRUE(r.steps.empty());
}
