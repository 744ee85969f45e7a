#include "communicator.h"

#include "base/error.h"

namespace sf::dist {

namespace {

// Alone, every reduction of one value is that value and every broadcast or
// gather a copy: nothing to do but keep the contract.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  void all_reduce_sum(std::span<double>) override {}
  void all_reduce_sum(std::span<int64_t>) override {}
  void all_reduce_max(std::span<int64_t>) override {}
  void broadcast(std::span<std::byte>, int root) override {
    if (root != 0) internal_fail("broadcast from rank ", root, " in a single process");
  }
  void all_gather_in_place(const std::vector<Runs>&) override {}
  void gather_in_place(const std::vector<Runs>&, int) override {}
  void all_gather(std::span<const std::byte> mine, std::span<std::byte> all) override {
    if (all.size() != mine.size()) internal_fail("all_gather: ", all.size(), " bytes for ", mine.size());
    std::copy(mine.begin(), mine.end(), all.begin());
  }
  Request start_all_reduce_sum(std::span<float>) override { return 0; }
  Request start_reduce_scatter_sum(std::span<float>, std::vector<int64_t>) override { return 0; }
  void wait(Request) override {}
  int64_t bytes_sent() const override { return 0; }
  void abort(int) override {}
};

}  // namespace

std::unique_ptr<Communicator> single_process() { return std::make_unique<SingleProcess>(); }

}  // namespace sf::dist
