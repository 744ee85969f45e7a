// The parts of ONNX's intermediate representation an exported model uses
// (https://onnx.ai/onnx/repo-docs/IR.html), and their serialisation as an
// onnx.ModelProto message:
//   a model    is a graph plus the operator sets it draws its ops from (opset
//              17: each op as defined in version 17 of the standard ops);
//   a graph    is a list of nodes in topological order, the initializers
//              (named constant tensors: the weights), and typed inputs and
//              outputs;
//   a node     applies one op (MatMul, Softmax, ...) to named values and names
//              its results; attributes are its fixed settings (Softmax's
//              axis, a subgraph for If);
//   a value    is named once, by the graph input, initializer or node output
//              that makes it (static single assignment); a subgraph may read
//              the values of the graphs around it.
// Dimensions of inputs and outputs are numbers or names: a named dimension
// (batch_size) is dynamic, and two dimensions of one name are equal.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sf::onnx {

// TensorProto.DataType's numbers.
enum class ElementType : int64_t { Float = 1, Int64 = 7, Bool = 9 };

struct Dim {
  int64_t size = -1;  // fixed, or -1 when `name` names a dynamic dimension
  std::string name;
};

struct ValueInfo {
  std::string name;
  ElementType type = ElementType::Float;
  std::vector<Dim> shape;
};

// An initializer: dims and the values' little-endian bytes (TensorProto.raw_data).
struct Initializer {
  std::string name;
  ElementType type = ElementType::Float;
  std::vector<int64_t> dims;
  std::string raw;
};

struct Graph;

struct Attribute {
  enum class Kind { Int, Float, Ints, Graph };
  std::string name;
  Kind kind = Kind::Int;
  int64_t i = 0;
  float f = 0;
  std::vector<int64_t> ints{};
  std::shared_ptr<const Graph> graph{};

  static Attribute of_int(std::string name, int64_t value);
  static Attribute of_float(std::string name, float value);
  static Attribute of_ints(std::string name, std::vector<int64_t> values);
  static Attribute of_graph(std::string name, std::shared_ptr<const Graph> graph);
};

struct Node {
  std::string op_type, name;
  std::vector<std::string> inputs, outputs;
  std::vector<Attribute> attributes;
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<Initializer> initializers;
  std::vector<ValueInfo> inputs, outputs;
};

struct ModelInfo {
  int64_t opset = 17;
  std::string producer_name = "scratchformer", producer_version, doc_string;
};

// The bytes of the ModelProto: IR version 8 (the one of opset 17), `graph`,
// the default domain's operator set at info.opset.
std::string serialize_model(const Graph& graph, const ModelInfo& info);

}  // namespace sf::onnx
