// compile (design.md §4): trace a function once per input signature into a
// tape, simplify it, fuse its elementwise runs into generated kernels, and
// replay the tape on later calls.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "fluxion/compile_ir.h"
#include "fluxion/transforms.h"

namespace fluxion {

// A function with the same results as `fun`, traced on the first call for
// each combination of input dtypes and shapes (only ndims and dtypes when
// `shapeless`). The cache lives as long as the returned function.
Fn compile(Fn fun, bool shapeless = false);

// Globally turn compilation off (compiled functions then run `fun`
// eagerly) or back on. FLUXION_DISABLE_COMPILE in the environment starts
// with it off.
void disable_compile();
void enable_compile();
bool compile_enabled();

namespace detail {

// For bindings: the cache is keyed by `fun_id` (e.g. a Python function's
// id) and `constants` (hashes of the non-array arguments and of the input
// tree structure), and lives until `compile_erase(fun_id)`.
Fn compile(Fn fun, std::uintptr_t fun_id, bool shapeless,
           std::vector<uint64_t> constants);
// The same with data of the binding's attached to each trace (MLX's
// ArraysAndExtra): `fun` returns its outputs and an `extra` (for Python,
// the output tree structure), which the cache keeps with that trace and
// returns with every replay of it. Each trace keeps its own: two traces of
// one function (a dtype branch) may return different structures.
struct ArraysAndExtra {
  std::vector<array> arrays;
  std::shared_ptr<void> extra;
};
using FnWithExtra =
    std::function<ArraysAndExtra(const std::vector<array>&)>;
FnWithExtra compile_with_extra(FnWithExtra fun, std::uintptr_t fun_id,
                               bool shapeless,
                               std::vector<uint64_t> constants);
// Drops every trace of `fun_id` (they are destroyed after the cache's lock
// is released, so a destructor may call compile again).
void compile_erase(std::uintptr_t fun_id);

// Traces held by the cache (all functions): the soak tests check that it
// does not grow and that a function's traces go with it.
size_t compile_cache_size();

// `fun` traced on placeholders of the inputs' shapes and dtypes into a
// simplified (unfused) tape, as compile traces it; with `shapeless` the
// tape is checked for primitives that cannot follow new shapes. Used by
// export_function.
Ir trace_to_ir(const Fn& fun, const std::vector<array>& inputs,
               bool shapeless);

}  // namespace detail
}  // namespace fluxion
