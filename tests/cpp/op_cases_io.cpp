// Op-spec cases for the io family: Load has no inputs, so it is reached
// through a function of a float64 input that multiplies it by a loaded
// array (Load's values are constants: zero derivative, unmapped by vmap).
#include <unistd.h>

#include <cmath>
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
  auto w = normal_values({3, 4}, 71);
  auto v = normal_values({4}, 72);
  save(npy, w);
  save_safetensors(st, {{"w", v}});
  auto entry = [](const std::string& name, Fn f, In x, Ref ref) {
    OpCase k{name, std::move(f), {std::move(x)}};
    k.dtypes = {float64, float32};
    k.ref = std::move(ref);
    return k;
  };
  // The loaded values times x, from the saved values (host).
  auto times = [](array saved) {
    return [saved](const Arrays& x) {
      auto s = broadcast_shapes(x[0].shape(), saved.shape(), "load");
      auto a = values(broadcast_to(x[0], s));
      auto b = values(broadcast_to(saved, s));
      for (size_t i = 0; i < a.size(); ++i) a[i] *= b[i];
      return Arrays{host_array(a, s)};
    };
  };
  Ref sin_times = [v](const Arrays& x) {
    auto a = values(x[0]);
    auto b = values(broadcast_to(v, x[0].shape()));
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(a[i]) * b[i];
    return Arrays{host_array(a, x[0].shape())};
  };
  std::vector<OpCase> c;
  c.push_back(entry("load_npy",
                    unary([npy](const array& x) { return x * load(npy); }),
                    normal({3, 4}), times(w)));
  c.push_back(entry("load_safetensors",
                    unary([st](const array& x) {
                      return sin(x) * load_safetensors(st).first.at("w");
                    }),
                    normal({2, 4}), sin_times));
  return c;
}

}  // namespace

FLUXION_REGISTER_OP_CASES(io_cases);

}  // namespace fluxion::test
