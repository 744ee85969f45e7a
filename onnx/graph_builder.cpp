#include "graph_builder.h"

#include <bit>
#include <cstdio>
#include <cstring>

namespace sf::onnx {

namespace {

// The little-endian bytes of `values` (every machine we build for is little-endian).
template <class T>
std::string raw_bytes(const std::vector<T>& values) {
  static_assert(std::endian::native == std::endian::little);
  std::string raw(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(raw.data(), values.data(), raw.size());
  return raw;
}

}  // namespace

std::string GraphBuilder::next_name(const std::string& op_type) {
  return (scope_.empty() ? "" : scope_ + "/") + op_type + "_" + std::to_string(root_->count_++);
}

std::string GraphBuilder::op(const std::string& op_type, const std::vector<std::string>& inputs,
                             const std::vector<Attribute>& attributes) {
  std::string name = next_name(op_type);
  graph_.nodes.push_back({op_type, name, inputs, {name}, attributes});
  return name;
}

void GraphBuilder::op_into(const std::string& op_type, const std::vector<std::string>& inputs,
                           const std::vector<std::string>& outputs, const std::vector<Attribute>& attributes) {
  graph_.nodes.push_back({op_type, next_name(op_type), inputs, outputs, attributes});
}

std::string GraphBuilder::add_initializer(Initializer tensor) {
  std::string name = tensor.name;
  root_->graph_.initializers.push_back(std::move(tensor));
  return name;
}

std::string GraphBuilder::ints(const std::vector<int64_t>& values) {
  std::string key = "int64";
  for (int64_t v : values) key.append(1, '_').append(std::to_string(v));
  auto [at, added] = root_->constants_.try_emplace(key, key);
  if (added) add_initializer({key, ElementType::Int64, {static_cast<int64_t>(values.size())}, raw_bytes(values)});
  return at->second;
}

std::string GraphBuilder::index(int64_t value) {
  std::string key = "int64_scalar_" + std::to_string(value);
  auto [at, added] = root_->constants_.try_emplace(key, key);
  if (added) add_initializer({key, ElementType::Int64, {}, raw_bytes(std::vector<int64_t>{value})});
  return at->second;
}

std::string GraphBuilder::scalar(float value) {
  // Nine significant digits: the name tells every float apart.
  char text[32];
  std::snprintf(text, sizeof text, "float_%.9g", value);
  auto [at, added] = root_->constants_.try_emplace(text, text);
  if (added) add_initializer({text, ElementType::Float, {}, raw_bytes(std::vector<float>{value})});
  return at->second;
}

std::string GraphBuilder::weight(const std::string& name, const Tensor& tensor) {
  auto [at, added] = root_->constants_.try_emplace("weight " + name, name);
  if (added) add_initializer({name, ElementType::Float, tensor.shape(), raw_bytes(tensor.to_vector())});
  return at->second;
}

}  // namespace sf::onnx
