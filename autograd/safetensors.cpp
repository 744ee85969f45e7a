#include "safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/error.h"

namespace sf::safetensors {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian: a big-endian host needs byte swapping");

namespace {

using Json = nlohmann::ordered_json;  // keeps the tensors in file order
constexpr uint64_t kMaxHeaderBytes = 100 << 20;  // the limit of the reference implementation

// The safetensors names of our dtypes (BF16 as PyTorch's torch.bfloat16 saves).
const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::I32: return "I32";
    case DType::BF16: return "BF16";
  }
  return "?";
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;  // byte offsets into the data section
};

struct Header {
  std::vector<Entry> entries;  // sorted by offset
  Metadata metadata;
  uint64_t data_start;  // 8 + header length
};

Metadata parse_metadata(const Json& value, const std::string& path) {
  if (!value.is_object()) fail(path, ": __metadata__ is not a JSON object");
  Metadata metadata;
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) fail(path, ": __metadata__ value of '", key, "' is not a string");
    metadata[key] = v.get<std::string>();
  }
  return metadata;
}

Entry parse_entry(const std::string& name, const Json& value, uint64_t data_bytes,
                  const std::string& path) {
  auto bad = [&](const auto&... what) { fail(path, ": tensor '", name, "': ", what...); };
  if (!value.is_object()) bad("its header entry is not a JSON object");
  for (const auto& [key, v] : value.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets") bad("unexpected field '", key, "'");
  if (!value.contains("dtype") || !value.contains("shape") || !value.contains("data_offsets"))
    bad("needs dtype, shape and data_offsets");

  Entry e{name, DType::F32, {}, 0, 0};
  const Json& dtype = value["dtype"];
  if (dtype == "F32") e.dtype = DType::F32;
  else if (dtype == "I32") e.dtype = DType::I32;
  else if (dtype == "BF16") e.dtype = DType::BF16;
  else bad("dtype ", dtype.dump(), " is not supported (F32, I32 or BF16)");

  const Json& shape = value["shape"];
  if (!shape.is_array()) bad("shape is not an array");
  // The byte count, computed so that no shape can overflow it: a tensor larger
  // than the data section is an error anyway.
  uint64_t bytes = static_cast<uint64_t>(element_bytes(e.dtype));
  bool empty = false;
  for (const Json& dim : shape) {
    if (!dim.is_number_unsigned()) bad("shape ", shape.dump(), " holds a non-integer or negative size");
    uint64_t d = dim.get<uint64_t>();
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) bad("shape ", shape.dump(), " is too large");
    e.shape.push_back(static_cast<int64_t>(d));
    if (d == 0) empty = true;
    else if (!empty && bytes > data_bytes / d) bad("shape ", shape.dump(), " is larger than the whole file");
    else bytes *= d;
  }
  if (empty) bytes = 0;

  const Json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    bad("data_offsets ", offsets.dump(), " is not a pair of non-negative integers");
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  if (e.begin > e.end) bad("data_offsets ", offsets.dump(), " end before they begin");
  if (e.end > data_bytes)
    bad("data_offsets ", offsets.dump(), " go past the end of the data (", data_bytes,
        " bytes): the file is truncated or the header altered");
  if (e.end - e.begin != bytes)
    bad("shape ", to_string(e.shape), " needs ", bytes, " bytes but data_offsets ", offsets.dump(),
        " hold ", e.end - e.begin);
  return e;
}

Header read_header(std::ifstream& in, const std::string& path) {
  std::error_code ec;
  uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, ": cannot read: ", ec.message());
  if (file_size < 8) fail(path, ": ", file_size, " bytes is too short for a safetensors file");
  uint64_t header_bytes = 0;
  in.read(reinterpret_cast<char*>(&header_bytes), 8);
  if (header_bytes > kMaxHeaderBytes || header_bytes > file_size - 8)
    fail(path, ": header length ", header_bytes, " does not fit the file (", file_size,
         " bytes): not a safetensors file, or truncated");
  std::string text(header_bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_bytes));
  if (!in) fail(path, ": cannot read the header");

  Json json;
  try {
    json = Json::parse(text);
  } catch (const Json::exception& e) {  // a syntax error, or a number out of range
    fail(path, ": the header is not valid JSON: ", plain_message(e));
  }
  if (!json.is_object()) fail(path, ": the header is not a JSON object");

  Header header;
  header.data_start = 8 + header_bytes;
  uint64_t data_bytes = file_size - header.data_start;
  for (const auto& [key, value] : json.items()) {
    if (key == "__metadata__") header.metadata = parse_metadata(value, path);
    else header.entries.push_back(parse_entry(key, value, data_bytes, path));
  }
  // The data section is exactly the tensors, back to back.
  std::stable_sort(header.entries.begin(), header.entries.end(),
                   [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  uint64_t position = 0;
  for (const Entry& e : header.entries) {
    if (e.begin != position)
      fail(path, ": tensor '", e.name, "': data starts at byte ", e.begin, ", expected ", position,
           " (tensors must be contiguous, without gaps or overlaps)");
    position = e.end;
  }
  if (position != data_bytes)
    fail(path, ": the tensors hold ", position, " bytes but the file has ", data_bytes,
         " bytes of data after the header");
  return header;
}

std::ifstream open(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open for reading");
  return in;
}

}  // namespace

void save(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__" || header.contains(name))
      internal_fail(path, ": cannot save tensor '", name, "': the name is reserved or repeated");
    if (!t.defined()) internal_fail(path, ": cannot save tensor '", name, "': it is undefined");
    uint64_t bytes = static_cast<uint64_t>(t.numel() * element_bytes(t.dtype()));
    header[name] = {{"dtype", dtype_name(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  uint64_t header_bytes = text.size();

  AtomicFileWriter out(path);
  out.write(&header_bytes, 8);
  out.write(text);
  for (const auto& [name, t] : tensors) {
    Tensor on_host = t.to(cpu());  // tensors on another device cross to the host here
    out.write(on_host.raw(), static_cast<size_t>(t.numel() * element_bytes(t.dtype())));
  }
  out.commit();
}

Contents load(const std::string& path) {
  std::ifstream in = open(path);
  Header header = read_header(in, path);
  Contents contents;
  contents.metadata = std::move(header.metadata);
  for (const Entry& e : header.entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    auto bytes = static_cast<std::streamsize>(e.end - e.begin);
    in.read(static_cast<char*>(t.raw()), bytes);
    if (in.gcount() != bytes) fail(path, ": tensor '", e.name, "': cannot read its data");
    contents.tensors.emplace_back(e.name, t);
  }
  return contents;
}

Metadata load_metadata(const std::string& path) {
  std::ifstream in = open(path);
  return read_header(in, path).metadata;
}

}  // namespace sf::safetensors
