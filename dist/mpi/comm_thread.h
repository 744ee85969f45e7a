// The MPI communicator's communication thread and the queue that feeds it.
// Private to dist/mpi/.
//
// MPI moves data only while the process is inside an MPI call (Open MPI runs
// no progress thread of its own): that is MPI's progress rule. So a thread of
// our own makes every MPI call of the process, MPI_Init_thread included
// (MPI_THREAD_FUNNELED: MPI's main thread is this one). The other threads
// hand it jobs (collectives) through a queue, which it runs one after another
// in the order they came, the same order on every rank (MPI's rule for
// collectives). A gradient bucket's all-reduce thus runs while the compute
// threads run backward's products; a blocking collective (a broadcast, the
// loss's sum) is a queued one that its caller waits for.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

namespace sf::dist {

class CommunicationThread {
 public:
  using Request = int64_t;

  CommunicationThread() = default;
  CommunicationThread(const CommunicationThread&) = delete;
  CommunicationThread& operator=(const CommunicationThread&) = delete;

  // Starts the thread, which runs `first` (MPI's start), then serves the
  // queue; returns when `first` has, and throws what it threw.
  void start(std::function<void()> first);
  // Ends the thread once the jobs posted so far have run; its owner calls it
  // before the end of what the jobs use.
  void stop();

  // Queues `run`; it runs on the thread while the caller goes on.
  Request post(std::function<void()> run);
  // Waits for `request`'s job, and rethrows the exception of any job that failed.
  void wait(Request request);
  void run_and_wait(std::function<void()> run) { wait(post(std::move(run))); }

  bool on_thread() const { return std::this_thread::get_id() == thread_.get_id(); }
  // Ends every rank of the job with exit status `code`: the thread makes the
  // call, as soon as it sees the flag (between two tests of a wait, or at
  // once when idle). Never returns.
  [[noreturn]] void abort(int code);
  const std::atomic<int>& abort_code() const { return abort_code_; }

 private:
  struct Job {
    Request request;
    std::function<void()> run;
  };
  void serve();

  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable work_, done_;
  std::deque<Job> queue_;
  std::set<Request> pending_;  // posted, not finished
  Request next_request_ = 0;
  std::exception_ptr failure_;  // a job's exception, rethrown to whoever waits next
  bool stopping_ = false;
  std::atomic<int> abort_code_{-1};
};

}  // namespace sf::dist
