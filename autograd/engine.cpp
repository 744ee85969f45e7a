#include "engine.h"

#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "ops.h"

namespace sf {
namespace {
thread_local bool g_grad_enabled = true;
}

NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }
bool grad_enabled() { return g_grad_enabled; }

Tensor record(const Tensor& out, const char* op, std::vector<Tensor> inputs, BackwardFn backward) {
  if (!g_grad_enabled) return out;
  bool needed = false;
  for (const Tensor& t : inputs) needed = needed || (t.defined() && t.requires_grad());
  if (!needed) return out;
  std::vector<Edge> edges(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !t.requires_grad()) continue;
    edges[i] = {t.grad_fn(), t.is_leaf() ? t : Tensor(), t.shape()};
  }
  out.set_grad_fn(std::make_shared<Node>(Node{op, std::move(edges), std::move(backward)}));
  return out;
}

// Nodes in an order where every node comes before the nodes of its inputs
// (iterative depth-first search: graphs of deep models are thousands of nodes).
// The order holds owning pointers: freeing a node's inputs during backward
// would otherwise free nodes still waiting their turn.
static std::vector<std::shared_ptr<Node>> topological_order(const std::shared_ptr<Node>& root) {
  std::vector<std::shared_ptr<Node>> post_order;
  std::unordered_set<Node*> visited{root.get()};
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [node, next_input] = stack.back();
    if (next_input < node->inputs.size()) {
      const std::shared_ptr<Node>& child = node->inputs[next_input++].grad_fn;
      if (child && visited.insert(child.get()).second) stack.push_back({child, 0});
    } else {
      post_order.push_back(node);
      stack.pop_back();
    }
  }
  return {post_order.rbegin(), post_order.rend()};
}

// How many edges lead to each leaf: its gradient is final once that many have been passed.
static std::unordered_map<const TensorImpl*, int64_t> leaf_uses(const std::vector<std::shared_ptr<Node>>& order) {
  std::unordered_map<const TensorImpl*, int64_t> uses;
  for (const std::shared_ptr<Node>& node : order)
    for (const Edge& input : node->inputs)
      if (input.leaf.defined()) ++uses[input.leaf.id()];
  return uses;
}

void run_backward(const Tensor& root, const Tensor& grad, const BackwardHooks& hooks) {
  if (!root.requires_grad()) internal_fail("backward() on a tensor that does not require grad");
  if (grad.shape() != root.shape())
    internal_fail("backward(): gradient of shape ", to_string(grad.shape()), " for a tensor of shape ",
                  to_string(root.shape()));
  NoGradGuard no_grad;
  if (root.is_leaf()) {
    root.accumulate_grad(grad);
    if (hooks.grad_ready) hooks.grad_ready(root);
    return;
  }
  Node* root_node = root.grad_fn().get();
  if (!root_node->backward)
    internal_fail("backward() through a graph that was already freed by an earlier backward()");

  std::unordered_map<Node*, Tensor> pending{{root_node, grad}};
  const std::vector<std::shared_ptr<Node>> order = topological_order(root.grad_fn());
  std::unordered_map<const TensorImpl*, int64_t> uses_left;
  if (hooks.grad_ready) uses_left = leaf_uses(order);
  // Frees what the node saved for backward (the graph is used once), and
  // reports the leaves whose last pending use it was.
  auto finish = [&](Node* node) {
    if (hooks.grad_ready)
      for (const Edge& input : node->inputs)
        if (input.leaf.defined() && --uses_left[input.leaf.id()] == 0) hooks.grad_ready(input.leaf);
    node->backward = nullptr;
    node->inputs.clear();
  };
  for (const std::shared_ptr<Node>& owned : order) {
    Node* node = owned.get();
    Tensor grad_output = std::move(pending[node]);
    if (!grad_output.defined()) {  // no path carried a gradient here
      finish(node);
      continue;
    }
    Grads grads = node->backward(grad_output);
    if (grads.size() != node->inputs.size())
      internal_fail(node->op, " backward returned ", grads.size(), " gradients for ",
                    node->inputs.size(), " inputs");
    for (size_t i = 0; i < grads.size(); ++i) {
      const Edge& input = node->inputs[i];
      if (!input.requires_grad() || !grads[i].defined()) continue;
      if (grads[i].shape() != input.shape)
        internal_fail(node->op, " backward gave a gradient of shape ",
                      to_string(grads[i].shape()), " for an input of shape ", to_string(input.shape));
      if (input.leaf.defined()) {
        input.leaf.accumulate_grad(grads[i]);
      } else {
        Tensor& slot = pending[input.grad_fn.get()];
        slot = slot.defined() ? add(slot, grads[i]) : grads[i];
      }
    }
    finish(node);
  }
}

}  // namespace sf
