// The layering rule, checked on the sources: the core (fluxion/*), the ops
// (fluxion/ops/*) and the Python bindings (python/src/*) include nothing
// under fluxion/backend/. They reach a backend through
// fluxion/backend_interface.h only, and dtype dispatch through
// fluxion/dtype_dispatch.h; the kernels are the backends' own.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Whether a source line includes a backend header ("..." or <...>).
bool includes_backend(const std::string& line) {
  static const std::regex re(R"(^\s*#\s*include\s*["<]fluxion/backend/)");
  return std::regex_search(line, re);
}

// "path:line: text" for each backend include of the C++ files directly in
// `dir` (not its subfolders: fluxion/backend is one).
std::vector<std::string> backend_includes(const fs::path& dir) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto ext = entry.path().extension();
    if (!entry.is_regular_file() ||
        (ext != ".h" && ext != ".cpp" && ext != ".cuh" && ext != ".cu")) {
      continue;
    }
    std::ifstream f(entry.path());
    std::string line;
    for (int n = 1; std::getline(f, line); ++n) {
      if (includes_backend(line)) {
        found.push_back(entry.path().string() + ":" + std::to_string(n) + ": " +
                        line);
      }
    }
  }
  return found;
}

}  // namespace

TEST(Layering, MatcherSeesEveryIncludeForm) {
  EXPECT_TRUE(includes_backend("#include \"fluxion/backend/cpu/copy.h\""));
  EXPECT_TRUE(includes_backend("  #  include <fluxion/backend/common/math.h>"));
  EXPECT_FALSE(includes_backend("#include \"fluxion/backend_interface.h\""));
  EXPECT_FALSE(includes_backend("// see fluxion/backend/cpu/eval.cpp"));
}

TEST(Layering, CoreOpsAndBindingsIncludeNoBackendHeader) {
  const fs::path root = FLUXION_SOURCE_DIR;
  for (const char* dir : {"fluxion", "fluxion/ops", "python/src"}) {
    ASSERT_TRUE(fs::is_directory(root / dir)) << (root / dir);
    for (const auto& hit : backend_includes(root / dir)) {
      ADD_FAILURE() << hit;
    }
  }
}
