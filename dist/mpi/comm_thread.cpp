#include "comm_thread.h"

#include <chrono>
#include <cstdio>
#include <future>
#include <utility>

#include "base/error.h"
#include "liveness.h"

namespace sf::dist {

void CommunicationThread::start(std::function<void()> first) {
  std::promise<void> started;
  std::future<void> ready = started.get_future();
  thread_ = std::thread([&] {
    try {
      first();
    } catch (...) {
      started.set_exception(std::current_exception());
      return;
    }
    started.set_value();
    serve();
  });
  try {
    ready.get();
  } catch (...) {
    thread_.join();
    throw;
  }
}

void CommunicationThread::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
}

CommunicationThread::Request CommunicationThread::post(std::function<void()> run) {
  std::lock_guard lock(mutex_);
  Request request = next_request_++;
  queue_.push_back({request, std::move(run)});
  pending_.insert(request);
  work_.notify_all();
  return request;
}

void CommunicationThread::wait(Request request) {
  std::unique_lock lock(mutex_);
  if (request >= next_request_) internal_fail("wait: request ", request, " was never started");
  done_.wait(lock, [&] { return pending_.count(request) == 0; });
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

void CommunicationThread::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (on_thread()) end_job(code);
  {
    std::lock_guard lock(mutex_);
    abort_code_ = code;
  }
  work_.notify_all();
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // end_job ends this process
}

// The thread's loop: each job runs to its end, in order.
void CommunicationThread::serve() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return !queue_.empty() || stopping_ || abort_code_ >= 0; });
      if (abort_code_ >= 0) end_job(abort_code_);
      if (queue_.empty()) return;  // stopping, after MPI_Finalize
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      job.run();
    } catch (...) {
      std::lock_guard lock(mutex_);
      failure_ = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      pending_.erase(job.request);
    }
    done_.notify_all();
  }
}

}  // namespace sf::dist
