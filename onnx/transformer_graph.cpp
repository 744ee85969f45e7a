#include "transformer_graph.h"

#include <cmath>
#include <functional>
#include <map>

#include "graph_builder.h"

namespace sf::onnx {

namespace {

using Value = std::string;  // a value's name in the graph

Dim named(std::string name) { return {-1, std::move(name)}; }
Dim sized(int64_t size) { return {size, ""}; }

Attribute axes(std::vector<int64_t> values) { return Attribute::of_ints("axes", std::move(values)); }
Attribute perm(std::vector<int64_t> values) { return Attribute::of_ints("perm", std::move(values)); }

// The layers of nn/ (layers.cpp, attention.cpp, transformer.cpp) as nodes,
// each reading its weights by their state_dict names.
class ModelGraph {
 public:
  explicit ModelGraph(const nn::Transformer& model) : c_(model.config()) {
    for (auto& [name, tensor] : model.state_dict()) weights_.emplace(name, tensor);
  }

  const nn::TransformerConfig& config() const { return c_; }
  int64_t d_k() const { return c_.d_model / c_.h; }

  Value weight(GraphBuilder& b, const std::string& name) const { return b.weight(name, weights_.at(name)); }

  // torch.nn.Linear: x W^T + b. The transpose of the [out, in] weight is a
  // constant, which runtimes fold at load.
  Value linear(GraphBuilder& b, const Value& x, const std::string& module,
               const std::string& weight_name = "") const {
    b.set_scope(module);
    Value w = b.op("Transpose", {weight(b, weight_name.empty() ? module + ".weight" : weight_name)}, {perm({1, 0})});
    return b.op("Add", {b.op("MatMul", {x, w}), weight(b, module + ".bias")});
  }

  // alpha * (x - mean) / (std + eps) + bias, std unbiased: sqrt(Σ(x - mean)² / (n - 1)).
  Value layer_norm(GraphBuilder& b, const Value& x, const std::string& module) const {
    b.set_scope(module);
    Value centred = b.op("Sub", {x, b.op("ReduceMean", {x}, {axes({-1})})});
    Value variance = b.op("Div", {b.op("ReduceSumSquare", {centred}, {axes({-1})}),
                                  b.scalar(static_cast<float>(c_.d_model - 1))});
    Value denominator = b.op("Add", {b.op("Sqrt", {variance}), b.scalar(1e-6f)});
    Value normalized = b.op("Div", {b.op("Mul", {centred, weight(b, module + ".alpha")}), denominator});
    return b.op("Add", {normalized, weight(b, module + ".bias")});
  }

  // [B, S, d_model] -> [B, h, S, d_k] and back.
  Value split_heads(GraphBuilder& b, const Value& x) const {
    return b.op("Transpose", {b.op("Reshape", {x, b.ints({0, 0, c_.h, d_k()})})}, {perm({0, 2, 1, 3})});
  }
  Value merge_heads(GraphBuilder& b, const Value& x) const {
    return b.op("Reshape", {b.op("Transpose", {x}, {perm({0, 2, 1, 3})}), b.ints({0, 0, c_.d_model})});
  }

  // The keys and values w_k x, w_v x, split into heads.
  std::pair<Value, Value> keys_values(GraphBuilder& b, const Value& x, const std::string& module) const {
    return {split_heads(b, linear(b, x, module + ".w_k")), split_heads(b, linear(b, x, module + ".w_v"))};
  }

  // w_o(heads of softmax(Q K^T / sqrt(d_k), hidden keys' scores -1e9) V),
  // Q = w_q q; `keep` (bool) broadcasts to the scores [B, h, queries, keys].
  Value attend(GraphBuilder& b, const Value& q, const Value& keys, const Value& values, const Value& keep,
               const std::string& module) const {
    Value query = split_heads(b, linear(b, q, module + ".w_q"));
    b.set_scope(module);
    Value scores = b.op("MatMul", {query, b.op("Transpose", {keys}, {perm({0, 1, 3, 2})})});
    scores = b.op("Mul", {scores, b.scalar(1.0f / std::sqrt(static_cast<float>(d_k())))});
    Value weights = b.op("Softmax", {b.op("Where", {keep, scores, b.scalar(-1e9f)})},
                         {Attribute::of_int("axis", -1)});
    return linear(b, merge_heads(b, b.op("MatMul", {weights, values})), module + ".w_o");
  }

  // linear_2(activation(linear_1 x)); GELU in its tanh form, as
  // x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3) (autograd/kernels/shared.h).
  Value feed_forward(GraphBuilder& b, const Value& x, const std::string& module) const {
    Value hidden = linear(b, x, module + ".linear_1");
    b.set_scope(module);
    if (c_.activation == nn::Activation::Relu) {
      hidden = b.op("Relu", {hidden});
    } else {
      Value cube = b.op("Mul", {b.op("Mul", {hidden, hidden}), hidden});
      Value inner = b.op("Add", {hidden, b.op("Mul", {cube, b.scalar(0.044715f)})});
      Value twice_u = b.op("Mul", {inner, b.scalar(2.0f * 0.7978845608028654f)});
      hidden = b.op("Mul", {hidden, b.op("Sigmoid", {twice_u})});
    }
    return linear(b, hidden, module + ".linear_2");
  }

  // The residual connection `module`: pre-norm x + sublayer(norm(x)), or
  // post-norm norm(x + sublayer(x)).
  Value residual(GraphBuilder& b, const Value& x, const std::string& module,
                 const std::function<Value(const Value&)>& sublayer) const {
    if (c_.post_norm) {
      Value out = sublayer(x);
      b.set_scope(module);
      return layer_norm(b, b.op("Add", {x, out}), module + ".norm");
    }
    Value out = sublayer(layer_norm(b, x, module + ".norm"));
    b.set_scope(module);
    return b.op("Add", {x, out});
  }

  // embedding(ids) * sqrt(d_model) + pe[start : start + length].
  Value embed(GraphBuilder& b, const Value& ids, const std::string& embed, const std::string& pos,
              const Value& start, const Value& length) const {
    b.set_scope(embed);
    Value table = weight(b, embed + ".embedding.weight");
    Value scaled = b.op("Mul", {b.op("Gather", {table, ids}, {Attribute::of_int("axis", 0)}),
                                b.scalar(std::sqrt(static_cast<float>(c_.d_model)))});
    b.set_scope(pos);
    Value end = b.op("Add", {start, length});
    Value pe = b.op("Slice", {weight(b, pos + ".pe"), start, end, b.ints({1})});
    return b.op("Add", {scaled, pe});
  }

  // The final norm of a pre-norm stack.
  Value final_norm(GraphBuilder& b, const Value& x, const std::string& stack) const {
    return c_.post_norm ? x : layer_norm(b, x, stack + ".norm");
  }

  // A padding mask [B, S] (int64, 1 = token) as keep [B, 1, 1, S] (bool).
  static Value keep_mask(GraphBuilder& b, const Value& mask) {
    b.set_scope("masks");
    Value keep = b.op("Cast", {mask}, {Attribute::of_int("to", static_cast<int64_t>(ElementType::Bool))});
    return b.op("Unsqueeze", {keep, b.ints({1, 2})});
  }

  // Dimension `axis` of x, as an int64 [1].
  static Value dim(GraphBuilder& b, const Value& x, int64_t axis) {
    return b.op("Shape", {x}, {Attribute::of_int("start", axis), Attribute::of_int("end", axis + 1)});
  }

 private:
  const nn::TransformerConfig& c_;
  std::map<std::string, Tensor> weights_;
};

std::string layer(const std::string& stack, size_t i) { return stack + ".layers." + std::to_string(i); }

// One tensor of the decoder's cache: layer i's self-attention ("decoder") or
// cross-attention ("encoder") keys or values, named as Hugging Face names
// them: past_key_values.i.decoder.key in, present.i.decoder.key out.
struct CacheSlot {
  size_t layer;
  std::string side, kind;
  bool self() const { return side == "decoder"; }
  std::string name(const std::string& prefix) const {
    return prefix + "." + std::to_string(layer) + "." + side + "." + kind;
  }
};

std::vector<CacheSlot> cache_slots(size_t layers) {
  std::vector<CacheSlot> slots;
  for (size_t i = 0; i < layers; ++i)
    for (const char* side : {"decoder", "encoder"})
      for (const char* kind : {"key", "value"}) slots.push_back({i, side, kind});
  return slots;
}

// The If node's results for a slot: the self-attention cache before this
// step ("past.i.decoder.*"), or the cross-attention keys and values, which
// are already the outputs present.i.encoder.*.
std::string chosen_name(const CacheSlot& slot) { return slot.name(slot.self() ? "past" : "present"); }

// A branch of the If node on use_cache_branch. With the cache: the past
// inputs as they are. Without: no earlier positions (the past cut to length
// 0), and the cross-attention keys and values of the encoder's output.
std::shared_ptr<const Graph> cache_branch(const ModelGraph& m, GraphBuilder& outer, bool cached,
                                          const std::vector<Dim>& self_dims, const std::vector<Dim>& cross_dims) {
  auto sub = std::make_shared<Graph>();
  sub->name = cached ? "with_cache" : "without_cache";
  GraphBuilder s(*sub, outer);
  std::vector<std::pair<Value, Value>> computed;  // per layer, without the cache
  if (!cached)
    for (size_t i = 0; i < static_cast<size_t>(m.config().N); ++i)
      computed.push_back(m.keys_values(s, "encoder_hidden_states", layer("decoder", i) + ".cross_attention_block"));
  s.set_scope(sub->name);
  for (const CacheSlot& slot : cache_slots(static_cast<size_t>(m.config().N))) {
    Value past = slot.name("past_key_values"), out;
    if (cached) out = past;
    else if (slot.self()) out = s.op("Slice", {past, s.ints({0}), s.ints({0}), s.ints({2})});
    else out = slot.kind == "key" ? computed[slot.layer].first : computed[slot.layer].second;
    std::string name = sub->name + "/" + chosen_name(slot);
    s.op_into("Identity", {out}, {name});
    s.output({name, ElementType::Float, slot.self() ? self_dims : cross_dims});
  }
  return sub;
}

// keep [n, past + n] (bool) for new positions past, ..., past + n - 1: query p
// sees keys 0..p.
Value causal_keep(GraphBuilder& b, const Value& past, const Value& n) {
  b.set_scope("masks");
  Value total = b.op("Squeeze", {b.op("Add", {past, n})}), one = b.index(1);
  Value queries = b.op("Unsqueeze", {b.op("Range", {b.op("Squeeze", {past}), total, one}), b.ints({1})});
  Value keys = b.op("Range", {b.index(0), total, one});
  return b.op("LessOrEqual", {keys, queries});
}

}  // namespace

Graph encoder_graph(const nn::Transformer& model) {
  ModelGraph m(model);
  const nn::TransformerConfig& c = m.config();
  Graph graph;
  graph.name = "scratchformer encoder";
  GraphBuilder b(graph);
  const std::vector<Dim> tokens = {named("batch_size"), named("encoder_sequence_length")};
  b.input({"input_ids", ElementType::Int64, tokens});
  b.input({"attention_mask", ElementType::Int64, tokens});

  Value keep = ModelGraph::keep_mask(b, "attention_mask");
  Value x = m.embed(b, "input_ids", "src_embed", "src_pos", b.ints({0}), ModelGraph::dim(b, "input_ids", 1));
  for (size_t i = 0; i < static_cast<size_t>(c.N); ++i) {
    std::string l = layer("encoder", i);
    x = m.residual(b, x, l + ".residual_connections.0", [&](const Value& z) {
      auto [keys, values] = m.keys_values(b, z, l + ".self_attention_block");
      return m.attend(b, z, keys, values, keep, l + ".self_attention_block");
    });
    x = m.residual(b, x, l + ".residual_connections.1",
                   [&](const Value& z) { return m.feed_forward(b, z, l + ".feed_forward_block"); });
  }
  x = m.final_norm(b, x, "encoder");
  b.op_into("Identity", {x}, {"last_hidden_state"});
  b.output({"last_hidden_state", ElementType::Float,
            {named("batch_size"), named("encoder_sequence_length"), sized(c.d_model)}});
  return graph;
}

Graph decoder_graph(const nn::Transformer& model) {
  ModelGraph m(model);
  const nn::TransformerConfig& c = m.config();
  const std::vector<CacheSlot> slots = cache_slots(static_cast<size_t>(c.N));
  Graph graph;
  graph.name = "scratchformer decoder (merged: with and without a cache)";
  GraphBuilder b(graph);
  auto cache_dims = [&](const char* length) {
    return std::vector<Dim>{named("batch_size"), sized(c.h), named(length), sized(m.d_k())};
  };
  const std::vector<Dim> self_dims = cache_dims("past_decoder_sequence_length"),
                         cross_dims = cache_dims("encoder_sequence_length_out");
  b.input({"encoder_attention_mask", ElementType::Int64, {named("batch_size"), named("encoder_sequence_length")}});
  b.input({"input_ids", ElementType::Int64, {named("batch_size"), named("decoder_sequence_length")}});
  b.input({"encoder_hidden_states", ElementType::Float,
           {named("batch_size"), named("encoder_sequence_length"), sized(c.d_model)}});
  for (const CacheSlot& slot : slots)
    b.input({slot.name("past_key_values"), ElementType::Float, slot.self() ? self_dims : cross_dims});
  b.input({"use_cache_branch", ElementType::Bool, {sized(1)}});

  std::vector<std::string> chosen;
  for (const CacheSlot& slot : slots) chosen.push_back(chosen_name(slot));
  std::shared_ptr<const Graph> with_cache = cache_branch(m, b, true, self_dims, cross_dims),
                               without_cache = cache_branch(m, b, false, self_dims, cross_dims);
  b.set_scope("cache");
  b.op_into("If", {"use_cache_branch"}, chosen,
            {Attribute::of_graph("then_branch", with_cache), Attribute::of_graph("else_branch", without_cache)});

  // The new positions are past, past + 1, ..., past + n - 1.
  Value past = ModelGraph::dim(b, "past.0.decoder.key", 2), n = ModelGraph::dim(b, "input_ids", 1);
  Value self_keep = causal_keep(b, past, n), cross_keep = ModelGraph::keep_mask(b, "encoder_attention_mask");
  Value x = m.embed(b, "input_ids", "tgt_embed", "tgt_pos", past, n);
  for (size_t i = 0; i < slots.size(); i += 4) {  // one layer's four slots: self key, value; cross key, value
    const CacheSlot &self_key = slots[i], &self_value = slots[i + 1], &cross_key = slots[i + 2],
                    &cross_value = slots[i + 3];
    std::string l = layer("decoder", self_key.layer);
    x = m.residual(b, x, l + ".residual_connections.0", [&](const Value& z) {
      std::string self = l + ".self_attention_block";
      auto [keys, values] = m.keys_values(b, z, self);
      b.set_scope(self);
      // The past with the new positions appended: the outputs present.i.decoder.*.
      b.op_into("Concat", {chosen_name(self_key), keys}, {self_key.name("present")}, {Attribute::of_int("axis", 2)});
      b.op_into("Concat", {chosen_name(self_value), values}, {self_value.name("present")},
                {Attribute::of_int("axis", 2)});
      return m.attend(b, z, self_key.name("present"), self_value.name("present"), self_keep, self);
    });
    x = m.residual(b, x, l + ".residual_connections.1", [&](const Value& z) {
      return m.attend(b, z, cross_key.name("present"), cross_value.name("present"), cross_keep,
                      l + ".cross_attention_block");
    });
    x = m.residual(b, x, l + ".residual_connections.2",
                   [&](const Value& z) { return m.feed_forward(b, z, l + ".feed_forward_block"); });
  }
  x = m.final_norm(b, x, "decoder");
  // Tied: the projection reads the target embedding's matrix itself.
  Value logits = m.linear(b, x, "projection_layer.proj", c.tie_embeddings ? "tgt_embed.embedding.weight" : "");
  b.op_into("Identity", {logits}, {"logits"});

  b.output({"logits", ElementType::Float,
            {named("batch_size"), named("decoder_sequence_length"), sized(c.tgt_vocab_size)}});
  for (const CacheSlot& slot : slots)
    b.output({slot.name("present"), ElementType::Float,
              slot.self() ? cache_dims("present_decoder_sequence_length") : cross_dims});
  return graph;
}

}  // namespace sf::onnx
