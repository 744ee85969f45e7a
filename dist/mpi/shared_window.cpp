// Shared memory. Where every rank runs on this machine, the buckets lie in
// memory that all the ranks map, and a sum needs no messages at all: after a
// barrier (every rank's bucket is final), rank r adds chunk r of every rank's
// bucket and, for an all-reduce, stores the sum into every rank's bucket; a
// second barrier, and every rank holds every sum. Each rank reads and writes
// 2 (N - 1) / N of the bucket in the others' memory, as much as the ring
// sends, but at the speed of its own loads and stores: a message between two
// processes costs a copy into the receiver (Linux's process_vm_readv, ~25%
// slower than memcpy here) and the adding of it after; measured between 2
// ranks on a 2-core Xeon, a 16 MB bucket took 2.9 ms by the ring and 0.6 ms
// in shared memory. Ranks on several machines use the ring.
#include "shared_window.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <string>

#include "base/environment.h"
#include "base/error.h"
#include "base/platform.h"

namespace sf::dist {

namespace {

// Sequentially consistent operations on a word of the shared window, which
// other processes change too. (What std::atomic_ref does, with the builtins
// it is made of in GCC and Clang: libc++ has atomic_ref only from LLVM 19.)
template <class T>
struct SharedWord {
  T* word;
  T load() const { return __atomic_load_n(word, __ATOMIC_SEQ_CST); }
  T fetch_add(T value) { return __atomic_fetch_add(word, value, __ATOMIC_SEQ_CST); }
  T fetch_sub(T value) { return __atomic_fetch_sub(word, value, __ATOMIC_SEQ_CST); }
};

// Each part begins with a cache line for the barrier's counters, and each
// buffer in it on a cache line of its own.
constexpr size_t kLineFloats = 64 / sizeof(float);
constexpr size_t kHeaderFloats = kLineFloats;

}  // namespace

bool shared_sums_from_environment() {
  const char* text = environment::value("SCRATCHFORMER_MPI_SHARED_SUMS");
  if (!text) return true;
  const std::string value = text;
  if (value != "0" && value != "1") fail("SCRATCHFORMER_MPI_SHARED_SUMS=\"", value, "\": expected 0 or 1");
  return value == "1";
}

WindowLayout::WindowLayout(const std::vector<size_t>& sizes) : elements(sizes) {
  for (size_t n : elements) {
    offsets.push_back(buffer_floats);
    buffer_floats += (n + kLineFloats - 1) / kLineFloats * kLineFloats;
  }
}

size_t WindowLayout::part_bytes() const { return (kHeaderFloats + buffer_floats) * sizeof(float); }

// Open MPI backs a shared window with a file in its
// osc_sm_backing_directory (/dev/shm unless `mpirun --mca` sets another),
// and a file larger than the room left there maps, but its first store past
// the room ends the process (SIGBUS): a container's default /dev/shm is
// 64 MB. Without the room the ranks sum by messages.
bool shared_memory_holds(Communicator& comm, size_t bytes, bool& said) {
  const char* set = environment::value("OMPI_MCA_osc_sm_backing_directory");
  const std::string folder = set ? set : "/dev/shm";
  struct statvfs fs {};
  const bool room = statvfs(folder.c_str(), &fs) == 0 && double(fs.f_bavail) * double(fs.f_frsize) >= double(bytes);
  std::vector<int64_t> lacking{room ? 0 : 1};
  comm.all_reduce_max(lacking);
  if (lacking[0] == 0) return true;
  if (!said) {
    say(comm, "data parallel: %s has no room for the gradient buckets (%.1f MiB for %d ranks), so the ranks sum "
              "them by messages, more slowly; give it more (docker run --shm-size=1g)\n",
        folder.c_str(), double(bytes) / (1 << 20), comm.local_size());
    said = true;
  }
  return false;
}

// One window holds every buffer, each rank's part in pages of its own.
void SharedWindow::allocate(const WindowLayout& layout) {
  const size_t part_floats = layout.part_bytes() / sizeof(float);
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");  // each rank's part in its own pages
  float* mine = nullptr;
  MPI_Win_allocate_shared(MPI_Aint(layout.part_bytes()), sizeof(float), info, ranks_.comm, &mine, &window_);
  MPI_Info_free(&info);
  std::fill(mine, mine + part_floats, 0.0f);  // the counter too
  mine_ = {mine + kHeaderFloats, layout.buffer_floats};
  for (int r = 0; r < ranks_.size; ++r) {
    MPI_Aint bytes = 0;
    int unit = 0;
    float* part = nullptr;
    MPI_Win_shared_query(window_, r, &bytes, &unit, &part);
    if (size_t(bytes) < layout.part_bytes())
      internal_fail("shared buffers: rank ", r, "'s part holds ", bytes, " bytes, not ", layout.part_bytes());
    parts_.push_back(part + kHeaderFloats);
  }
  arrived_ = reinterpret_cast<int64_t*>(parts_[0] - kHeaderFloats);
  opened_ = reinterpret_cast<uint32_t*>(arrived_ + 1);
  sleepers_ = opened_ + 1;
  // Rank 0's counter is zero before any rank counts on it.
  MPI_Request request;
  MPI_Ibarrier(ranks_.comm, &request);
  liveness_.wait_for({&request, 1}, kAllReduce);
}

std::vector<std::span<float>> SharedWindow::buffers(const WindowLayout& layout) const {
  std::vector<std::span<float>> buffers;
  for (size_t i = 0; i < layout.elements.size(); ++i)
    buffers.push_back(mine_.subspan(layout.offsets[i], layout.elements[i]));
  return buffers;
}

void SharedWindow::free() {
  if (window_ == MPI_WIN_NULL) return;
  MPI_Win_free(&window_);
  mine_ = {};
  parts_.clear();
  arrived_ = nullptr;
  opened_ = sleepers_ = nullptr;
  barriers_ = 0;
}

bool SharedWindow::holds(std::span<float> values) const {
  return !mine_.empty() && values.data() >= mine_.data() && values.data() + values.size() <= mine_.data() + mine_.size();
}

// Waits until every rank is here; their loads and stores of the window
// before it then happen before this rank's after it. A counter in rank 0's
// part that only rises (MPI's own barrier, which advances only inside MPI
// calls, made a 1 KB sum take half a millisecond of sleeping waiters). A
// rank that waits longer than the wait's spin sleeps in the kernel on the
// `opened` word (Linux's futex, on memory the processes share:
// base/platform.h) until the last rank to arrive wakes it: no core time while
// a peer still computes, and no sleep's delay after it arrives. The last rank
// makes the system call only when some rank sleeps: `sleepers` rises before a
// rank sleeps, and `opened` before the last rank reads it (both sequentially
// consistent), so either the last rank sees the sleeper or the sleeper's wait
// sees `opened` changed and returns at once.
void SharedWindow::barrier() {
  SharedWord<int64_t> arrived{arrived_};
  SharedWord<uint32_t> opened{opened_}, sleepers{sleepers_};
  const int64_t all_here = ++barriers_ * ranks_.size;
  const uint32_t closed = opened.load();  // read before arriving: the last rank changes it after
  if (arrived.fetch_add(1) + 1 == all_here) {
    opened.fetch_add(1);
    if (sleepers.load() > 0) platform::wake_all_waiters(opened_);
    return;
  }
  liveness_.wait_until(
      kAllReduce, 0, [&] { return arrived.load() >= all_here; },
      [&](Clock::duration longest) {
        sleepers.fetch_add(1);
        platform::wait_while_equal(opened_, closed, longest);
        sleepers.fetch_sub(1);
      });
}

// Rank r's chunk is summed in blocks that stay in L1 cache, always in rank
// order, so every rank gets the same bits.
int64_t SharedWindow::sum(std::span<float> values, const std::vector<int64_t>& begins, bool all_gather) {
  // This rank's chunk, as offsets into every rank's part of the window.
  const size_t offset = size_t(values.data() - mine_.data());
  const size_t begin = offset + size_t(begins[ranks_.rank]), end = offset + size_t(begins[ranks_.rank + 1]);
  barrier();
  constexpr size_t kBlock = 1024;
  float sum[kBlock];
  for (size_t at = begin; at < end; at += kBlock) {
    const size_t n = std::min(kBlock, end - at);
    std::copy_n(parts_[0] + at, n, sum);
    for (int r = 1; r < ranks_.size; ++r)
      for (size_t i = 0; i < n; ++i) sum[i] += parts_[r][at + i];  // vectorised by the compiler
    if (!all_gather) {
      std::copy_n(sum, n, parts_[ranks_.rank] + at);
      continue;
    }
    for (float* part : parts_) std::copy_n(sum, n, part + at);
  }
  barrier();
  // The others' memory this rank read, and wrote: a ring's messages.
  return int64_t((end - begin) * sizeof(float)) * (ranks_.size - 1) * (all_gather ? 2 : 1);
}

}  // namespace sf::dist
