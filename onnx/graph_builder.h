// Adds nodes and constants to an ONNX graph (ir.h) under readable, unique
// names: each node is named after the module it belongs to and its op
// ("decoder.layers.0.self_attention_block/MatMul_12"), as Netron then shows
// it, and its output takes the node's name. A builder for a subgraph (an If
// node's branch) shares its outer builder's count, so that names stay unique
// across the nesting, and puts constants and weights in the outermost graph,
// where every branch can read them.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "ir.h"

namespace sf::onnx {

class GraphBuilder {
 public:
  explicit GraphBuilder(Graph& graph) : graph_(graph), root_(this) {}
  // A builder for `subgraph`, read inside a node of `outer`'s graph.
  GraphBuilder(Graph& subgraph, GraphBuilder& outer) : graph_(subgraph), root_(outer.root_) {}

  // The module path that names the next nodes (a state_dict prefix).
  void set_scope(std::string scope) { scope_ = std::move(scope); }

  // One node of `op_type` on `inputs`; returns the name of its one output.
  std::string op(const std::string& op_type, const std::vector<std::string>& inputs,
                 const std::vector<Attribute>& attributes = {});
  // One node whose outputs are given their names (graph outputs, If results).
  void op_into(const std::string& op_type, const std::vector<std::string>& inputs,
               const std::vector<std::string>& outputs, const std::vector<Attribute>& attributes = {});

  // Constants, each added once: an int64 vector [n], an int64 scalar [], a float scalar [].
  std::string ints(const std::vector<int64_t>& values);
  std::string index(int64_t value);
  std::string scalar(float value);
  // The float32 initializer `name` holding `tensor` (bf16 widened), added once.
  std::string weight(const std::string& name, const Tensor& tensor);

  void input(ValueInfo value) { graph_.inputs.push_back(std::move(value)); }
  void output(ValueInfo value) { graph_.outputs.push_back(std::move(value)); }

 private:
  std::string next_name(const std::string& op_type);
  std::string add_initializer(Initializer tensor);

  Graph& graph_;
  GraphBuilder* root_;  // the outermost builder: the count of nodes, the constants
  std::string scope_;
  int64_t count_ = 0;
  std::map<std::string, std::string> constants_;  // a constant's key -> its name
};

}  // namespace sf::onnx
