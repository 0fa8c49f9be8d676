// Helpers for the C++ tests: read arrays back as std::vector in logical
// (row-major) order whatever their layout, and compare with tolerances.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/fluxion.h"

namespace fluxion::test {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

using Index = std::vector<int>;

inline std::vector<double> iota_vec(int64_t n, double start = 0) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// start, start+1, ... in row-major order.
inline array iota(const Shape& shape, Dtype dtype = float32,
                  double start = 0) {
  auto v = iota_vec(shape_size(shape), start);
  return array(v.begin(), shape, dtype);
}

// Values of `shape` in row-major order, each given by f(index).
inline std::vector<double> expected_by(
    const Shape& shape, const std::function<double(const Index&)>& f) {
  std::vector<double> out;
  int64_t n = shape_size(shape);
  Index idx(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(f(idx));
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        break;
      }
      idx[d] = 0;
    }
  }
  return out;
}

// Row-major flat position of `idx` in `shape`.
inline int64_t flat(const Shape& shape, const Index& idx) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    off = off * shape[d] + idx[d];
  }
  return off;
}

// What a small integer value becomes after a round trip through `dtype`.
inline double as(Dtype dtype, double v) {
  return dtype == bool_ ? (v != 0) : v;
}

// Values of `a` in row-major order, converted to T.
template <typename T>
std::vector<T> to_vector(array a) {
  a.eval();
  std::vector<T> out(a.size());
  if (a.size() == 0) {
    return out;
  }
  dispatch_all(a.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S* p = a.data<S>();
    std::vector<int> idx(a.ndim(), 0);
    for (size_t i = 0; i < a.size(); ++i) {
      int64_t off = 0;
      for (int d = 0; d < a.ndim(); ++d) {
        off += idx[d] * a.strides()[d];
      }
      out[i] = cast_value<T>(p[off]);
      for (int d = a.ndim() - 1; d >= 0; --d) {
        if (++idx[d] < a.shape(d)) {
          break;
        }
        idx[d] = 0;
      }
    }
  });
  return out;
}

// Expect every value of `a` within atol + rtol*|expected| of `expected`.
inline void expect_close(const array& a, const std::vector<double>& expected,
                         double rtol = 1e-5, double atol = 1e-6,
                         const std::string& what = "") {
  auto got = to_vector<double>(a);
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
      continue;
    }
    if (std::isinf(expected[i])) {
      EXPECT_EQ(got[i], expected[i]) << what << " at " << i;
      continue;
    }
    EXPECT_NEAR(got[i], expected[i], atol + rtol * std::abs(expected[i]))
        << what << " at " << i;
  }
}

// Expect an exception of type E whose message contains `needle`.
template <typename E, typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an exception containing '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message was: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type; message: " << e.what();
  }
}

}  // namespace fluxion::test
