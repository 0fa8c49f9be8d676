// NumPy / array-API ops that MLX programs use and Fluxion lacked (issue 11):
// trunc, logical_xor, median, diff, flip, unstack, count_nonzero, vecdot,
// matrix_norm, the window functions and empty. All are compositions of
// existing ops, so their derivative and vmap rules come from those ops.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"

namespace fluxion {

// Rounds toward zero; integers and booleans are returned unchanged.
array trunc(const array& a, StreamOrDevice s = {});
// Elementwise exclusive or of the truth values (bool result).
array logical_xor(const array& a, const array& b, StreamOrDevice s = {});

// The median over `axes` (all axes when absent), as NumPy: the middle value
// of the sorted elements, or the mean of the two middle ones. NaNs
// propagate. Integer and boolean inputs give float32.
array median(const array& a, const std::optional<std::vector<int>>& axes,
             bool keepdims = false, StreamOrDevice s = {});

// The n-th discrete difference along `axis` (NumPy's diff): out[i] =
// a[i + 1] - a[i], applied n times; booleans use !=. `prepend` / `append`
// are concatenated along `axis` first (broadcast to a's other dimensions).
array diff(const array& a, int n = 1, int axis = -1,
           const std::optional<array>& prepend = std::nullopt,
           const std::optional<array>& append = std::nullopt,
           StreamOrDevice s = {});

// Reverse the order of elements along `axes` (every axis when absent).
array flip(const array& a, const std::optional<std::vector<int>>& axes,
           StreamOrDevice s = {});
// The slices of `a` along `axis`, with that axis removed.
std::vector<array> unstack(const array& a, int axis = 0,
                           StreamOrDevice s = {});
// Number of non-zero elements over `axes` (all when absent), int32.
array count_nonzero(const array& a,
                    const std::optional<std::vector<int>>& axes,
                    bool keepdims = false, StreamOrDevice s = {});
// sum(conj(a) * b) along `axis` after broadcasting (the array API's
// vecdot); a and b must have the same size along that axis.
array vecdot(const array& a, const array& b, int axis = -1,
             StreamOrDevice s = {});
// The array API's matrix_norm over the last two axes: ord is "fro", "nuc",
// or a number (+-1, +-2, +-inf).
array matrix_norm(const array& a,
                  const std::variant<double, std::string>& ord = "fro",
                  bool keepdims = false, StreamOrDevice s = {});

// NumPy's window functions of m points (float32; m <= 0 gives an empty
// array, m == 1 gives [1]).
array bartlett(int m, StreamOrDevice s = {});
array blackman(int m, StreamOrDevice s = {});
array hamming(int m, StreamOrDevice s = {});
array hanning(int m, StreamOrDevice s = {});

// An array whose values are unspecified (the array API's empty). Fluxion
// fills it with zeros, which is one valid choice and keeps results
// deterministic.
array empty(const Shape& shape, Dtype dtype = float32, StreamOrDevice s = {});
array empty_like(const array& a, StreamOrDevice s = {});

}  // namespace fluxion
