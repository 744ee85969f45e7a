#include "protobuf.h"

#include <bit>

namespace sf::onnx {

namespace {
enum WireType { kVarint = 0, kLengthDelimited = 2, kFixed32 = 5 };
}

void ProtoWriter::varint(uint64_t value) {
  while (value >= 0x80) {
    out_ += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out_ += static_cast<char>(value);
}

void ProtoWriter::key(int field, int wire_type) { varint(static_cast<uint64_t>(field) << 3 | wire_type); }

void ProtoWriter::varint_field(int field, int64_t value) {
  key(field, kVarint);
  varint(static_cast<uint64_t>(value));  // two's complement for a negative value
}

void ProtoWriter::float_field(int field, float value) {
  key(field, kFixed32);
  uint32_t bits = std::bit_cast<uint32_t>(value);
  for (int i = 0; i < 4; ++i) out_ += static_cast<char>(bits >> (8 * i) & 0xff);
}

void ProtoWriter::bytes_field(int field, std::string_view bytes) {
  key(field, kLengthDelimited);
  varint(bytes.size());
  out_.append(bytes);
}

void ProtoWriter::packed_varints_field(int field, const std::vector<int64_t>& values) {
  ProtoWriter run;
  for (int64_t v : values) run.varint(static_cast<uint64_t>(v));
  bytes_field(field, run.bytes());
}

}  // namespace sf::onnx
