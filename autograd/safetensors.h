// The safetensors file format (https://huggingface.co/docs/safetensors):
//
//   [8 bytes]  N, the header length, unsigned little-endian
//   [N bytes]  JSON header: {"__metadata__": {string: string},
//                            NAME: {"dtype": "F32" | "I32" | "BF16", "shape": [...],
//                                   "data_offsets": [begin, end]}, ...}
//              padded with spaces so the data starts 8-byte aligned
//   [rest]     the tensors' bytes, little-endian, back to back; offsets are
//              relative to the start of this section
//
// Tensors are written in the order given, so the same tensors give the same
// bytes. Writing goes to a temporary file renamed into place, so a crash never
// leaves a half-written file under the real name. Reading checks everything
// (header size, JSON, dtypes, shapes against offsets, offsets in range and
// contiguous, file length) and reports any problem as sf::Error naming the
// file and, where there is one, the tensor.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "tensor.h"

namespace sf::safetensors {

using Metadata = std::map<std::string, std::string>;

struct Contents {
  NamedTensors tensors;  // in file order
  Metadata metadata;
};

void save(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});
Contents load(const std::string& path);
// Only the header's metadata (the header is still fully validated).
Metadata load_metadata(const std::string& path);

}  // namespace sf::safetensors
