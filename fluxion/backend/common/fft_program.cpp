// The GPU FFT's steps (fft_program.h; the design is described at the top of
// backend/cuda/fft.cu).
#include "fluxion/backend/common/fft_program.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace fluxion::fft_program {

std::string PlanShape::str() const {
  std::ostringstream os;
  os << (kind == Kind::C2C   ? "C2C"
         : kind == Kind::R2C ? "R2C"
                             : "C2R")
     << " plan n=(";
  auto list = [&](const int64_t* v) {
    for (int k = 0; k < rank; ++k) {
      os << (k ? "," : "") << v[k];
    }
  };
  list(n);
  os << ") inembed=(";
  list(inembed);
  os << ") istride=" << istride << " idist=" << idist << " onembed=(";
  list(onembed);
  os << ") ostride=" << ostride << " odist=" << odist << " batch=" << batch;
  return os.str();
}

namespace {

int64_t prod(const Shape& s, int begin, int end) {
  int64_t r = 1;
  for (int d = begin; d < end; ++d) {
    r *= s[d];
  }
  return r;
}

Strides row_major(const Shape& s) {
  Strides st(s.size(), 1);
  for (int d = static_cast<int>(s.size()) - 2; d >= 0; --d) {
    st[d] = st[d + 1] * s[d + 1];
  }
  return st;
}

class Planner {
 public:
  Planner(Program& p, const Options& o) : prog_(p), opt_(o) {}

  int add_buffer(bool complex, const Shape& shape) {
    prog_.buffers.push_back({complex, shape});
    return static_cast<int>(prog_.buffers.size()) - 1;
  }

  void copy(int src, int dst, const Shape& shape, Strides src_strides,
            Strides dst_strides) {
    Step s;
    s.op = Step::Op::Copy;
    s.src = src;
    s.dst = dst;
    s.shape = shape;
    s.src_strides = std::move(src_strides);
    s.dst_strides = std::move(dst_strides);
    prog_.steps.push_back(std::move(s));
  }

  void transform(const PlanShape& ps, bool inverse, int src, int dst,
                 int64_t loops, int64_t in_step, int64_t out_step) {
    Step s;
    s.op = Step::Op::Transform;
    s.plan = ps;
    s.inverse = inverse;
    s.src = src;
    s.dst = dst;
    s.loops = loops;
    s.in_step = in_step;
    s.out_step = out_step;
    prog_.steps.push_back(std::move(s));
  }

  // One transform of axes [first, first + rank) of row-contiguous buffers
  // of shapes in_shape (src) and out_shape (dst), equal but for the halved
  // axis of a real transform (the run's last). The run is a strided batch
  // in cuFFT's advanced layout: n = the run's logical dims, the embeds its
  // stored dims, stride `inner` (the elements after the run), and a batch
  // over the elements before it (`outer`, one run apart) or after it
  // (`inner`, 1 apart). With both > 1 the batch has two strides, which a
  // plan cannot hold: looped, or transposed through scratch.
  void pass(Kind kind, bool inverse, int src, int dst, const Shape& in_shape,
            const Shape& out_shape, int first, int rank) {
    const int nd = static_cast<int>(in_shape.size());
    const int end = first + rank;
    const int64_t outer = prod(in_shape, 0, first);
    const int64_t inner = prod(in_shape, end, nd);
    const int64_t in_run = prod(in_shape, first, end);
    const int64_t out_run = prod(out_shape, first, end);
    PlanShape ps;
    ps.kind = kind;
    ps.rank = rank;
    // n is the logical (real) size: the input's for R2C, the output's for
    // C2R.
    const Shape& logical = kind == Kind::C2R ? out_shape : in_shape;
    for (int k = 0; k < rank; ++k) {
      ps.n[k] = logical[first + k];
      ps.inembed[k] = in_shape[first + k];
      ps.onembed[k] = out_shape[first + k];
    }
    if (inner == 1 || outer == 1) {
      ps.istride = ps.ostride = inner;
      if (inner == 1) {
        ps.batch = outer;
        ps.idist = in_run;
        ps.odist = out_run;
      } else {
        ps.batch = inner;
        ps.idist = ps.odist = 1;
      }
      transform(ps, inverse, src, dst, 1, 0, 0);
      return;
    }
    // cuFFT wants real data 8-byte aligned, as complex: no loop whose step
    // is an odd number of real elements.
    const bool real_in = kind == Kind::R2C, real_out = kind == Kind::C2R;
    const bool outer_ok = (!real_in || (in_run * inner) % 2 == 0) &&
                          (!real_out || (out_run * inner) % 2 == 0);
    const bool inner_ok = !real_in && !real_out;
    const bool by_inner = inner_ok && (!outer_ok || inner < outer);
    if (outer_ok || inner_ok) {
      const int64_t loops = by_inner ? inner : outer;
      const int64_t per_run =
          (by_inner ? outer : inner) * std::max(in_run, out_run);
      if (loops <= opt_.max_loops || per_run >= opt_.loop_elements) {
        ps.istride = ps.ostride = inner;
        if (by_inner) {
          ps.batch = outer;
          ps.idist = in_run * inner;
          ps.odist = out_run * inner;
          transform(ps, inverse, src, dst, loops, 1, 1);
        } else {
          ps.batch = inner;
          ps.idist = ps.odist = 1;
          transform(ps, inverse, src, dst, loops, in_run * inner,
                    out_run * inner);
        }
        return;
      }
    }
    // Transposed: the (outer, run, inner) elements into an (outer, inner,
    // run) scratch, one batch of outer * inner contiguous transforms, and
    // back. The copies take the dims as they are (the copy collapses
    // them), with the scratch's strides listed in that order.
    auto moved = [&](const Shape& s, int64_t run) {
      Strides st;
      for (auto v : row_major(Shape(s.begin(), s.begin() + first))) {
        st.push_back(v * inner * run);
      }
      for (auto v : row_major(Shape(s.begin() + first, s.begin() + end))) {
        st.push_back(v);
      }
      for (auto v : row_major(Shape(s.begin() + end, s.end()))) {
        st.push_back(v * run);
      }
      return st;
    };
    const int tin = add_buffer(!real_in, in_shape);
    copy(src, tin, in_shape, row_major(in_shape), moved(in_shape, in_run));
    const int tout = kind == Kind::C2C ? tin : add_buffer(!real_out, out_shape);
    ps.istride = ps.ostride = 1;
    ps.batch = outer * inner;
    ps.idist = in_run;
    ps.odist = out_run;
    transform(ps, inverse, tin, tout, 1, 0, 0);
    copy(tout, dst, out_shape, moved(out_shape, out_run), row_major(out_shape));
  }

  // Complex transforms over `axes` (distinct) of a row-contiguous complex
  // buffer of shape `shape`: src -> dst on the first pass, dst in place
  // after. Consecutive axes go in chunks of up to max_rank, cut from the
  // innermost end; the innermost chunk first.
  void complex_passes(int src, int dst, const Shape& shape,
                      std::vector<int> axes, bool inverse) {
    std::sort(axes.begin(), axes.end());
    int i = static_cast<int>(axes.size()) - 1;
    while (i >= 0) {
      int j = i;
      while (j > 0 && axes[j - 1] == axes[j] - 1 && i - j + 1 < opt_.max_rank) {
        --j;
      }
      pass(Kind::C2C, inverse, src, dst, shape, shape, axes[j], i - j + 1);
      src = dst;
      i = j - 1;
    }
  }

 private:
  Program& prog_;
  const Options& opt_;
};

// Size-1 dims dropped (a transform of length 1 is the identity): the
// shapes without them, the kept axes of `axes` but `real_last` (new
// indices), and real_last's new index.
struct Squeezed {
  Shape in_shape, out_shape;
  std::vector<int> axes;
  int last = -1;
};

Squeezed squeeze(const Shape& in, const Shape& out,
                 const std::vector<int>& axes, int real_last) {
  Squeezed s;
  std::vector<int> where(in.size(), -1);
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != 1 || out[d] != 1) {
      where[d] = static_cast<int>(s.in_shape.size());
      s.in_shape.push_back(in[d]);
      s.out_shape.push_back(out[d]);
    }
  }
  for (int ax : axes) {
    if (where[ax] >= 0 && ax != real_last) {
      s.axes.push_back(where[ax]);
    }
  }
  if (real_last >= 0) {
    s.last = where[real_last];
  }
  return s;
}

// 1 / the product of the real lengths along the axes.
double inverse_factor(const Shape& real_shape, const std::vector<int>& axes) {
  double n = 1;
  for (int ax : axes) {
    n *= real_shape[ax];
  }
  return 1.0 / n;
}

}  // namespace

Program plan(const Shape& in_shape, const Shape& out_shape,
             const std::vector<int>& axes, bool inverse, bool real, int n,
             const Options& o) {
  if (in_shape.size() != out_shape.size() || axes.empty() || o.max_rank < 1 ||
      o.max_rank > 3 || (o.in_place && real)) {
    throw std::invalid_argument("[fft] Invalid GPU FFT program request.");
  }
  Program prog;
  Planner pl(prog, o);
  const bool in_complex = !(real && !inverse);
  const bool out_complex = !(real && inverse);
  pl.add_buffer(in_complex, in_shape);
  pl.add_buffer(out_complex, out_shape);
  if (shape_size(out_shape) == 0 || shape_size(in_shape) == 0) {
    return prog;
  }
  const Strides out_rm = row_major(out_shape);

  if (!real) {
    const int src = o.in_place ? 1 : 0;
    auto sq = squeeze(in_shape, out_shape, axes, -1);
    if (sq.axes.empty()) {
      if (src != 1) {
        pl.copy(0, 1, in_shape, row_major(in_shape), out_rm);
      }
    } else {
      pl.complex_passes(src, 1, sq.in_shape, sq.axes, inverse);
    }
    const double f = inverse ? inverse_factor(out_shape, axes) : 1.0;
    if (f != 1.0) {
      Step s;
      s.op = Step::Op::Scale;
      s.src = s.dst = 1;
      s.elems = shape_size(out_shape);
      s.factor = f;
      prog.steps.push_back(std::move(s));
    }
    return prog;
  }

  const int last = axes.back();
  auto sq = squeeze(in_shape, out_shape, axes, n == 1 ? -1 : last);
  if (!inverse) {
    if (n == 1) {
      // Length 1: the output is the input as complex.
      pl.copy(0, 1, in_shape, row_major(in_shape), out_rm);
      if (!sq.axes.empty()) {
        pl.complex_passes(1, 1, sq.out_shape, sq.axes, false);
      }
      return prog;
    }
    // R2C along the real axis, merged with the complex axes just before it
    // (up to cuFFT's rank: the same arithmetic as R2C then C2C), then the
    // other axes as C2C in place on the output.
    std::vector<int> rest = sq.axes;
    int first = sq.last;
    while (sq.last - first + 1 < o.max_rank) {
      auto it = std::find(rest.begin(), rest.end(), first - 1);
      if (it == rest.end()) {
        break;
      }
      rest.erase(it);
      --first;
    }
    pl.pass(Kind::R2C, false, 0, 1, sq.in_shape, sq.out_shape, first,
            sq.last - first + 1);
    if (!rest.empty()) {
      pl.complex_passes(1, 1, sq.out_shape, rest, false);
    }
    return prog;
  }

  // Inverse: the other axes as inverse C2C into a scratch, the scratch
  // prepared (the imaginary parts of the self-conjugate frequencies zeroed,
  // 1 / N applied), then the 1-D C2R from the scratch, which it
  // overwrites (never the caller's input).
  const int spec = pl.add_buffer(true, in_shape);
  int from = 0;
  if (!sq.axes.empty()) {
    pl.complex_passes(0, spec, sq.in_shape, sq.axes, true);
    from = spec;
  }
  Step prep;
  prep.op = Step::Op::PrepareC2R;
  prep.src = from;
  prep.dst = spec;
  prep.elems = shape_size(in_shape);
  prep.m = in_shape[last];
  prep.inner = prod(in_shape, last + 1, static_cast<int>(in_shape.size()));
  prep.nyquist = n % 2 == 0;
  prep.factor = inverse_factor(out_shape, axes);
  prog.steps.push_back(std::move(prep));
  if (n == 1) {
    pl.copy(spec, 1, in_shape, row_major(in_shape), out_rm);  // real part
    return prog;
  }
  pl.pass(Kind::C2R, true, spec, 1, sq.in_shape, sq.out_shape, sq.last, 1);
  return prog;
}

}  // namespace fluxion::fft_program
