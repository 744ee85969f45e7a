// The writing half of Protocol Buffers' wire format
// (https://protobuf.dev/programming-guides/encoding/), which is all an ONNX
// file is. A message is a run of fields, each a key then a value; the key is
// the varint (field number << 3 | wire type). The three wire types ONNX needs:
//   0  varint: 7 bits per byte, least significant first, the high bit set on
//      every byte but the last (int32, int64, enum, bool; a negative number
//      is its 64-bit two's complement, ten bytes)
//   2  length-delimited: a varint byte count, then the bytes (string, bytes,
//      a nested message, a packed repeated field)
//   5  32-bit: four little-endian bytes (float)
// Fields may come in any order; a repeated field is its key-value repeated.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sf::onnx {

class ProtoWriter {
 public:
  void varint_field(int field, int64_t value);
  void float_field(int field, float value);
  void bytes_field(int field, std::string_view bytes);  // string, bytes or a nested message
  void message_field(int field, const ProtoWriter& message) { bytes_field(field, message.bytes()); }
  // A repeated int64 field written packed: one length-delimited run of varints.
  void packed_varints_field(int field, const std::vector<int64_t>& values);

  const std::string& bytes() const { return out_; }

 private:
  void key(int field, int wire_type);
  void varint(uint64_t value);

  std::string out_;
};

}  // namespace sf::onnx
