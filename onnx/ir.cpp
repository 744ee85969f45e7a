#include "ir.h"

#include "protobuf.h"

namespace sf::onnx {

Attribute Attribute::of_int(std::string name, int64_t value) {
  return {.name = std::move(name), .kind = Kind::Int, .i = value};
}
Attribute Attribute::of_float(std::string name, float value) {
  return {.name = std::move(name), .kind = Kind::Float, .f = value};
}
Attribute Attribute::of_ints(std::string name, std::vector<int64_t> values) {
  return {.name = std::move(name), .kind = Kind::Ints, .ints = std::move(values)};
}
Attribute Attribute::of_graph(std::string name, std::shared_ptr<const Graph> graph) {
  return {.name = std::move(name), .kind = Kind::Graph, .graph = std::move(graph)};
}

namespace {

// The field numbers of onnx.proto (IR version 8), message by message.
namespace model_field { enum { ir_version = 1, producer_name = 2, producer_version = 3, doc_string = 6, graph = 7,
                               opset_import = 8 }; }
namespace opset_field { enum { domain = 1, version = 2 }; }
namespace graph_field { enum { node = 1, name = 2, initializer = 5, input = 11, output = 12 }; }
namespace node_field { enum { input = 1, output = 2, name = 3, op_type = 4, attribute = 5 }; }
namespace attribute_field { enum { name = 1, f = 2, i = 3, g = 6, ints = 8, type = 20 }; }
// AttributeProto.AttributeType's numbers.
namespace attribute_type { enum { Float = 1, Int = 2, Graph = 5, Ints = 7 }; }
namespace tensor_field { enum { dims = 1, data_type = 2, name = 8, raw_data = 9 }; }
namespace value_info_field { enum { name = 1, type = 2 }; }
namespace type_field { enum { tensor_type = 1 }; }
namespace tensor_type_field { enum { elem_type = 1, shape = 2 }; }
namespace shape_field { enum { dim = 1 }; }
namespace dim_field { enum { dim_value = 1, dim_param = 2 }; }

constexpr int64_t kIrVersion = 8;

ProtoWriter graph_message(const Graph& g);

ProtoWriter attribute_message(const Attribute& a) {
  ProtoWriter m;
  m.bytes_field(attribute_field::name, a.name);
  switch (a.kind) {
    case Attribute::Kind::Int:
      m.varint_field(attribute_field::i, a.i);
      m.varint_field(attribute_field::type, attribute_type::Int);
      break;
    case Attribute::Kind::Float:
      m.float_field(attribute_field::f, a.f);
      m.varint_field(attribute_field::type, attribute_type::Float);
      break;
    case Attribute::Kind::Ints:
      m.packed_varints_field(attribute_field::ints, a.ints);
      m.varint_field(attribute_field::type, attribute_type::Ints);
      break;
    case Attribute::Kind::Graph:
      m.message_field(attribute_field::g, graph_message(*a.graph));
      m.varint_field(attribute_field::type, attribute_type::Graph);
      break;
  }
  return m;
}

ProtoWriter node_message(const Node& n) {
  ProtoWriter m;
  for (const std::string& input : n.inputs) m.bytes_field(node_field::input, input);
  for (const std::string& output : n.outputs) m.bytes_field(node_field::output, output);
  m.bytes_field(node_field::name, n.name);
  m.bytes_field(node_field::op_type, n.op_type);
  for (const Attribute& a : n.attributes) m.message_field(node_field::attribute, attribute_message(a));
  return m;
}

ProtoWriter tensor_message(const Initializer& t) {
  ProtoWriter m;
  m.packed_varints_field(tensor_field::dims, t.dims);
  m.varint_field(tensor_field::data_type, static_cast<int64_t>(t.type));
  m.bytes_field(tensor_field::name, t.name);
  m.bytes_field(tensor_field::raw_data, t.raw);
  return m;
}

// ValueInfoProto { name, type: TypeProto { tensor_type: { elem_type, shape } } }.
ProtoWriter value_info_message(const ValueInfo& v) {
  ProtoWriter shape;
  for (const Dim& d : v.shape) {
    ProtoWriter dim;
    if (d.size >= 0) dim.varint_field(dim_field::dim_value, d.size);
    else dim.bytes_field(dim_field::dim_param, d.name);
    shape.message_field(shape_field::dim, dim);
  }
  ProtoWriter tensor_type;
  tensor_type.varint_field(tensor_type_field::elem_type, static_cast<int64_t>(v.type));
  tensor_type.message_field(tensor_type_field::shape, shape);
  ProtoWriter type;
  type.message_field(type_field::tensor_type, tensor_type);
  ProtoWriter m;
  m.bytes_field(value_info_field::name, v.name);
  m.message_field(value_info_field::type, type);
  return m;
}

ProtoWriter graph_message(const Graph& g) {
  ProtoWriter m;
  for (const Node& n : g.nodes) m.message_field(graph_field::node, node_message(n));
  m.bytes_field(graph_field::name, g.name);
  for (const Initializer& t : g.initializers) m.message_field(graph_field::initializer, tensor_message(t));
  for (const ValueInfo& v : g.inputs) m.message_field(graph_field::input, value_info_message(v));
  for (const ValueInfo& v : g.outputs) m.message_field(graph_field::output, value_info_message(v));
  return m;
}

}  // namespace

std::string serialize_model(const Graph& graph, const ModelInfo& info) {
  ProtoWriter opset;
  opset.bytes_field(opset_field::domain, "");  // "": the standard operators (ai.onnx)
  opset.varint_field(opset_field::version, info.opset);
  ProtoWriter m;
  m.varint_field(model_field::ir_version, kIrVersion);
  m.bytes_field(model_field::producer_name, info.producer_name);
  m.bytes_field(model_field::producer_version, info.producer_version);
  if (!info.doc_string.empty()) m.bytes_field(model_field::doc_string, info.doc_string);
  m.message_field(model_field::graph, graph_message(graph));
  m.message_field(model_field::opset_import, opset);
  return m.bytes();
}

}  // namespace sf::onnx
