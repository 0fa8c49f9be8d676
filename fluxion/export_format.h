// The bytes of export_function's files (layout in export.h): encoding the
// traces an exporter collected, and decoding a file's contents back. Used
// by export.cpp (FunctionExporter) and import.cpp (ImportedFunction), which
// only move the bytes to and from the file.
#pragma once

#include <string>
#include <vector>

#include "fluxion/export.h"

namespace fluxion::detail {

// What a file holds.
struct ExportedFunctionFile {
  std::string metadata;
  bool shapeless = false;
  std::vector<ExportedTrace> traces;
};

// The file's contents. Each node is written under export_primitive's name
// and parameters, and each constant (once, however many traces use it) as
// its row-major bytes, evaluating it first.
std::string encode_exported_function(const std::string& metadata,
                                     bool shapeless,
                                     const std::vector<ExportedTrace>& traces);

// The traces of a file's contents, their primitives rebuilt with
// import_primitive on the default stream. Raises std::invalid_argument
// "[import_function] <what> in '<path>'." for anything malformed.
ExportedFunctionFile decode_exported_function(std::string bytes,
                                              const std::string& path);

}  // namespace fluxion::detail
