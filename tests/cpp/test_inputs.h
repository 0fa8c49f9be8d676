// Test inputs holding the same logical values in different memory layouts,
// so that every kernel path (contiguous, transposed, strided with gaps,
// negative strides, broadcast) sees the same data. Built from the array
// constructors, transpose and a test-only strided view, so the tests do not
// depend on slicing.
#pragma once

#include <string>
#include <vector>

#include "test_utils.h"

// A namespace of its own: other test files may define helpers of the same
// names in fluxion::test.
namespace fluxion::test::inputs {

// A view of its input's buffer with any strides and offset (what a slice
// with steps produces).
class StridedView : public Primitive {
 public:
  StridedView(Strides strides, int64_t offset)
      : Primitive(to_stream({})),
        strides_(std::move(strides)),
        offset_(offset) {}
  void eval_cpu(const std::vector<array>& in,
                std::vector<array>& out) override {
    // The view spans the whole buffer, so it is never flagged contiguous.
    auto flags = layout_flags(out[0].shape(), strides_, in[0].data_size());
    out[0].copy_shared_buffer(in[0], strides_, flags, in[0].data_size(),
                              offset_);
  }
  // A test primitive outside the registry: no GPU kernel.
  void eval_gpu(const std::vector<array>&, std::vector<array>&) override {
    throw std::runtime_error("no gpu kernel");
  }
  const char* name() const override { return "StridedView"; }

 private:
  Strides strides_;
  int64_t offset_;
};

enum class Layout { RowMajor, Transposed, Strided, Reversed };

inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::RowMajor:
      return "row-major";
    case Layout::Transposed:
      return "transposed";
    case Layout::Strided:
      return "strided";
    case Layout::Reversed:
      return "reversed";
  }
  return "?";
}

inline const std::vector<Layout>& all_layouts() {
  static const std::vector<Layout> l = {Layout::RowMajor, Layout::Transposed,
                                        Layout::Strided, Layout::Reversed};
  return l;
}

// Row-major multi-index of flat index `i`.
inline std::vector<int64_t> unravel(int64_t i, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  return idx;
}

// An array of `shape` and `dtype` whose logical (row-major) values are
// `vals`, stored in `layout`:
//  - Transposed: a row-major array of the reversed shape, transposed back;
//  - Strided: every other element of a buffer with a leading gap in each
//    dimension (filler values in the gaps);
//  - Reversed: the same with negative strides.
template <typename T>
array make_array(const std::vector<T>& vals, const Shape& shape, Dtype dtype,
                 Layout layout) {
  const int nd = static_cast<int>(shape.size());
  const int64_t n = static_cast<int64_t>(vals.size());
  switch (layout) {
    case Layout::RowMajor:
      return array(vals.begin(), shape, dtype);
    case Layout::Transposed: {
      Shape ps(shape.rbegin(), shape.rend());
      auto pst = row_major_strides(ps);
      std::vector<T> pv(vals.size());
      for (int64_t i = 0; i < n; ++i) {
        auto idx = unravel(i, shape);
        int64_t off = 0;
        for (int d = 0; d < nd; ++d) {
          off += idx[d] * pst[nd - 1 - d];
        }
        pv[off] = vals[i];
      }
      return transpose(array(pv.begin(), ps, dtype));
    }
    case Layout::Strided:
    case Layout::Reversed: {
      const bool rev = layout == Layout::Reversed;
      Shape ps(nd);
      for (int d = 0; d < nd; ++d) {
        ps[d] = 2 * shape[d] + 1;
      }
      auto pst = row_major_strides(ps);
      int64_t pn = shape_size(ps);
      std::vector<T> pv(pn);
      for (int64_t i = 0; i < pn; ++i) {
        // Positive, so that converting them to unsigned types is defined.
        pv[i] = static_cast<T>(i % 2 ? 77 : 99);
      }
      Strides st(nd);
      int64_t offset = 0;
      for (int d = 0; d < nd; ++d) {
        st[d] = (rev ? -2 : 2) * pst[d];
        offset += (rev ? std::max(2 * shape[d] - 1, 1) : 1) * pst[d];
      }
      for (int64_t i = 0; i < n; ++i) {
        auto idx = unravel(i, shape);
        int64_t off = offset;
        for (int d = 0; d < nd; ++d) {
          off += idx[d] * st[d];
        }
        pv[off] = vals[i];
      }
      array base(pv.begin(), ps, dtype);
      return array(shape, dtype, std::make_shared<StridedView>(st, offset),
                   {base});
    }
  }
  throw std::logic_error("unknown layout");
}

// `v` as dtype `dt` stores it, back in double: integers wrap (C++20
// conversions are modular), bools are `v != 0`, floats round.
inline double round_to(double v, Dtype dt) {
  double out = 0;
  dispatch_all(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      out = v != 0;
    } else if constexpr (std::is_integral_v<T>) {
      if (std::isnan(v) || std::isinf(v)) {
        out = v;  // let the comparison fail loudly
      } else {
        out = static_cast<double>(static_cast<T>(static_cast<int64_t>(v)));
      }
    } else {
      out = cast_value<double>(cast_value<T>(v));
    }
  });
  return out;
}

inline std::vector<double> round_all(std::vector<double> v, Dtype dt) {
  for (auto& x : v) {
    x = round_to(x, dt);
  }
  return v;
}

inline std::string shape_text(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) {
      out += ",";
    }
    out += std::to_string(s[i]);  // appended: GCC 12 -Wrestrict misfires
  }
  return out + ")";
}

}  // namespace fluxion::test::inputs
