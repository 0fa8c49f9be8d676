// Op-spec cases for the io family: Load has no inputs, so it is reached
// through a function of a float64 input that multiplies it by a loaded
// array (Load's values are constants: zero derivative, unmapped by vmap).
#include <unistd.h>

#include <filesystem>

#include "fluxion/ops/io.h"
#include "op_cases.h"

namespace fluxion::test {

namespace {

std::vector<OpCase> io_cases() {
  auto dir = std::filesystem::temp_directory_path() /
             ("fluxion_op_cases_io_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // Removed when the test program exits (the cases load from it until then).
  static struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  std::string npy = (dir / "w.npy").string();
  std::string st = (dir / "w.safetensors").string();
  save(npy, rnd({3, 4}, 71));
  save_safetensors(st, {{"w", rnd({4}, 72)}});
  return {
      {"load_npy",
       unary([npy](const array& x) { return x * load(npy); }),
       {rnd({3, 4}, 73)}},
      {"load_safetensors",
       unary([st](const array& x) {
         return sin(x) * load_safetensors(st).first.at("w");
       }),
       {rnd({2, 4}, 74)}},
  };
}

}  // namespace

FLUXION_REGISTER_OP_CASES(io_cases);

}  // namespace fluxion::test
