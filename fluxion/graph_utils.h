// Printing arrays and graphs.
#pragma once

#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "fluxion/array.h"

namespace fluxion {

// Prints the values (evaluating first), like MLX: array([1, 2], dtype=int32).
// An axis longer than 6 shows its first and last 3 entries around "...".
std::ostream& operator<<(std::ostream& os, array a);

// MLX's print options: `precision` >= 0 prints floating-point values with
// that many decimals (fixed); -1 (default) prints 6 significant digits.
struct PrintOptions {
  int precision = -1;
};
PrintOptions get_printoptions();
void set_printoptions(const PrintOptions& options);
std::ostream& operator<<(std::ostream& os, const Shape& s);

// One line per node from inputs to outputs:
//   a0 [3]: float32 = Exp(in0)
void print_graph(std::ostream& os, const std::vector<array>& outputs);
// Graphviz dot source of the graph that produces `outputs`. `names` (by
// array id) label chosen arrays, e.g. outputs given as keyword arguments.
void export_to_dot(std::ostream& os, const std::vector<array>& outputs,
                   const std::unordered_map<uintptr_t, std::string>& names = {});

}  // namespace fluxion
