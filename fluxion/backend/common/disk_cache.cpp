// disk_cache.h: the kernel cache's root, hashes and atomic writes.
#include "fluxion/backend/common/disk_cache.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace fluxion::codegen {

std::filesystem::path cache_root() {
  if (const char* d = std::getenv("FLUXION_CACHE_DIR"); d && *d) {
    return d;
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::filesystem::path(home) / ".cache" / "fluxion";
  }
  return std::filesystem::temp_directory_path() / "fluxion-cache";
}

uint64_t fnv1a(const std::string& s, uint64_t basis) {
  uint64_t h = basis;
  for (unsigned char c : s) {
    h = (h ^ c) * 1099511628211ull;
  }
  return h;
}

std::string hex(uint64_t h) {
  std::ostringstream s;
  s << std::hex << h;
  return s.str();
}

bool write_atomically(const std::filesystem::path& path,
                      const std::string& bytes) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  std::ostringstream tag;
  tag << "." << getpid() << "." << std::this_thread::get_id() << ".tmp";
  auto tmp = path;
  tmp += tag.str();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) {
      out.close();
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return false;
  }
  return true;
}

std::optional<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return std::nullopt;
  }
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) {
    return std::nullopt;
  }
  return s.str();
}

}  // namespace fluxion::codegen
